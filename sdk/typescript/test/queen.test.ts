// Runs against a real broker at QUEEN_URL (default http://localhost:6632):
// `make test` runs it through sdk/typescript/sdk_test.go, which starts one.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Queen, QueenError } from '../src/index.js';

const baseUrl = process.env.QUEEN_URL ?? 'http://localhost:6632';
const queen = new Queen({ baseUrl });
// Queue names of their own, so a run against a long-lived broker starts clean.
const run = `ts${Date.now().toString(36)}`;

test('push, long-poll pop and ack', async () => {
  const queue = `${run}-orders`;
  const pushed = await queen.push([
    { queue, partition: 'p1', transactionId: 'o-1', payload: { order: 1 } },
    { queue, partition: 'p1', transactionId: 'o-2', payload: { order: 2 } },
  ]);
  assert.deepEqual(pushed.map((r) => r.status), ['queued', 'queued']);
  const again = await queen.push([{ queue, partition: 'p1', transactionId: 'o-1', payload: { order: 1 } }]);
  assert.equal(again[0].status, 'duplicate');

  const batch = await queen.pop(queue, { batch: 10, waitMs: 5000 });
  assert.ok(batch, 'two messages are waiting');
  assert.deepEqual(batch.messages.map((m) => m.transactionId), ['o-1', 'o-2']);
  assert.deepEqual(batch.messages[0].data, { order: 1 });
  assert.ok(batch.leaseId);

  const renewed = await queen.extendLease(batch.leaseId, 30);
  assert.equal(renewed.success, true);

  const acked = await queen.ack(batch.messages, 'completed');
  assert.deepEqual(acked.map((r) => r.success), [true, true]);
  assert.equal(await queen.pop(queue, { waitMs: 0 }), null, 'nothing left after the ack');
});

test('a parked long-poll wakes up on a push', async () => {
  const queue = `${run}-wake`;
  // Nothing there: the broker holds the request for the whole wait, then
  // answers 204.
  assert.equal(await queen.pop(queue, { waitMs: 300 }), null);

  const parked = queen.pop(queue, { waitMs: 20000 });
  await queen.push([{ queue, transactionId: 'w-1', payload: 'hello' }]);
  const batch = await parked;
  assert.ok(batch, 'the push woke the parked pop');
  assert.equal(batch.messages[0].transactionId, 'w-1');
  assert.equal(batch.messages[0].data, 'hello');
  await queen.ack(batch.messages, 'completed');
});

test('a long-poll can be aborted', async () => {
  const ctl = new AbortController();
  const parked = queen.pop(`${run}-abort`, { waitMs: 60000, signal: ctl.signal });
  ctl.abort();
  await assert.rejects(parked, (err: Error) => err.name === 'AbortError');
});

test('dead letters', async () => {
  const queue = `${run}-dlq`;
  await queen.push([{ queue, partition: 'eu', transactionId: 'bad-1', payload: { card: 'declined' } }]);
  const batch = await queen.pop(queue, { waitMs: 5000, consumerGroup: 'billing', subscriptionMode: 'all' });
  assert.ok(batch);
  const [res] = await queen.ack(batch.messages, 'dlq', { consumerGroup: 'billing', error: 'card declined' });
  assert.equal(res.success, true);
  assert.equal(res.dlq, true);

  const page = await queen.deadLetters({ queue, limit: 10 });
  assert.equal(page.total, 1);
  const [dl] = page.messages;
  assert.equal(dl.transactionId, 'bad-1');
  assert.equal(dl.partition, 'eu');
  assert.equal(dl.consumerGroup, 'billing');
  assert.equal(dl.errorMessage, 'card declined');
  assert.deepEqual(dl.data, { card: 'declined' });
  const none = await queen.deadLetters({ queue, partition: 'us' });
  assert.equal(none.total, 0);
});

test('bad input is a QueenError with the broker message', async () => {
  await assert.rejects(queen.push([{ queue: 'not a name', payload: 1 }]), (err: unknown) => {
    assert.ok(err instanceof QueenError);
    assert.equal(err.status, 400);
    assert.equal(err.operation, 'pushMessages');
    assert.match(err.message, /queue/);
    return true;
  });
});

test('the generated client reaches every route', async () => {
  const { data, response } = await queen.api.GET('/health');
  assert.equal(response.status, 200);
  assert.equal(data?.status, 'healthy');
});
