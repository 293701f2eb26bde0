package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/sql/pgtest"
)

// requireSameAckDecode fails unless decodeAckBody either leaves body to the
// generated decoder (runtime.BindJSONBody: encoding/json's Decoder) or
// decodes exactly what it decodes; it reports whether the fast decoder took
// the body.
func requireSameAckDecode(t *testing.T, body []byte) bool {
	t.Helper()
	fast, ok := decodeAckBody(body)
	if !ok {
		return false
	}
	var want api.AckBatchRequest
	require.NoError(t, json.NewDecoder(bytes.NewReader(body)).Decode(&want), "fast path accepted what encoding/json refuses: %q", body)
	require.NotNil(t, want.Acknowledgments, "fast path accepted a body without acknowledgments: %q", body)
	require.Equal(t, want, fast, "%q", body)
	return true
}

const ackPID = "5f0c2a4e-3b7d-4e21-9a8c-1d2e3f4a5b6c"

// ackDecodeCases are batch ack bodies, valid and not, and whether the fast
// decoder decides them (fast) or leaves them to the generated one.
var ackDecodeCases = []struct {
	name string
	body string
	fast bool
}{
	{"plain", `{"acknowledgments":[{"transactionId":"t1","partitionId":"` + ackPID + `","leaseId":"l","status":"completed"},{"transactionId":"t2","partitionId":"` + ackPID + `","leaseId":"l","status":"failed","error":"card declined"}],"consumerGroup":"billing"}`, true},
	{"as the official clients send it", `{"acknowledgments":[{"transactionId":"t1","partitionId":"` + ackPID + `","status":"completed","error":null,"leaseId":"l"}],"consumerGroup":null}`, true},
	{"white space everywhere", " \t\r\n{ \"acknowledgments\" : [ { \"transactionId\" : \"t\" , \"partitionId\" : \"p\" } ] , \"consumerGroup\" : \"g\" } \n", true},
	{"empty acknowledgments", `{"acknowledgments":[]}`, true},
	{"empty item", `{"acknowledgments":[{}]}`, true},
	{"null fields", `{"acknowledgments":[{"transactionId":null,"partitionId":null,"status":null,"leaseId":null,"error":null,"consumerGroup":null}]}`, true},
	{"empty strings", `{"acknowledgments":[{"transactionId":"","partitionId":"","status":"","leaseId":"","error":""}],"consumerGroup":""}`, true},
	{"any status", `{"acknowledgments":[{"transactionId":"t","partitionId":"p","status":"nope"}]}`, true},
	{"item consumerGroup a string", `{"acknowledgments":[{"transactionId":"t","partitionId":"p","consumerGroup":"x"}]}`, true},
	{"escapes in strings", `{"acknowledgments":[{"transactionId":"t\u00e9\ud83d\ude00","partitionId":"p\"\\","leaseId":"\u0030","error":"a\nb"}],"consumerGroup":"g\/h"}`, true},
	{"lone surrogate and bad UTF-8", "{\"acknowledgments\":[{\"transactionId\":\"t\\ud800\",\"error\":\"\xff\xfe\",\"leaseId\":\"é\"}]}", true},
	{"unknown members", `{"x":1e999,"acknowledgments":[{"transactionId":"t","other":{"y":[1,2e10,null]}}],"z":"w"}`, true},
	{"trailing data after the object", `{"acknowledgments":[]} trailing {`, true},
	{"consumerGroup first", `{"consumerGroup":"g","acknowledgments":[{"transactionId":"t"}]}`, true},
	{"shared and changing statuses", `{"acknowledgments":[{"status":"completed"},{"status":"completed"},{"status":"failed"},{"status":"failed"},{"status":null},{"status":"completed"}]}`, true},

	{"empty body", ``, false},
	{"null body", `null`, false},
	{"array body", `[]`, false},
	{"no acknowledgments", `{}`, false},
	{"only a group", `{"consumerGroup":"g"}`, false},
	{"null acknowledgments", `{"acknowledgments":null}`, false},
	{"acknowledgments not an array", `{"acknowledgments":{}}`, false},
	{"null item", `{"acknowledgments":[null]}`, false},
	{"item not an object", `{"acknowledgments":["t"]}`, false},
	{"transactionId a number", `{"acknowledgments":[{"transactionId":5}]}`, false},
	{"partitionId an object", `{"acknowledgments":[{"partitionId":{}}]}`, false},
	{"status a boolean", `{"acknowledgments":[{"status":true}]}`, false},
	{"leaseId a number", `{"acknowledgments":[{"leaseId":1}]}`, false},
	{"error an array", `{"acknowledgments":[{"error":[]}]}`, false},
	{"consumerGroup a number", `{"acknowledgments":[],"consumerGroup":1}`, false},
	{"item consumerGroup a number", `{"acknowledgments":[{"consumerGroup":1}]}`, false},
	{"item consumerGroup an object", `{"acknowledgments":[{"consumerGroup":{"a":1}}]}`, false},
	{"duplicate transactionId", `{"acknowledgments":[{"transactionId":"a","transactionId":"b"}]}`, false},
	{"duplicate status", `{"acknowledgments":[{"status":"completed","status":null}]}`, false},
	{"duplicate acknowledgments", `{"acknowledgments":[{"transactionId":"a"}],"acknowledgments":[]}`, false},
	{"duplicate consumerGroup", `{"consumerGroup":"a","acknowledgments":[],"consumerGroup":null}`, false},
	{"key in another case", `{"acknowledgments":[{"TransactionId":"t"}]}`, false},
	{"top-level key in another case", `{"Acknowledgments":[]}`, false},
	{"escaped key", `{"acknowledgments":[{"\u0074ransactionId":"t"}]}`, false},
	{"truncated", `{"acknowledgments":[{"transactionId":"t"`, false},
	{"trailing comma", `{"acknowledgments":[{"transactionId":"t"},]}`, false},
	{"trailing comma in an item", `{"acknowledgments":[{"transactionId":"t",}]}`, false},
	{"missing colon", `{"acknowledgments":[{"transactionId" "t"}]}`, false},
	{"bad escape", `{"acknowledgments":[{"transactionId":"t\x"}]}`, false},
	{"control character in a string", "{\"acknowledgments\":[{\"transactionId\":\"t\x01\"}]}", false},
	{"unclosed string", `{"acknowledgments":[{"transactionId":"t`, false},
	{"bad number in an unknown member", `{"acknowledgments":[{"x":01}]}`, false},
	{"deep unknown member", `{"acknowledgments":[{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}]}`, false},
}

