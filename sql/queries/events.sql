-- name: EventListen :exec
-- Subscribes the session to broker events (handlers/pgevents). The channel
-- name is fixed: brokers and the SQL API agree on it.
LISTEN queen_events;

-- name: EventNotify :exec
-- Publishes one broker event (a JSON object of at most 7900 bytes; see
-- handlers/pgevents). Delivered to every listener when the transaction
-- commits, so a NOTIFY inside a push transaction wakes nobody early.
SELECT pg_notify('queen_events', @payload::text);

-- name: EventPublish :exec
-- EventNotify for a broker's own announcements, each its own statement in
-- autocommit, with an asynchronous commit: a NOTIFY takes a transaction id,
-- so its commit otherwise waits for a WAL flush of its own, one per push
-- flush at high rates, and the push commits queue behind those flushes.
-- A notification is a hint (listeners re-poll), so one lost to a crash of
-- the database in the next few hundred milliseconds costs nothing; what it
-- announces was committed synchronously before it was sent. Never inside a
-- transaction: set_config(..., true) would make that transaction's commit
-- asynchronous too.
SELECT set_config('synchronous_commit', 'off', true), pg_notify('queen_events', @payload::text);
