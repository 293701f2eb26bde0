package broker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/db"
)

// partRef is a partition a pop may claim: with the partition's last seq
// and the ticket taken when the scan that found it returned
// (autoack_race.go), both 0 for a named partition; for the partition a
// push offered the pop it woke (pushed_hint.go), the last message that
// push stored there.
type partRef struct {
	id     uuid.UUID
	name   string
	last   int64
	listed uint64
	pushed uuid.UUID
}

// left reports whether p may hold claimable messages after c, a claim of
// it that delivered up to budget.
func (p partRef) left(c *claimed, budget int) bool {
	n := c.count()
	switch {
	case p.listed > 0: // what the scan saw there
		return c.lastSeq() < p.last
	case p.pushed != uuid.Nil: // a full batch short of what the push stored
		return n >= budget && !deliveredID(c, p.pushed)
	default: // a named partition, which nothing scanned: a full batch
		return n >= budget
	}
}

// claimAutoAck is an autoAck pop's claim of up to maxParts of parts, tried
// in their order, until budget messages are delivered. Where the group's
// cursor row on a partition exists, one statement reads the batch and
// moves the cursor past it (PartitionConsumerAutoAckRead, sent in the
// reads' group commit, read_commit.go: one commit for the reads that wait
// together) and no lease, and a partition another consumer of the group is
// popping right now is passed over at once (by this broker before any
// statement when the other pop is its own, autoack_race.go, otherwise by
// the statement's SKIP LOCKED). Where the row does not exist
// yet, the partition is claimed the general way (claim), which creates it
// where the group's subscription starts and finishes the autoAck after.
//
// (Sending all the candidates in one statement that takes the first it
// can was tried: fewer round trips, but PostgreSQL spent more on that
// statement than on the round trips it saved; docs/benchmarks.md.)
//
// The subscription lookup only matters for a new cursor row, which claim
// makes itself; it is made first here too when the pop carries a start
// point of its own (subscriptionMode new, or subscriptionFrom), because the
// group's first such pop stores it even where its cursor rows exist.
func (b *Broker) claimAutoAck(ctx context.Context, pr popPlan, q db.QueenQueue, parts []partRef, leaseID string, budget, maxParts int, targeted bool) ([]claimed, error) {
	if len(parts) > 0 && pr.Group != QueueModeGroup && (pr.subscribeNew || pr.subscribeFrom != nil) {
		if _, err := b.subscriptionStart(ctx, pr, q.Name, parts[0].name, targeted); err != nil {
			return nil, err
		}
	}
	var got []claimed
	look := pr.lookKey()
	left := false      // claimable messages seen and not taken
	var rest []partRef // the scanned candidates with those (leftHint)
	for i, p := range parts {
		if len(got) >= maxParts || budget <= 0 {
			// Candidates not tried; those another claim of this broker
			// is taking or took wake nobody (that claim's pop, or the
			// push after it, does).
			rest = b.claimable(rest, parts[i:], pr.Group)
			left = left || len(rest) > 0
			break
		}
		rk := raceKey{p.id, pr.Group}
		var t uint64
		var ok bool
		if p.pushed != uuid.Nil {
			// A pushed partition claimed right now by another pop: the
			// pop scans instead (claimPushed), and its scan passes the
			// partition over as any scan does.
			t, ok = b.race.beginUnlisted(rk)
		} else {
			t, ok = b.race.begin(rk, p.listed, p.last, look)
		}
		if !ok {
			continue
		}
		c, err := b.claimPartAutoAck(ctx, pr, q, p, leaseID, budget, targeted)
		var cursor int64
		if c != nil {
			cursor = c.lastSeq()
		}
		b.raceEnd(rk, t, cursor)
		if err != nil {
			return got, err
		}
		if cursor > 0 {
			got = append(got, *c)
			if p.left(c, budget) {
				left = true
				if p.listed > 0 {
					rest = append(rest, p)
				}
			}
			budget -= c.count()
		}
	}
	limit := len(parts) > 0 && parts[0].listed > 0 && len(parts) >= popCandidates(pr.MaxPartitions)
	if limit {
		left = true // the scan stopped at its limit: there may be more
	}
	switch {
	case left:
		// Another pop of the key may take it: pushes wake only as many
		// autoAck pops as they filled partitions (wake_pushed.go). When
		// one is due already, its look will see what this one left
		// (due_looks.go): then, as after a look that took all it saw, the
		// consumer's next long-poll need not look.
		// What is left goes on with the hint: the partition a push
		// filled, or the candidates of a scan that did not stop at its
		// limit (with it, other partitions may hold messages the scan
		// did not list: then a pop woken for anything scans). When a pop
		// takes it, the whole look is answered as when a pop is due.
		var hint *pushedPart
		switch {
		case parts[0].pushed != uuid.Nil:
			hint = pr.hint // what is left there goes on with the partition
		case len(rest) > 0 && !limit && pr.takesHint() && pushedHintable(q):
			hint = &pushedPart{queueID: q.ID, listed: rest}
		}
		if b.handOn(look, hint) != handWoke && pr.Queue != "" && !pr.started.at.IsZero() {
			b.sawEmpty(look, pr.started)
		}
	case len(got) > 0 && pr.Queue != "" && !pr.started.at.IsZero():
		// This look took all it saw that no other claim here is taking:
		// the consumer's next long-poll may park without a look, as
		// after an empty one (known_empty.go), until a wake-up.
		b.sawEmpty(look, pr.started)
	}
	return got, nil
}