// The fast decoder against encoding/json: the common shapes, escapes
// included, are decoded by it and identically; the rest it leaves to the
// generated decoder (fast: false).
func TestAckDecodeMatchesGenerated(t *testing.T) {
	t.Parallel()
	for _, c := range ackDecodeCases {
		t.Run(c.name, func(t *testing.T) {
			got := requireSameAckDecode(t, []byte(c.body))
			require.Equal(t, c.fast, got, "decided by the fast path")
		})
	}
}

// Equal statuses, leases and errors of one batch share one pointer.
func TestAckDecodeSharesEqualStrings(t *testing.T) {
	t.Parallel()
	req, ok := decodeAckBody([]byte(`{"acknowledgments":[{"status":"completed","leaseId":"l","error":null},{"status":"completed","leaseId":"l","error":null},{"status":"failed","leaseId":"l"}]}`))
	require.True(t, ok)
	a := req.Acknowledgments
	require.Same(t, a[0].Status, a[1].Status)
	require.Same(t, a[0].LeaseId, a[2].LeaseId)
	require.Equal(t, api.AckStatus("failed"), *a[2].Status)
	require.Nil(t, a[1].Error)
}

// The fast path's route is the spec's batch ack operation, and the keys the
// decoder knows are the members of AckBatchRequest and AckBatchItem in
// openapi.yaml, and the json tags of gen/api's types.
func TestAckDecodeKeysMatchSpec(t *testing.T) {
	t.Parallel()
	v, err := newRequestValidator()
	require.NoError(t, err)
	require.Contains(t, v.byPattern, ackBatchPattern, "the fast path's route")
	require.Equal(t, "AckBatch", v.byPattern[ackBatchPattern].Operation.OperationID)
	for name, keys := range map[string][]string{"AckBatchRequest": ackRequestKeys, "AckBatchItem": ackItemKeys} {
		var spec []string
		for k := range v.doc.Components.Schemas[name].Value.Properties {
			spec = append(spec, k)
		}
		require.ElementsMatch(t, spec, keys, name)
	}
	for typ, keys := range map[reflect.Type][]string{reflect.TypeFor[api.AckBatchRequest](): ackRequestKeys, reflect.TypeFor[api.AckBatchItem](): ackItemKeys} {
		var tags []string
		for i := range typ.NumField() {
			tags = append(tags, strings.Split(typ.Field(i).Tag.Get("json"), ",")[0])
		}
		sort.Strings(tags)
		require.ElementsMatch(t, tags, keys, typ.String())
	}
}

