package handlers

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
)

// Producers push four partitions while three groups of three consumers pop
// them with autoAck: each group gets every message exactly once, and the
// batches a group got from a partition tile that partition's sequence in
// order (no gap, no overlap, in order inside each batch), however the
// consumers of the group raced for the cursor.
func TestAutoAckFanOutExactlyOnceInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const partitions, producers, perProducer = 4, 4, 60
	const total = producers * perProducer
	groups := []string{"ga", "gb", "gc"}

	var pwg sync.WaitGroup
	for p := range producers {
		pwg.Go(func() {
			for i := 0; i < perProducer; i += 5 {
				var items []client.PushItem
				for j := i; j < i+5; j++ {
					part := fmt.Sprintf("p%d", (p+j)%partitions)
					items = append(items, item("fan", part, fmt.Sprintf("m%d-%03d", p, j), j))
				}
				b.push(items...)
			}
		})
	}

	type batch struct {
		partition string
		txs       []string
	}
	var mu sync.Mutex
	got := map[string][]batch{} // by group
	count := map[string]int{}
	var cwg sync.WaitGroup
	for _, g := range groups {
		for range 3 {
			cwg.Go(func() {
				deadline := time.Now().Add(60 * time.Second)
				for time.Now().Before(deadline) {
					mu.Lock()
					done := count[g] >= total
					mu.Unlock()
					if done {
						return
					}
					p := b.pop("/api/v1/pop/queue/fan?batch=7&autoAck=true&wait=true&timeout=200&subscriptionMode=all&consumerGroup=" + g)
					if p == nil {
						continue
					}
					require.Empty(t, p.LeaseID)
					bt := batch{partition: p.Messages[0].Partition}
					for _, m := range p.Messages {
						require.Equal(t, bt.partition, m.Partition, "one partition per pop")
						require.Empty(t, m.LeaseID)
						bt.txs = append(bt.txs, m.TransactionID)
					}
					mu.Lock()
					got[g] = append(got[g], bt)
					count[g] += len(bt.txs)
					mu.Unlock()
				}
			})
		}
	}
	pwg.Wait()
	cwg.Wait()

	stored := map[string][]string{} // partition -> transaction ids in sequence order
	rows, err := b.pool.Query(t.Context(),
		"SELECT p.name, m.transaction_id FROM queen.messages m JOIN queen.partitions p ON p.id = m.partition_id ORDER BY m.seq")
	require.NoError(t, err)
	for rows.Next() {
		var part, tx string
		require.NoError(t, rows.Scan(&part, &tx))
		stored[part] = append(stored[part], tx)
	}
	require.NoError(t, rows.Err())
	pos := map[string]int{} // transaction id -> its place in its partition
	for _, txs := range stored {
		for i, tx := range txs {
			pos[tx] = i
		}
	}
	for _, g := range groups {
		require.Equal(t, total, count[g], "group %s: every message once", g)
		byPart := map[string][]batch{}
		for _, bt := range got[g] {
			byPart[bt.partition] = append(byPart[bt.partition], bt)
		}
		for part, bts := range byPart {
			sort.Slice(bts, func(i, j int) bool { return pos[bts[i].txs[0]] < pos[bts[j].txs[0]] })
			var joined []string
			for _, bt := range bts {
				joined = append(joined, bt.txs...)
			}
			require.Equal(t, stored[part], joined, "group %s, partition %s: batches tile the partition in order", g, part)
		}
	}
}

