package handlers

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/handlers/broker"
)

// sinkWriter is a ResponseWriter that copies what it is given, as
// net/http's does, and keeps only the last answer.
type sinkWriter struct {
	header http.Header
	body   []byte
}

func (s *sinkWriter) Header() http.Header { return s.header }
func (s *sinkWriter) WriteHeader(int)     {}
func (s *sinkWriter) Write(p []byte) (int, error) {
	s.body = append(s.body[:0], p...)
	return len(p), nil
}

// consumedBatch is a pop of 100 messages as queen-bench consumes them, and
// the results of its batch ack.
func consumedBatch() (*broker.PopResult, []broker.AckResult) {
	pid := uuid.New()
	r := &broker.PopResult{
		Queue: "bench-20261203-134720-19493-consume", Partition: "p-7", PartitionID: pid,
		LeaseID: uuid.NewString(), Group: "__QUEUE_MODE__", Partitions: 1,
	}
	acks := make([]broker.AckResult, 100)
	for i := range 100 {
		tx := fmt.Sprintf("0199d7f2-8a3c-7b1e-9c4d-%012d", i)
		r.Messages = append(r.Messages, broker.Message{
			ID: uuid.New(), TransactionID: tx, PartitionID: pid, Queue: r.Queue, Partition: r.Partition,
			Payload:   json.RawMessage(`{"t": 1764740000000000000, "pad": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`),
			CreatedAt: time.Date(2026, 12, 3, 13, 47, 20, 123456000, time.UTC),
		})
		acks[i] = broker.AckResult{TransactionID: tx, Queue: r.Queue, Partition: r.Partition, LeaseReleased: i == 99}
	}
	return r, acks
}

// The pop and batch ack answers are written from a pooled buffer sized for
// the answer: once warm, writing one allocates nothing but a header's
// value (the batch ack's Content-Type; the pop answer's Content-Length, a
// string and its slice) (the buffers used to be allocated per answer, and
// grown on the way because their estimate was short of the answer). Under -race the pool
// drops a quarter of what it is given at random, and a collection empties
// it, so an average over many answers may exceed the bound by chance; the
// fewest allocations of 20 single answers does not (all 20 would have to
// miss the pool), and without the pool it is one more or worse.
func TestAnswersReuseTheirBuffers(t *testing.T) {
	r, acks := consumedBatch()
	w := &sinkWriter{header: http.Header{}}
	for name, a := range map[string]struct {
		write func() error
		most  float64
	}{
		"pop": {func() error { return popAnswer{r}.write(w) }, 2},
		"ack": {func() error { return ackAnswer{acks}.VisitAckBatchResponse(w) }, 1},
	} {
		require.NoError(t, a.write(), name)
		fewest := math.Inf(1)
		for range 20 {
			fewest = min(fewest, testing.AllocsPerRun(1, func() { _ = a.write() }))
		}
		require.LessOrEqual(t, fewest, a.most, "%s: allocations of an answer", name)
	}
}

// The size estimates cover the answers of a consumed batch, so that the
// buffer is not grown while written.
func TestAnswerSizesCoverTheAnswers(t *testing.T) {
	t.Parallel()
	r, acks := consumedBatch()
	w := &sinkWriter{header: http.Header{}}
	require.NoError(t, popAnswer{r}.write(w))
	require.LessOrEqual(t, len(w.body), popAnswerSize(r))
	require.Greater(t, len(w.body), popAnswerSize(r)*9/10, "the estimate is close")
	require.NoError(t, ackAnswer{acks}.VisitAckBatchResponse(w))
	require.LessOrEqual(t, len(w.body), ackAnswerSize(acks))
	require.Greater(t, len(w.body), ackAnswerSize(acks)*9/10, "the estimate is close")
}