// Whatever the fast decoder takes, encoding/json decodes the same way.
func FuzzAckDecode(f *testing.F) {
	for _, c := range ackDecodeCases {
		f.Add([]byte(c.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		requireSameAckDecode(t, body)
	})
}

// The batch ack route through the whole chain (fast decoder) answers every
// body as the generated strict handler alone does, each on its own
// database: the same status and the same body, refusals included.
func TestAckFastPathAnswersAsGenerated(t *testing.T) {
	t.Parallel()
	fast := newServer(t, testConfig{Pool: pgtest.NewPool(t)})
	chain, err := fast.Handler()
	require.NoError(t, err)
	slow := newServer(t, testConfig{Pool: pgtest.NewPool(t)})
	_, err = slow.Handler() // its validator
	require.NoError(t, err)
	generated := api.NewStrictHandlerWithOptions(slow, nil, api.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: slow.requestError, ResponseErrorHandlerFunc: slow.responseError,
	})

	bodies := map[string]string{}
	for _, c := range ackDecodeCases {
		bodies[c.name] = c.body
	}
	item := func(i int) string {
		return fmt.Sprintf(`{"transactionId":"m-%d","partitionId":"%s","status":"completed"}`, i, ackPID)
	}
	many := make([]string, 1001)
	for i := range many {
		many[i] = item(i)
	}
	for name, body := range map[string]string{
		"over 1000 items":           `{"acknowledgments":[` + strings.Join(many, ",") + `]}`,
		"1000 items":                `{"acknowledgments":[` + strings.Join(many[:1000], ",") + `]}`,
		"partitionId not a uuid":    `{"acknowledgments":[{"transactionId":"t","partitionId":"nope"}]}`,
		"second partitionId bad":    `{"acknowledgments":[` + item(1) + `,{"transactionId":"t","partitionId":"nope"}]}`,
		"status not in the enum":    `{"acknowledgments":[{"transactionId":"t","partitionId":"` + ackPID + `","status":"done"}]}`,
		"transactionId too long":    `{"acknowledgments":[{"transactionId":"` + strings.Repeat("é", 256) + `","partitionId":"` + ackPID + `"}]}`,
		"leaseId too long":          `{"acknowledgments":[{"transactionId":"t","partitionId":"` + ackPID + `","leaseId":"` + strings.Repeat("l", 256) + `"}]}`,
		"group bad chars":           `{"acknowledgments":[` + item(1) + `],"consumerGroup":"a b"}`,
		"unknown messages, a group": `{"acknowledgments":[` + item(1) + `,` + item(2) + `],"consumerGroup":"g"}`,
	} {
		bodies[name] = body
	}

	for name, body := range bodies {
		send := func(h func(http.ResponseWriter, *http.Request)) *httptest.ResponseRecorder {
			req := httptest.NewRequest("POST", "/api/v1/ack/batch", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h(rec, req)
			return rec
		}
		got := send(chain.ServeHTTP)
		want := send(func(w http.ResponseWriter, r *http.Request) { generated.AckBatch(w, r, api.AckBatchParams{}) })
		require.Equal(t, want.Code, got.Code, "%s: %s / %s", name, want.Body, got.Body)
		require.Equal(t, want.Header().Get("Content-Type"), got.Header().Get("Content-Type"), name)
		require.Equal(t, want.Body.String(), got.Body.String(), name)
	}
}

// BenchmarkAckBodyDecode compares the batch ack body decodes at batch 100,
// as queen-bench sends it: the generated one (encoding/json into
// api.AckBatchRequest) and the fast one, each with the body checks.
func BenchmarkAckBodyDecode(b *testing.B) {
	v, err := newRequestValidator()
	if err != nil {
		b.Fatal(err)
	}
	var body []byte
	body = append(body, `{"acknowledgments":[`...)
	for i := range 100 {
		if i > 0 {
			body = append(body, ',')
		}
		body = fmt.Appendf(body, `{"transactionId":"0195a8c6-%04x-7000-8000-000000000000","partitionId":"%s","status":"completed","leaseId":"0195a8c6-0000-7000-8000-00000000beef"}`, i, ackPID)
	}
	body = append(body, "]}"...)
	decoders := map[string]func() (api.AckBatchRequest, bool){
		"generated": func() (api.AckBatchRequest, bool) {
			var req api.AckBatchRequest
			err := json.NewDecoder(bytes.NewReader(body)).Decode(&req)
			return req, err == nil
		},
		"fast": func() (api.AckBatchRequest, bool) { return decodeAckBody(body) },
	}
	for _, name := range []string{"generated", "fast"} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				req, ok := decoders[name]()
				if !ok {
					b.Fatal("not decoded")
				}
				if err := v.checkAckBatch(&req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
