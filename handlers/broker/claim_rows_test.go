package broker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/db"
)

// A claim's messages are its rows that hold one, in order, kept in the
// rows' own array rather than copied (the copy was a tenth of what a
// consumed message allocated); a claim that found nothing has none.
func TestDeliverableKeepsTheRowsInPlace(t *testing.T) {
	t.Parallel()
	rows := []db.PartitionConsumerClaimAndReadRow{{Seq: 4, TransactionID: "a"}, {Seq: 5, TransactionID: "b"}, {Seq: 6, TransactionID: "c"}}
	got := deliverable(rows)
	require.Equal(t, []string{"a", "b", "c"}, []string{got[0].TransactionID, got[1].TransactionID, got[2].TransactionID})
	require.Same(t, &rows[0], &got[0], "the messages are the rows, not a copy")

	require.Empty(t, deliverable([]db.PartitionConsumerClaimAndReadRow{{Seq: 0}}), "a claim that found nothing")
}
