package handlers

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/broker"
)

// popResponse is the pop answer built as the generated type: the C++ shape
// plus per-message queue and retryCount. popAnswer must write what
// encoding/json writes for it.
func popResponse(r *broker.PopResult) api.PopOKJSONResponse {
	resp := api.PopOKJSONResponse{
		Success: true, Queue: r.Queue, Partition: r.Partition, PartitionId: r.PartitionID.String(),
		LeaseId: r.LeaseID, ConsumerGroup: r.Group, PartitionsClaimed: r.Partitions,
		Messages: make([]api.PoppedMessage, len(r.Messages)),
	}
	for i, m := range r.Messages {
		data := api.AnyJSON(m.Payload)
		pm := api.PoppedMessage{
			Id: m.ID.String(), TransactionId: m.TransactionID, Data: &data, ProducerSub: m.ProducerSub,
			CreatedAt: fmtMicros(m.CreatedAt), PartitionId: m.PartitionID.String(), Partition: m.Partition,
			Queue: m.Queue, LeaseId: r.LeaseID, ConsumerGroup: r.Group, RetryCount: m.RetryCount,
		}
		if m.TraceID != nil {
			pm.TraceId = new(m.TraceID.String())
		}
		resp.Messages[i] = pm
	}
	return resp
}

// The hand-written pop answer is byte for byte what encoding/json writes
// for the generated response type: payloads as PostgreSQL prints jsonb
// (spaces to drop) with characters to escape inside strings and not
// outside them, optional members present and absent, names to escape.
func TestPopAnswerMatchesTheGeneratedEncoding(t *testing.T) {
	t.Parallel()
	trace, sub := uuid.New(), `sub "x" <&>`
	at := time.Date(2026, 12, 3, 6, 7, 8, 123456789, time.FixedZone("x", 3600))
	payloads := []string{
		`{"t": 1733200000000000000, "pad": "xxxx"}`,
		`{"a": [1, 2, {"b": null}], "s": "<tag> & \"q\" \\ \u00e9 ` + "\u2028 \u2029 \u2027" + `", "e": ""}`,
		`"just a string with spaces: and, commas"`,
		` [ true ,false, 1.5e3 ] `,
		`null`,
		`{"k\"ey": "v\\", "x": "\\\"<"}`,
	}
	res := &broker.PopResult{
		Queue: "orders.eu", Partition: "p <1>", PartitionID: uuid.New(), LeaseID: uuid.NewString(),
		Group: "grp&1", Partitions: 2,
	}
	for i, p := range payloads {
		m := broker.Message{
			ID: uuid.New(), TransactionID: `tx "` + string(rune('a'+i)) + `" é` + "\x01", Payload: json.RawMessage(p),
			CreatedAt: at.Add(time.Duration(i) * time.Microsecond), Queue: "orders.eu", Partition: "p <1>",
			PartitionID: res.PartitionID, RetryCount: i,
		}
		if i%2 == 0 {
			m.TraceID, m.ProducerSub = &trace, &sub
		}
		res.Messages = append(res.Messages, m)
	}
	for _, r := range []*broker.PopResult{res, {Queue: "q", Partition: "Default", PartitionID: uuid.New(), Group: "__QUEUE_MODE__", Partitions: 1, Messages: res.Messages[:1]}} {
		wr := httptest.NewRecorder()
		require.NoError(t, api.PopQueue200JSONResponse{PopOKJSONResponse: popResponse(r)}.VisitPopQueueResponse(wr))
		gr := httptest.NewRecorder()
		require.NoError(t, popAnswer{r}.VisitPopQueueResponse(gr))
		require.Equal(t, wr.Code, gr.Code)
		require.Equal(t, wr.Header(), gr.Header())
		require.Equal(t, wr.Body.String(), gr.Body.String())
		require.True(t, json.Valid(bytes.TrimSpace(gr.Body.Bytes())))
	}
}