// An autoAck pop never takes a partition whose lease another consumer of
// the group holds, and continues after what that consumer acked; once the
// cursor row exists the autoAck pops move it without a lease, and a leased
// pop afterwards starts past them. The cursor row ends unleased with the
// group's totals.
func TestAutoAckAndLeasedPopsShareTheCursor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(item("mix", "", "m0", 0), item("mix", "", "m1", 1), item("mix", "", "m2", 2))
	leased := b.pop("/api/v1/pop/queue/mix?batch=2&consumerGroup=g")
	require.NotNil(t, leased)
	require.Len(t, leased.Messages, 2)
	require.Nil(t, b.pop("/api/v1/pop/queue/mix?batch=10&autoAck=true&consumerGroup=g"), "the lease is held")
	require.Nil(t, b.pop("/api/v1/pop/queue/mix/partition/Default?batch=10&autoAck=true&consumerGroup=g"), "the lease is held")
	for _, m := range leased.Messages {
		require.True(t, b.ack(m.TransactionID, m.PartitionID, "completed", "g", leased.LeaseID).Success)
	}

	auto := b.pop("/api/v1/pop/queue/mix?batch=10&autoAck=true&consumerGroup=g")
	require.NotNil(t, auto)
	require.Len(t, auto.Messages, 1)
	require.Equal(t, "m2", auto.Messages[0].TransactionID)
	require.Nil(t, b.pop("/api/v1/pop/queue/mix?batch=10&autoAck=true&consumerGroup=g"))

	b.push(item("mix", "", "m3", 3), item("mix", "", "m4", 4))
	auto = b.pop("/api/v1/pop/queue/mix/partition/Default?batch=1&autoAck=true&consumerGroup=g")
	require.NotNil(t, auto)
	require.Equal(t, "m3", auto.Messages[0].TransactionID)
	leased = b.pop("/api/v1/pop/queue/mix?batch=10&consumerGroup=g")
	require.NotNil(t, leased)
	require.Len(t, leased.Messages, 1)
	require.Equal(t, "m4", leased.Messages[0].TransactionID)
	require.True(t, b.ack("m4", leased.Messages[0].PartitionID, "completed", "g", leased.LeaseID).Success)

	var lease *string
	var consumed, batches int64
	var last string
	require.NoError(t, b.pool.QueryRow(t.Context(),
		`SELECT pc.lease_id, pc.total_messages_consumed, pc.total_batches_consumed, m.transaction_id
		   FROM queen.partition_consumers pc
		   JOIN queen.messages m ON m.partition_id = pc.partition_id AND m.seq = pc.last_seq
		  WHERE pc.consumer_group = 'g'`).Scan(&lease, &consumed, &batches, &last))
	require.Nil(t, lease)
	require.Equal(t, int64(5), consumed)
	require.Equal(t, int64(4), batches)
	require.Equal(t, "m4", last)
	// Queue mode, another group, still has everything.
	p := b.pop("/api/v1/pop/queue/mix?batch=10&autoAck=true")
	require.NotNil(t, p)
	require.Len(t, p.Messages, 5)
}

// A lease that expired without an ack is the documented redelivery: an
// autoAck pop of the same group then gets the batch again, from the
// cursor, and the expired lease can no longer ack.
func TestAutoAckTakesOverAnExpiredLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.configure("exp", &client.QueueOptions{LeaseTime: ptr(1)})
	b.push(item("exp", "", "m0", 0))
	// A first autoAck pop of the group creates its cursor row.
	first := b.pop("/api/v1/pop/queue/exp?autoAck=true&consumerGroup=g")
	require.NotNil(t, first)
	b.push(item("exp", "", "m1", 1))
	leased := b.pop("/api/v1/pop/queue/exp?consumerGroup=g")
	require.NotNil(t, leased)
	require.Equal(t, "m1", leased.Messages[0].TransactionID)
	again := b.pop("/api/v1/pop/queue/exp?autoAck=true&consumerGroup=g&wait=true&timeout=10000")
	require.NotNil(t, again, "the lease expired")
	require.Equal(t, "m1", again.Messages[0].TransactionID)
	require.False(t, b.ack("m1", leased.PartitionID, "completed", "g", leased.LeaseID).Success, "the expired lease may not ack")
	require.Nil(t, b.pop("/api/v1/pop/queue/exp?consumerGroup=g"))
}

// One autoAck pop over several partitions takes those where the group has
// a cursor row in one statement each and creates the missing rows the
// general way, in the same pop; a group subscribed "new" by an autoAck pop
// gets only what came after, on old and new partitions alike.
func TestAutoAckSeveralPartitionsAndNewCursors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(item("sev", "p0", "a0", 0), item("sev", "p1", "a1", 1))
	p := b.pop("/api/v1/pop/queue/sev?batch=10&partitions=5&autoAck=true&consumerGroup=g")
	require.NotNil(t, p)
	require.Len(t, p.Messages, 2)
	require.Nil(t, b.pop("/api/v1/pop/queue/sev?batch=10&partitions=5&autoAck=true&consumerGroup=fresh&subscriptionMode=new"))

	b.push(item("sev", "p0", "b0", 0), item("sev", "p1", "b1", 1), item("sev", "p2", "b2", 2))
	for _, g := range []string{"g", "fresh"} {
		p = b.pop("/api/v1/pop/queue/sev?batch=10&partitions=5&autoAck=true&consumerGroup=" + g)
		require.NotNil(t, p, g)
		var txs []string
		for _, m := range p.Messages {
			txs = append(txs, m.TransactionID)
		}
		require.ElementsMatch(t, []string{"b0", "b1", "b2"}, txs, g)
		require.Nil(t, b.pop("/api/v1/pop/queue/sev?batch=10&partitions=5&autoAck=true&consumerGroup="+g), g)
	}
	// A budget smaller than what is pending ends the pop where it is spent.
	b.push(item("sev", "p0", "c0", 0), item("sev", "p0", "c1", 1), item("sev", "p1", "c2", 2))
	p = b.pop("/api/v1/pop/queue/sev/partition/p0?batch=1&autoAck=true&consumerGroup=g")
	require.NotNil(t, p)
	require.Len(t, p.Messages, 1)
	require.Equal(t, "c0", p.Messages[0].TransactionID)
	p = b.pop("/api/v1/pop/queue/sev?batch=2&partitions=5&autoAck=true&consumerGroup=g")
	require.NotNil(t, p)
	require.Len(t, p.Messages, 2)
}
