-- Wildcard pops find candidate partitions by walking this index from the
-- group's watermark, so idle partitions cost nothing.
CREATE INDEX partitions_queue_last_message_idx ON queen.partitions (queue_id, last_message_at);

-- consumer_watermarks: per (queue, group), partitions whose newest message is
-- older than scan_from had nothing pending for the group when it was set.
-- It only advances after a scan that found nothing to claim, trailing the
-- oldest pending partition (leased ones included) by a safety margin; a
-- push moves a partition's last_message_at to now, so new data is always
-- above it. Anything else that can make old partitions pending again (seek,
-- subscription change, group deletion) resets it to -infinity and stamps
-- reset_at; an advance computed before the reset is ignored.
CREATE TABLE queen.consumer_watermarks (
    queue_id       uuid NOT NULL REFERENCES queen.queues (id) ON DELETE CASCADE,
    consumer_group text NOT NULL,
    scan_from      timestamptz NOT NULL,
    reset_at       timestamptz NOT NULL DEFAULT '-infinity',
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue_id, consumer_group)
);
