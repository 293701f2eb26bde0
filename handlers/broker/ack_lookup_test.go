package broker

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// pushRun pushes n messages tx-<prefix>-1..n to one partition of queue and
// pops them all in queue mode.
func (tb *testBundle) pushRun(tenant, queue, prefix string, n int) *PopResult {
	tb.t.Helper()
	items := make([]PushItem, n)
	for i := range items {
		items[i] = item(queue, "p", fmt.Sprintf("tx-%s-%d", prefix, i+1), "")
	}
	_, err := tb.b.Push(tb.t.Context(), tenant, items)
	require.NoError(tb.t, err)
	res, err := tb.b.Pop(tb.t.Context(), PopRequest{Tenant: tenant, Queue: queue, Batch: n})
	require.NoError(tb.t, err)
	require.NotNil(tb.t, res)
	require.Len(tb.t, res.Messages, n)
	return res
}

// A batch ack that is not the run right after the cursor (the window reads
// the wrong messages) still finds every message it names, through the
// probe by transactionId.
func TestAckFindsMessagesOutsideTheWindow(t *testing.T) {
	tb := setup(t)
	p := tb.pushRun(DefaultTenant, "ackwin", "a", 10)

	// The last four first: the window after the cursor holds 1..4.
	var late []AckItem
	for _, m := range p.Messages[6:] {
		late = append(late, ackOf(m.TransactionID, p, AckCompleted, ""))
	}
	res, err := tb.b.Ack(t.Context(), DefaultTenant, late)
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Refused, r.TransactionID)
		require.Equal(t, "ackwin", r.Queue)
	}

	// The rest, mixed with a name that exists nowhere and one already acked.
	var rest []AckItem
	for _, m := range p.Messages[:6] {
		rest = append(rest, ackOf(m.TransactionID, p, AckCompleted, ""))
	}
	rest = append(rest, ackOf("tx-none", p, AckCompleted, ""), ackOf(p.Messages[9].TransactionID, p, AckCompleted, ""))
	res, err = tb.b.Ack(t.Context(), DefaultTenant, rest)
	require.NoError(t, err)
	for _, r := range res[:6] {
		require.NoError(t, r.Refused, r.TransactionID)
	}
	require.ErrorIs(t, res[6].Refused, ErrNotFound)
	require.NotErrorIs(t, res[7].Refused, ErrNotFound)

	var lastSeq int64
	require.NoError(t, tb.pool.QueryRow(t.Context(),
		`SELECT last_seq FROM queen.partition_consumers WHERE partition_id = $1`, p.PartitionID).Scan(&lastSeq))
	require.EqualValues(t, 10, lastSeq)
}

// Items of two tenants in one group commit, the second naming the first's
// partition and transactionIds: the second's are not found, by the window
// (several items per partition) or by the probe (a lone item), and the
// first's apply.
func TestAckItemsOfAnotherTenantInTheSameCommit(t *testing.T) {
	const other = "00000000-0000-0000-0000-0000000000b2"
	tb := setup(t)
	p := tb.pushRun(DefaultTenant, "ackten", "a", 3)
	tb.pushRun(other, "ackten", "b", 1) // the other tenant has a queue of the same name

	forged := func(txID string) AckItem {
		it := ackOf(txID, p, AckCompleted, "")
		it.tenant = other
		return it
	}
	items := []AckItem{
		forged(p.Messages[0].TransactionID), forged(p.Messages[1].TransactionID), // window
		ackOf(p.Messages[0].TransactionID, p, AckCompleted, ""), ackOf(p.Messages[1].TransactionID, p, AckCompleted, ""),
		forged(p.Messages[2].TransactionID), // probe
		ackOf(p.Messages[2].TransactionID, p, AckCompleted, ""),
	}
	var res []AckResult
	require.NoError(t, pgx.BeginFunc(t.Context(), tb.pool, func(tx pgx.Tx) error {
		var err error
		res, err = applyAcks(t.Context(), tb.b.q.WithTx(tx), items, ackNormal, tb.b.delivered)
		return err
	}))
	for _, i := range []int{0, 1, 4} {
		require.ErrorIs(t, res[i].Refused, ErrNotFound, i)
		require.Empty(t, res[i].Queue, i)
	}
	for _, i := range []int{2, 3, 5} {
		require.NoError(t, res[i].Refused, i)
		require.Equal(t, "ackten", res[i].Queue, i)
	}
}
