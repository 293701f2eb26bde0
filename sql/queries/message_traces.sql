-- name: TraceInsert :one
INSERT INTO queen.message_traces (message_id, partition_id, transaction_id, consumer_group, event_type, data, worker_id)
VALUES (@message_id, @partition_id, @transaction_id, @consumer_group, @event_type, @data, sqlc.narg(worker_id))
RETURNING id;

-- name: TraceNameInsertMany :exec
INSERT INTO queen.message_trace_names (trace_id, trace_name)
SELECT @trace_id, n FROM unnest(@names::text[]) AS n
ON CONFLICT DO NOTHING;
