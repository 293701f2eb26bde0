-- name: EventListen :exec
-- Subscribes the session to broker events (handlers/pgevents). The channel
-- name is fixed: brokers and the SQL API agree on it.
LISTEN queen_events;

-- name: EventNotify :exec
-- Publishes one broker event (a JSON object of at most 7900 bytes; see
-- handlers/pgevents). Delivered to every listener when the transaction
-- commits, so a NOTIFY inside a push transaction wakes nobody early.
SELECT pg_notify('queen_events', @payload::text);
