package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/broker"
)

// The hand-written batch ack answer is byte for byte what encoding/json
// writes for the generated response type: every refusal, found and
// unfound messages, names and ids to escape, no results at all.
func TestAckAnswerMatchesTheGeneratedEncoding(t *testing.T) {
	t.Parallel()
	res := []broker.AckResult{
		{TransactionID: "t1", Queue: "orders", Partition: "customer-42", LeaseReleased: true},
		{TransactionID: `t "2" <&> é` + "\x01\u2028", Queue: "q<1>", Partition: "", DeadLettered: true, LeaseReleased: true},
		{TransactionID: "t3", Refused: broker.ErrNotFound},
		{TransactionID: "t4", Queue: "orders", Partition: "Default", Refused: broker.ErrLeaseLost},
		{TransactionID: "t5", Queue: "orders", Partition: "Default", Refused: broker.ErrBlocked},
		{TransactionID: "t6", Queue: "orders", Partition: "Default", Refused: errors.New(`other "reason" <x>`)},
		{TransactionID: ""},
	}
	for _, r := range [][]broker.AckResult{res, {}, res[:1]} {
		wr := httptest.NewRecorder()
		require.NoError(t, api.AckBatch200JSONResponse(ackResults(r)).VisitAckBatchResponse(wr))
		gr := httptest.NewRecorder()
		require.NoError(t, ackAnswer{r}.VisitAckBatchResponse(gr))
		require.Equal(t, wr.Code, gr.Code)
		require.Equal(t, wr.Header(), gr.Header())
		require.Equal(t, wr.Body.String(), gr.Body.String())
		require.True(t, json.Valid(bytes.TrimSpace(gr.Body.Bytes())))
	}
}
