package main

import (
	"context"
	"errors"
	"fmt"
)

// backlogDrainSQL makes the group (and queue mode) have consumed the older
// half of the queue's partitions, as a drain that just got halfway would
// leave them, without the minutes the pops would take: cursors at each
// partition's last_seq, no lease.
const backlogDrainSQL = `
INSERT INTO queen.partition_consumers (partition_id, consumer_group, last_seq)
SELECT h.id, g.name, h.last_seq
FROM (SELECT p.id, p.last_seq
        FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id
       WHERE q.name = $1
       ORDER BY p.last_message_at, p.id
       LIMIT (SELECT count(*) / 2 FROM queen.partitions p JOIN queen.queues q ON q.id = p.queue_id WHERE q.name = $1)) h
CROSS JOIN unnest($2::text[]) AS g(name)
ON CONFLICT (partition_id, consumer_group) DO UPDATE
SET last_seq = GREATEST(queen.partition_consumers.last_seq, EXCLUDED.last_seq),
    lease_id = NULL, lease_expires_at = NULL`

// backlogRecentSQL moves the queue's partition times up by one shift, so
// that the newest is now and the spacing stays: a kept backlog then looks to
// the pops' scans like one whose fill just ended (within the 2 minutes a
// clock-bound scan start trails by), without filling again.
const backlogRecentSQL = `
UPDATE queen.partitions p
SET last_message_at = p.last_message_at + d.shift
FROM queen.queues q,
     (SELECT now() - max(p2.last_message_at) AS shift
        FROM queen.partitions p2 JOIN queen.queues q2 ON q2.id = p2.queue_id
       WHERE q2.name = $1) d
WHERE q.id = p.queue_id AND q.name = $1 AND d.shift > interval '0'`

// backlogQueueModeGroup is the cursor name queue-mode pops use
// (handlers/broker.QueueModeGroup).
const backlogQueueModeGroup = "__QUEUE_MODE__"

// backlogDrainedPops times one pop shape on the backlog with its older half
// consumed by the shape's group: the pops' candidate scan must not walk the
// consumed partitions (docs/benchmarks.md, "Performance round 2: deep
// backlog").
func (b *bench) backlogDrainedPops(ctx context.Context, queue string, shape popShape) (result, error) {
	if b.pg == nil {
		return result{}, errors.New("-backlog-drain needs -pg")
	}
	group := shape.group
	if group == "" {
		group = backlogQueueModeGroup
	}
	if b.cfg.BacklogRecent {
		tag, err := b.pg.Exec(ctx, backlogRecentSQL, queue)
		if err != nil {
			return result{}, fmt.Errorf("restamp %s: %w", queue, err)
		}
		// The update leaves a dead version of each row and index entry.
		if _, err := b.pg.Exec(ctx, "VACUUM (ANALYZE) queen.partitions"); err != nil {
			return result{}, fmt.Errorf("vacuum partitions: %w", err)
		}
		fmt.Fprintf(b.log, "queen-bench: backlog: %s: %d partitions restamped up to now\n", shape.name, tag.RowsAffected())
	}
	tag, err := b.pg.Exec(ctx, backlogDrainSQL, queue, []string{group})
	if err != nil {
		return result{}, fmt.Errorf("consume half of %s: %w", queue, err)
	}
	fmt.Fprintf(b.log, "queen-bench: backlog: %s: %d partitions marked consumed by %s\n", shape.name, tag.RowsAffected(), group)
	res, err := b.backlogPops(ctx, queue, shape, false)
	res.Scenario = "backlog pop " + shape.name + ", older half of the partitions consumed"
	if b.cfg.BacklogRecent {
		res.Scenario += ", newest pushed just now"
	}
	return res, err
}
