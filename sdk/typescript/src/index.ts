// The TypeScript client of the Queen for Go broker. `Queen.api` is the
// openapi-fetch client typed by ./schema.d.ts (generated from
// openapi/openapi.yaml: every route, its parameters, bodies and answers);
// the methods of Queen cover the data plane in a line each: push, long-poll
// pop, ack, lease renewal and the dead-letter list.
//
//   const queen = new Queen({ baseUrl: 'http://localhost:6632' });
//   await queen.push([{ queue: 'orders', payload: { total: 10 } }]);
//   const batch = await queen.pop('orders', { batch: 10, waitMs: 30000 });
//   if (batch) await queen.ack(batch.messages, 'completed');

import createClient, { type Client } from 'openapi-fetch';
import type { components, paths } from './schema.js';

type Schemas = components['schemas'];
export type PushItem = Schemas['PushItem'];
export type PushResult = Schemas['PushResult'];
export type PopResponse = Schemas['PopResponse'];
export type PoppedMessage = Schemas['PoppedMessage'];
export type AckStatus = Schemas['AckStatus'];
export type AckResult = Schemas['AckResult'];
export type LeaseExtendResponse = Schemas['LeaseExtendResponse'];
export type DeadLetterPage = Schemas['DeadLetterPage'];
export type DeadLetter = Schemas['DeadLetter'];
export type { components, paths };

type PopQuery = NonNullable<paths['/api/v1/pop/queue/{queue}']['get']['parameters']['query']>;
type DlqQuery = NonNullable<paths['/api/v1/dlq']['get']['parameters']['query']>;

/** An answer with a status the call did not expect. */
export class QueenError extends Error {
  constructor(
    readonly operation: string,
    readonly status: number,
    message: string,
  ) {
    super(`${operation}: HTTP ${status}: ${message}`);
    this.name = 'QueenError';
  }
}

export interface QueenOptions {
  /** The broker, e.g. http://localhost:6632. */
  baseUrl: string;
  /** A bearer token (brokers with JWT_ENABLED=true, or behind queen-proxy). */
  token?: string;
  /** Sent as x-queen-tenant: the tenant a broker with QUEEN_TENANCY_HEADER=true scopes this client to. */
  tenant?: string;
  /** Another fetch implementation (tests, proxies); default globalThis.fetch. */
  fetch?: typeof globalThis.fetch;
}

export interface PopOptions {
  /** Pop from this partition only; default any partition of the queue. */
  partition?: string;
  /** Most messages to return (default: the broker's DEFAULT_BATCH_SIZE). */
  batch?: number;
  /** Long-poll: wait up to this many milliseconds for a message; 0 answers at once. */
  waitMs?: number;
  /** The consumer group; default queue mode. */
  consumerGroup?: string;
  /** Where a new named group starts: `all` (the beginning) or `new`. */
  subscriptionMode?: PopQuery['subscriptionMode'];
  /** Aborts the request, a parked long-poll included. */
  signal?: AbortSignal;
}

/** What ack needs of a message: a popped message has all of it. */
export type AckTarget = Pick<PoppedMessage, 'transactionId' | 'partitionId' | 'leaseId'>;

export class Queen {
  /** The generated client, for every route the methods below do not cover. */
  readonly api: Client<paths>;

  constructor(opts: QueenOptions) {
    const headers: Record<string, string> = {};
    if (opts.token) headers.Authorization = `Bearer ${opts.token}`;
    if (opts.tenant) headers['x-queen-tenant'] = opts.tenant;
    this.api = createClient<paths>({
      baseUrl: opts.baseUrl.replace(/\/+$/, ''),
      headers,
      fetch: opts.fetch,
    });
  }

  /**
   * Pushes items in one request and returns one result per item, in order.
   * `queued`, `duplicate` (this transactionId is already in the partition)
   * and `buffered` (on the broker's disk spool) are success; a `failed`
   * item carries its `error`.
   */
  async push(items: PushItem[]): Promise<PushResult[]> {
    const { data, error, response } = await this.api.POST('/api/v1/push', { body: { items } });
    if (response.status !== 201 || !data) throw failure('pushMessages', response, error);
    return data;
  }

  /**
   * Pops from a queue; with `waitMs` the request parks on the broker until
   * a message arrives or the time is up. Resolves to null when nothing
   * arrived (204).
   */
  async pop(queue: string, opts: PopOptions = {}): Promise<PopResponse | null> {
    const query: PopQuery = {
      batch: opts.batch,
      wait: opts.waitMs !== undefined && opts.waitMs > 0 ? true : undefined,
      timeout: opts.waitMs,
      consumerGroup: opts.consumerGroup,
      subscriptionMode: opts.subscriptionMode,
    };
    const { data, error, response } = opts.partition
      ? await this.api.GET('/api/v1/pop/queue/{queue}/partition/{partition}', {
          params: { path: { queue, partition: opts.partition }, query },
          signal: opts.signal,
        })
      : await this.api.GET('/api/v1/pop/queue/{queue}', { params: { path: { queue }, query }, signal: opts.signal });
    if (response.status === 204) return null;
    if (response.status !== 200 || !data) throw failure('popMessages', response, error);
    return data;
  }

  /**
   * Acknowledges messages in one batch ack: `completed`, `failed` (retried
   * until the queue's retryLimit, then dead-lettered), `dlq` (dead-lettered
   * at once, with `error` as the reason) or `retry` (released, no retry
   * counted). One result per message, in order.
   */
  async ack(
    messages: AckTarget[],
    status: AckStatus,
    opts: { consumerGroup?: string; error?: string } = {},
  ): Promise<AckResult[]> {
    const { data, error, response } = await this.api.POST('/api/v1/ack/batch', {
      body: {
        consumerGroup: opts.consumerGroup,
        acknowledgments: messages.map((m) => ({
          transactionId: m.transactionId,
          partitionId: m.partitionId,
          leaseId: m.leaseId || undefined,
          status,
          error: opts.error,
        })),
      },
    });
    if (response.status !== 200 || !data) throw failure('ackBatch', response, error);
    return data;
  }

  /** Extends a pop's lease so that it expires no earlier than `seconds` from now (without `seconds`, the queue's leaseTime). */
  async extendLease(leaseId: string, seconds?: number): Promise<LeaseExtendResponse> {
    const { data, error, response } = await this.api.POST('/api/v1/lease/{leaseId}/extend', {
      params: { path: { leaseId } },
      body: seconds === undefined ? {} : { seconds },
    });
    if (response.status !== 200 || !data) throw failure('extendLease', response, error);
    return data;
  }

  /** Dead letters, newest failure first, with filters and paging. */
  async deadLetters(query: DlqQuery = {}): Promise<DeadLetterPage> {
    const { data, error, response } = await this.api.GET('/api/v1/dlq', { params: { query } });
    if (response.status !== 200 || !data) throw failure('listDeadLetters', response, error);
    return data;
  }
}

// failure builds the error of an unexpected answer from the body that
// openapi-fetch already parsed: the broker's {"error": "..."}, or its text.
function failure(operation: string, response: Response, error: unknown): QueenError {
  let message = response.statusText;
  if (typeof error === 'string' && error) message = error;
  else if (error && typeof error === 'object' && typeof (error as { error?: unknown }).error === 'string') {
    message = (error as { error: string }).error;
  }
  return new QueenError(operation, response.status, message);
}