// popCandidates is how many candidate partitions a pop's scan asks for.
func popCandidates(maxPartitions int) int { return maxPartitions*2 + 8 }

// claimable appends to dst those of parts a pop of group might claim, as
// far as this broker knows (autoack_race.go), and returns it.
func (b *Broker) claimable(dst, parts []partRef, group string) []partRef {
	for _, p := range parts {
		if !b.race.wouldPass(raceKey{p.id, group}, p.listed, p.last) {
			dst = append(dst, p)
		}
	}
	return dst
}

// claimPartAutoAck is claimAutoAck's claim of one partition.
// The rows another group's read of p kept serve it when they can
// (read_share.go); the rows it reads are kept for the other groups.
func (b *Broker) claimPartAutoAck(ctx context.Context, pr popPlan, q db.QueenQueue, p partRef, leaseID string, budget int, targeted bool) (*claimed, error) {
	if c, ok, err := b.claimShared(ctx, pr, q, p, budget); ok || err != nil {
		return c, err
	}
	if pushedHintable(q) {
		if r := b.shared.begin(p.id); r != nil {
			defer b.shared.end(p.id, r)
		}
	}
	epoch, sent := b.shared.epoch.Load(), time.Now()
	b.shared.reads.Add(1)
	rows, err := b.readAutoAck(ctx, readItem{
		PartitionID: p.id, ConsumerGroup: pr.Group, DelaySeconds: q.DelayedProcessing, BatchSize: int32(budget),
	})
	if err != nil {
		return nil, fmt.Errorf("autoAck claim of partition %s: %w", p.id, err)
	}
	if len(rows) == 0 || !rows[0].CursorFound {
		return b.claim(ctx, pr, q, p.id, p.name, leaseID, budget, targeted)
	}
	if rows[0].Seq == 0 {
		return nil, nil
	}
	autoAckInOrder(rows)
	if pushedHintable(q) {
		b.shared.keep(q.ID, p.id, rows, budget, sent, epoch)
	}
	c := autoAckClaimed(q, p, rows)
	return &c, nil
}

// autoAckInOrder puts an autoAck read's rows in seq order. The statement
// returns them as its batch read them, in that order, without an ORDER BY
// that would sort (copy) the whole batch again; SQL does not promise it, so
// this checks it and sorts only when it does not hold.
func autoAckInOrder(rows []db.PartitionConsumerAutoAckReadRow) {
	bySeq := func(a, b db.PartitionConsumerAutoAckReadRow) int { return cmp.Compare(a.Seq, b.Seq) }
	if !slices.IsSortedFunc(rows, bySeq) {
		slices.SortFunc(rows, bySeq)
	}
}

// claimOneAutoAck is claimAutoAck of one partition, in claim's shape.
func (b *Broker) claimOneAutoAck(ctx context.Context, pr popPlan, q db.QueenQueue, partID uuid.UUID, partName, leaseID string, limit int, targeted bool) (*claimed, error) {
	got, err := b.claimAutoAck(ctx, pr, q, []partRef{{id: partID, name: partName}}, leaseID, limit, 1, targeted)
	if err != nil || len(got) == 0 {
		return nil, err
	}
	return &got[0], nil
}

// autoAckClaimed is what PartitionConsumerAutoAckRead delivered from p,
// its rows kept as read.
func autoAckClaimed(q db.QueenQueue, p partRef, rows []db.PartitionConsumerAutoAckReadRow) claimed {
	return claimed{queue: q, partitionID: p.id, partitionName: p.name, retryCount: int(rows[0].BatchRetryCount), autoAcked: rows}
}
