package handlers

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/broker"
)

// The hand-written push answer is byte for byte what encoding/json writes
// for the generated response type: queued, duplicate and buffered results,
// with and without a trace id, and transaction ids that need escaping.
func TestPushAnswerMatchesTheGeneratedEncoding(t *testing.T) {
	t.Parallel()
	items := []broker.PushItem{
		{Queue: "orders", Partition: "Default", TransactionID: "tx-1"},
		{Queue: "orders.eu", Partition: "p_2", TransactionID: `a "quoted" \ <tag> & é ☃ ` + "\x01\xff", TraceID: uuid.NewString()},
		{Queue: "q", Partition: "Default", TransactionID: "tx-3"},
	}
	out := []broker.PushResult{
		{Status: broker.Queued, MessageID: uuid.New(), PartitionID: uuid.New()},
		{Status: broker.Duplicate, MessageID: uuid.New(), PartitionID: uuid.New()},
		{Status: broker.Buffered},
	}
	want := make(api.PushMessages201JSONResponse, len(out))
	for i, o := range out {
		want[i] = pushResult(i, items[i], o)
	}
	wr := httptest.NewRecorder()
	require.NoError(t, want.VisitPushMessagesResponse(wr))
	gr := httptest.NewRecorder()
	require.NoError(t, pushAnswer{items: items, out: out}.VisitPushMessagesResponse(gr))
	require.Equal(t, wr.Code, gr.Code)
	// The same headers, and the answer's length (writeJSONAnswer).
	require.Equal(t, strconv.Itoa(gr.Body.Len()), gr.Header().Get("Content-Length"))
	gr.Header().Del("Content-Length")
	require.Equal(t, wr.Header(), gr.Header())
	require.Equal(t, wr.Body.String(), gr.Body.String())
	require.True(t, json.Valid(bytes.TrimSpace(gr.Body.Bytes())))
}
