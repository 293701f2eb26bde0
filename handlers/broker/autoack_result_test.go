package broker

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/db"
)

// autoAckRowsOf is what PartitionConsumerAutoAckRead returns for n
// messages of a batch retried once.
func autoAckRowsOf(n int) []db.PartitionConsumerAutoAckReadRow {
	rows := make([]db.PartitionConsumerAutoAckReadRow, n)
	trace := uuid.New()
	sub := "producer"
	for i := range rows {
		rows[i] = db.PartitionConsumerAutoAckReadRow{
			CursorFound: true, BatchRetryCount: 1, Seq: int64(10 + i), ID: uuid.New(),
			TransactionID: fmt.Sprintf("tx-%d", i), TraceID: &trace, Payload: json.RawMessage(`{"n":1}`),
			ProducerSub: &sub, CreatedAt: pgtype.Timestamptz{Time: time.Unix(1_800_000_000, int64(i)), Valid: true},
		}
	}
	return rows
}

// What an autoAck read delivered becomes the pop's messages field for
// field, with the claim's queue, partition and retry count.
func TestAutoAckReadBecomesThePopsMessages(t *testing.T) {
	t.Parallel()
	b := &Broker{seal: &sealer{}}
	rows := autoAckRowsOf(3)
	p := partRef{id: uuid.New(), name: "p1"}
	c := autoAckClaimed(db.QueenQueue{Name: "q"}, p, rows)
	require.Equal(t, 3, c.count())
	require.Equal(t, int64(12), c.lastSeq())
	res := b.popResult(popPlan{PopRequest: PopRequest{AutoAck: true}}, "lease", []claimed{c})
	require.Empty(t, res.LeaseID)
	require.Len(t, res.Messages, 3)
	for i, m := range res.Messages {
		r := rows[i]
		require.Equal(t, Message{
			ID: r.ID, TransactionID: r.TransactionID, TraceID: r.TraceID, Payload: r.Payload,
			ProducerSub: r.ProducerSub, CreatedAt: r.CreatedAt.Time, Queue: "q", Partition: "p1",
			PartitionID: p.id, RetryCount: 1,
		}, m)
	}
}

// An autoAck read's rows are rendered into the pop's result without a
// copy in between: the result and its messages are the only allocations
// (a copy of the rows into the general claim's type was a tenth of the
// bytes a fan-out run allocated).
func TestAutoAckReadRenderedWithoutACopy(t *testing.T) {
	b := &Broker{seal: &sealer{}}
	rows := autoAckRowsOf(100)
	q := db.QueenQueue{Name: "q"}
	p := partRef{id: uuid.New(), name: "p1"}
	allocs := testing.AllocsPerRun(20, func() {
		c := autoAckClaimed(q, p, rows)
		_ = b.popResult(popPlan{PopRequest: PopRequest{AutoAck: true}}, "", []claimed{c})
	})
	require.LessOrEqual(t, allocs, 2.0)
}
