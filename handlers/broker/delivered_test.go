package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/db"
)

// deliveredBatchOf is a claimed batch of n messages tx-<prefix>-1..n of one
// partition, as a pop reads it.
func deliveredBatchOf(prefix string, n int, leaseSeconds int32) claimed {
	c := claimed{queue: db.QueenQueue{Name: "q", LeaseTime: leaseSeconds}, partitionID: uuid.New(), partitionName: "p"}
	for i := range n {
		c.messages = append(c.messages, db.PartitionConsumerClaimAndReadRow{
			Seq: int64(i + 1), ID: uuid.New(), TransactionID: fmt.Sprintf("tx-%s-%d", prefix, i+1), VacantSeqs: 7,
		})
	}
	return c
}

func ackItemsOf(tenant string, c claimed) []AckItem {
	items := make([]AckItem, len(c.messages))
	for i, m := range c.messages {
		items[i] = AckItem{TransactionID: m.TransactionID, PartitionID: c.partitionID, Group: QueueModeGroup, tenant: tenant}
	}
	return items
}

// An ack of messages this broker delivered is answered from memory: no
// statement runs (the queries handle is nil here and would panic), and
// what it finds is what the pop read, with the partition's vacant count.
func TestFindAckedAnswersRememberedDeliveriesWithoutReading(t *testing.T) {
	mem := newDeliveries(deliveriesMax)
	c := deliveredBatchOf("a", 3, 30)
	mem.remember(defaultTenantID, []claimed{c}, time.Now())

	msgs, found, vacant, err := findAcked(t.Context(), nil, ackItemsOf(DefaultTenant, c), mem)
	require.NoError(t, err)
	for i, m := range c.messages {
		require.True(t, found[i])
		require.EqualValues(t, 7, vacant[i])
		require.Equal(t, m.Seq, msgs[i].Seq)
		require.Equal(t, m.ID, msgs[i].ID)
		require.Equal(t, "q", msgs[i].QueueName)
		require.Equal(t, "p", msgs[i].PartitionName)
	}
}

// Memory stays bounded: acked batches, batches whose lease ended and, past
// the limit, the oldest batches are forgotten.
func TestDeliveriesForget(t *testing.T) {
	now := time.Now()
	remembered := func(mem *deliveries, c claimed) bool {
		_, ok := mem.lookup(deliveredKey{defaultTenantID, c.partitionID, c.messages[0].TransactionID})
		return ok
	}

	mem := newDeliveries(10)
	a, b := deliveredBatchOf("a", 4, 30), deliveredBatchOf("b", 4, 30)
	mem.remember(defaultTenantID, []claimed{a}, now)
	mem.remember(defaultTenantID, []claimed{b}, now)
	mem.forget(ackItemsOf(DefaultTenant, a))
	require.False(t, remembered(mem, a))
	mem.remember(defaultTenantID, []claimed{deliveredBatchOf("c", 1, 30)}, now)
	require.Equal(t, 5, mem.held, "the acked batch is swept")
	require.True(t, remembered(mem, b))

	// Over the limit: the oldest batch goes.
	d := deliveredBatchOf("d", 6, 30)
	mem.remember(defaultTenantID, []claimed{d}, now)
	require.False(t, remembered(mem, b))
	require.True(t, remembered(mem, d))
	require.LessOrEqual(t, mem.held, 10)

	// A batch larger than the limit is not remembered at all.
	big := deliveredBatchOf("big", 11, 30)
	mem.remember(defaultTenantID, []claimed{big}, now)
	require.False(t, remembered(mem, big))

	// After the lease: forgotten at the next remember.
	mem.remember(defaultTenantID, []claimed{deliveredBatchOf("e", 1, 30)}, now.Add(31*time.Second))
	require.False(t, remembered(mem, d))
	require.Equal(t, 1, mem.held)
	require.Len(t, mem.msgs, 1)
}

// A message deleted between the pop and its ack is not found, as when the
// ack read it: the partition's vacant count moved, so the remembered batch
// is read again.
func TestAckOfADeletedMessageThatWasRemembered(t *testing.T) {
	tb := setup(t)
	p := tb.pushRun(DefaultTenant, "memdel", "a", 3)
	gone, err := tb.b.DeleteMessage(t.Context(), DefaultTenant, p.PartitionID, p.Messages[1].TransactionID)
	require.NoError(t, err)
	require.True(t, gone)

	items := []AckItem{
		ackOf(p.Messages[0].TransactionID, p, AckCompleted, ""),
		ackOf(p.Messages[1].TransactionID, p, AckCompleted, ""),
		ackOf(p.Messages[2].TransactionID, p, AckCompleted, ""),
	}
	res, err := tb.b.Ack(t.Context(), DefaultTenant, items)
	require.NoError(t, err)
	require.NoError(t, res[0].Refused)
	require.ErrorIs(t, res[1].Refused, ErrNotFound)
	require.Empty(t, res[1].Queue)
	require.NoError(t, res[2].Refused)
}

// An ack of a remembered message whose queue was deleted (its partition
// and cursor with it) is not found.
func TestAckAfterTheQueueWasDeleted(t *testing.T) {
	tb := setup(t)
	p := tb.pushRun(DefaultTenant, "memq", "a", 2)
	ok, err := tb.b.DeleteQueue(t.Context(), DefaultTenant, "memq")
	require.NoError(t, err)
	require.True(t, ok)

	res, err := tb.b.Ack(t.Context(), DefaultTenant, []AckItem{
		ackOf(p.Messages[0].TransactionID, p, AckCompleted, ""),
		ackOf(p.Messages[1].TransactionID, p, AckCompleted, ""),
	})
	require.NoError(t, err)
	for _, r := range res {
		require.ErrorIs(t, r.Refused, ErrNotFound)
	}
}

// A broker that did not deliver the batch (another instance, or this one
// after a restart) acks it by reading the messages: the cursor passes it,
// and nothing is delivered again.
func TestAckOnABrokerThatDidNotPop(t *testing.T) {
	tb := setup(t)
	p := tb.pushRun(DefaultTenant, "memother", "a", 5)
	other := New(Config{Pool: tb.pool, RepollInterval: 50 * time.Millisecond})
	require.NoError(t, other.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, other.Stop(t.Context())) })

	var items []AckItem
	for _, m := range p.Messages {
		items = append(items, ackOf(m.TransactionID, p, AckCompleted, ""))
	}
	res, err := other.Ack(t.Context(), DefaultTenant, items)
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Refused)
		require.Equal(t, "memother", r.Queue)
	}
	require.True(t, res[len(res)-1].LeaseReleased)
	var lastSeq int64
	require.NoError(t, tb.pool.QueryRow(t.Context(),
		`SELECT last_seq FROM queen.partition_consumers WHERE partition_id = $1`, p.PartitionID).Scan(&lastSeq))
	require.EqualValues(t, 5, lastSeq)
	require.Nil(t, tb.pop(PopRequest{Tenant: DefaultTenant, Queue: "memother", Batch: 10}))
}
