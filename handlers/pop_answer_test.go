package handlers

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
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
			CreatedAt: at.Add(time.Duration(i) * 200 * time.Millisecond), Queue: "orders.eu", Partition: "p <1>",
			PartitionID: res.PartitionID, RetryCount: i,
		}
		if i%2 == 0 {
			m.TraceID, m.ProducerSub = &trace, &sub
		}
		res.Messages = append(res.Messages, m)
	}
	// Times in one second and across seconds (popFragments.appendTime), and
	// a year appendTimeMicros leaves to AppendFormat.
	res.Messages = append(res.Messages, res.Messages[0], res.Messages[1])
	res.Messages[len(res.Messages)-2].CreatedAt = time.Date(10001, 1, 2, 3, 4, 5, 6000, time.UTC)
	res.Messages[len(res.Messages)-1].CreatedAt = at.Add(time.Second)
	for _, r := range []*broker.PopResult{res, {Queue: "q", Partition: "Default", PartitionID: uuid.New(), Group: "__QUEUE_MODE__", Partitions: 1, Messages: res.Messages[:1]}} {
		wr := httptest.NewRecorder()
		require.NoError(t, api.PopQueue200JSONResponse{PopOKJSONResponse: popResponse(r)}.VisitPopQueueResponse(wr))
		gr := httptest.NewRecorder()
		require.NoError(t, popAnswer{r}.VisitPopQueueResponse(gr))
		require.Equal(t, wr.Code, gr.Code)
		// The same headers, and the answer's length (TestPopAnswerHasAContentLength).
		require.Equal(t, strconv.Itoa(gr.Body.Len()), gr.Header().Get("Content-Length"))
		gr.Header().Del("Content-Length")
		require.Equal(t, wr.Header(), gr.Header())
		require.Equal(t, wr.Body.String(), gr.Body.String())
		require.True(t, json.Valid(bytes.TrimSpace(gr.Body.Bytes())))
	}
}

// discardWriter is a ResponseWriter that keeps nothing, for benchmarks.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkPopAnswer writes a fan-out bench's answer: 100 messages of one
// partition with 64-byte payloads, no trace id, no producer.
func BenchmarkPopAnswer(b *testing.B) {
	res := &broker.PopResult{
		Queue: "bench-fanout-1733200000", Partition: "p7", PartitionID: uuid.New(), LeaseID: "",
		Group: "bench-fanout-1733200000-g1", Partitions: 1,
	}
	at := time.Now()
	for i := range 100 {
		res.Messages = append(res.Messages, broker.Message{
			ID: uuid.New(), TransactionID: "bench-3-" + strconv.Itoa(100000+i),
			Payload:   json.RawMessage(`{"t": 1733200000123456789, "pad": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`),
			CreatedAt: at.Add(time.Duration(i) * time.Microsecond), Queue: res.Queue, Partition: res.Partition,
			PartitionID: res.PartitionID,
		})
	}
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		if err := (popAnswer{res}).write(w); err != nil {
			b.Fatal(err)
		}
	}
}

// appendTimeMicros writes what AppendFormat writes with timeMicros, the
// years it does not format itself included.
func TestAppendTimeMicrosMatchesAppendFormat(t *testing.T) {
	t.Parallel()
	zone := time.FixedZone("x", -(9*3600 + 30*60))
	times := []time.Time{
		time.Date(2026, 12, 4, 23, 59, 59, 999999999, zone),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 1000, time.UTC),
		time.Date(-3, 2, 28, 1, 2, 3, 4000, time.UTC),
		time.Date(2024, 2, 29, 12, 0, 0, 999, time.UTC),
		{},
	}
	for i := range 1000 {
		times = append(times, time.Unix(int64(i)*7919*86400+int64(i)*37, int64(i)*999331%1e9).In(zone))
	}
	for _, at := range times {
		require.Equal(t, at.UTC().Format(timeMicros), string(appendTimeMicros([]byte("x"), at)[1:]), "%v", at)
	}
}

// appendCompactJSON writes what encoding/json writes for a json.RawMessage,
// for documents shaped as PostgreSQL prints jsonb and others.
func TestAppendCompactJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	docs := []string{
		`{}`, `[]`, `""`, `0`, `"\\"`, `"\""`, `"\\\""`, `"a\u2028b"`, `" < > & "`,
		`{"a" : [ 1 , "x y" , {"b":"\u00e9 é"} ] , "c" : "<\"&\">" }`,
		"\t{\r\n\"k\": \"v\u2028\u2029\u2027\u20ac\"\n}",
		`{"t": 1733200000123456789, "pad": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`,
	}
	for _, d := range docs {
		want, err := json.Marshal(json.RawMessage(d))
		require.NoError(t, err, d)
		require.Equal(t, string(want), string(appendCompactJSON([]byte("x"), []byte(d))[1:]), d)
	}
}
