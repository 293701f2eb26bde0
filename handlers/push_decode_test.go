package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/broker"
)

// generatedPushDecode is what the generated strict handler does with a push
// body (runtime.BindJSONBody: encoding/json's Decoder into api.PushRequest),
// turned into broker items as PushMessages turns them. nil items: the body
// had none.
func generatedPushDecode(body []byte) ([]broker.PushItem, error) {
	var req api.PushRequest
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&req); err != nil {
		return nil, err
	}
	if req.Items == nil {
		return nil, nil
	}
	items := make([]broker.PushItem, len(req.Items))
	for i, it := range req.Items {
		items[i] = broker.PushItem{
			Queue: it.Queue, Partition: deref(it.Partition, ""),
			TransactionID: deref(it.TransactionId, ""), TraceID: deref(it.TraceId, ""),
		}
		if it.Payload != nil {
			items[i].Payload = *it.Payload
		}
	}
	return items, nil
}

// requireSameDecode fails unless decodePushBody either leaves body to the
// generated decoder or decodes exactly what it decodes; it reports whether
// the fast decoder took the body.
func requireSameDecode(t *testing.T, body []byte) bool {
	t.Helper()
	fast, ok := decodePushBody(body)
	if !ok {
		return false
	}
	want, err := generatedPushDecode(body)
	require.NoError(t, err, "fast path accepted what encoding/json refuses: %q", body)
	require.NotNil(t, want, "fast path accepted a body without items: %q", body)
	require.Equal(t, len(want), len(fast), "%q", body)
	for i := range want {
		w, f := want[i], fast[i]
		require.Equal(t, w.Queue, f.Queue, "item %d of %q", i, body)
		require.Equal(t, w.Partition, f.Partition, "item %d of %q", i, body)
		require.Equal(t, w.TransactionID, f.TransactionID, "item %d of %q", i, body)
		require.Equal(t, w.TraceID, f.TraceID, "item %d of %q", i, body)
		require.Equal(t, string(w.Payload), string(f.Payload), "item %d of %q", i, body)
		require.Equal(t, w.Payload == nil, f.Payload == nil, "item %d of %q", i, body)
	}
	return true
}

// pushDecodeCases are push bodies, valid and not, and whether the fast
// decoder decides them (fast) or leaves them to the generated one.
var pushDecodeCases = []struct {
	name string
	body string
	fast bool
}{
	{"plain", `{"items":[{"queue":"q","partition":"p","transactionId":"t","traceId":"0195a8c6-0000-7000-8000-000000000000","payload":{"a":[1,2.5,-3e2,true,false,null,"x"]}}]}`, true},
	{"white space everywhere", " \t\r\n{ \"items\" : [ { \"queue\" : \"q\" , \"payload\" : { \"a\" : 1 } } , {\"queue\":\"r\"} ] } \n", true},
	{"empty items", `{"items":[]}`, true},
	{"empty item", `{"items":[{}]}`, true},
	{"missing queue", `{"items":[{"payload":1}]}`, true},
	{"null payload", `{"items":[{"queue":"q","payload":null}]}`, true},
	{"null optional fields", `{"items":[{"queue":"q","partition":null,"transactionId":null,"traceId":null}]}`, true},
	{"empty strings", `{"items":[{"queue":"","partition":"","transactionId":"","traceId":""}]}`, true},
	{"scalar payloads", `{"items":[{"queue":"q","payload":"s"},{"queue":"q","payload":0},{"queue":"q","payload":-0.5E+10},{"queue":"q","payload":true},{"queue":"q","payload":[]},{"queue":"q","payload":{}}]}`, true},
	{"huge number payload", `{"items":[{"queue":"q","payload":123456789012345678901234567890e99999}]}`, true},
	{"huge number in an ignored field", `{"items":[{"queue":"q","namespace":1e999}]}`, false},
	{"huge number in bufferMs", `{"bufferMs":1e400,"items":[]}`, false},
	{"numbers in ignored fields", `{"bufferMs":100,"bufferMax":[1,{"a":2e10}],"items":[{"queue":"q","namespace":"n","task":{"x":[1.5]},"producerSub":null}]}`, true},
	{"huge number in an unknown field", `{"other":1e999,"items":[{"queue":"q","x":{"y":1e999}}]}`, true},
	{"escapes in names", `{"items":[{"queue":"q\u0041\/","partition":"p\"\\\n","transactionId":"t\u00e9\ud83d\ude00","traceId":"\u0030"}]}`, true},
	{"lone surrogate and bad UTF-8 in names", "{\"items\":[{\"queue\":\"q\\ud800\",\"transactionId\":\"\xff\xfe\",\"partition\":\"é\"}]}", true},
	{"escapes and UTF-8 in a payload", "{\"items\":[{\"queue\":\"q\",\"payload\":\"\\u00e9 é \\ud800 \xff\"}]}", true},
	{"trailing data after the object", `{"items":[{"queue":"q"}]} trailing {`, true},
	{"second object after the first", `{"items":[]}{"items":[{"queue":"q"}]}`, true},
	{"payload before queue", `{"items":[{"payload":{"queue":"x"},"queue":"q"}]}`, true},
	{"bufferMs after items", `{"items":[{"queue":"q"}],"bufferMs":5}`, true},

	{"empty body", ``, false},
	{"white space only", " \n", false},
	{"null body", `null`, false},
	{"array body", `[]`, false},
	{"string body", `"x"`, false},
	{"no items", `{}`, false},
	{"null items", `{"items":null}`, false},
	{"items not an array", `{"items":"x"}`, false},
	{"null item", `{"items":[null]}`, false},
	{"item not an object", `{"items":[1]}`, false},
	{"queue a number", `{"items":[{"queue":5}]}`, false},
	{"queue null", `{"items":[{"queue":null}]}`, false},
	{"partition a number", `{"items":[{"queue":"q","partition":1}]}`, false},
	{"transactionId a number", `{"items":[{"queue":"q","transactionId":5}]}`, false},
	{"traceId an object", `{"items":[{"queue":"q","traceId":{}}]}`, false},
	{"duplicate queue", `{"items":[{"queue":"a","queue":"b"}]}`, false},
	{"duplicate payload", `{"items":[{"queue":"q","payload":1,"payload":2}]}`, false},
	{"duplicate items", `{"items":[{"queue":"a","partition":"p"}],"items":[{"queue":"b"}]}`, false},
	{"key in another case", `{"items":[{"Queue":"q"}]}`, false},
	{"items in another case", `{"ITEMS":[]}`, false},
	{"escaped key", `{"items":[{"\u0071ueue":"q"}]}`, false},
	{"non-ASCII key", `{"items":[{"queue":"q","ſ":1}]}`, false},
	{"truncated", `{"items":[{"queue":"q"`, false},
	{"trailing comma", `{"items":[{"queue":"q"},]}`, false},
	{"trailing comma in an item", `{"items":[{"queue":"q",}]}`, false},
	{"trailing comma in a payload", `{"items":[{"queue":"q","payload":[1,]}]}`, false},
	{"missing colon", `{"items":[{"queue" "q"}]}`, false},
	{"bad literal", `{"items":[{"queue":"q","payload":tru}]}`, false},
	{"bad number", `{"items":[{"queue":"q","payload":01}]}`, false},
	{"bad fraction", `{"items":[{"queue":"q","payload":1.}]}`, false},
	{"bad exponent", `{"items":[{"queue":"q","payload":1e}]}`, false},
	{"plus sign", `{"items":[{"queue":"q","payload":+1}]}`, false},
	{"bad escape", `{"items":[{"queue":"q\x"}]}`, false},
	{"short unicode escape", `{"items":[{"queue":"q","payload":"\u12"}]}`, false},
	{"control character in a string", "{\"items\":[{\"queue\":\"q\x01\"}]}", false},
	{"mismatched brackets", `{"items":[{"queue":"q","payload":{"a":[1}]}]}`, false},
	{"unclosed string", `{"items":[{"queue":"q`, false},
	{"deep payload", `{"items":[{"queue":"q","payload":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}]}`, false},
	{"too deep for encoding/json", `{"items":[{"queue":"q","payload":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}]}`, false},
}

// The fast decoder against encoding/json: the common shapes, escapes
// included, are decoded by it and identically; the rest it leaves to the
// generated decoder (fast: false), which answers them as it always did.
func TestPushDecodeMatchesGenerated(t *testing.T) {
	t.Parallel()
	for _, c := range pushDecodeCases {
		t.Run(c.name, func(t *testing.T) {
			got := requireSameDecode(t, []byte(c.body))
			require.Equal(t, c.fast, got, "decided by the fast path")
		})
	}
}

// The item's payload is a sub-slice of the body, not a copy, and the
// items' shared names are one string.
func TestPushDecodeKeepsPayloadsInTheBody(t *testing.T) {
	t.Parallel()
	body := []byte(`{"items":[{"queue":"q","partition":"p","payload":{"a":1}},{"queue":"q","partition":"p","payload":[2]}]}`)
	items, ok := decodePushBody(body)
	require.True(t, ok)
	require.Len(t, items, 2)
	for _, it := range items {
		start := bytes.Index(body, it.Payload)
		require.GreaterOrEqual(t, start, 0)
		require.Same(t, &body[start], &it.Payload[0], "payload %s is not a sub-slice of the body", it.Payload)
		require.Equal(t, len(it.Payload), cap(it.Payload), "an append to a payload must not write into the body")
	}
	require.True(t, unsafeSameString(items[0].Queue, items[1].Queue))
	require.True(t, unsafeSameString(items[0].Partition, items[1].Partition))
}

// The fast path's route is the spec's push operation, and the keys the
// fast decoder knows are the members of PushRequest and PushItem in
// openapi.yaml, and the json tags of gen/api's types.
func TestPushDecodeKeysMatchSpec(t *testing.T) {
	t.Parallel()
	v, err := newRequestValidator()
	require.NoError(t, err)
	require.Contains(t, v.byPattern, pushPattern, "the fast path's route")
	require.Equal(t, "PushMessages", v.byPattern[pushPattern].Operation.OperationID)
	for name, keys := range map[string][]string{"PushRequest": pushRequestKeys, "PushItem": pushItemKeys} {
		var spec []string
		for k := range v.doc.Components.Schemas[name].Value.Properties {
			spec = append(spec, k)
		}
		require.ElementsMatch(t, spec, keys, name)
	}
	for typ, keys := range map[reflect.Type][]string{reflect.TypeFor[api.PushRequest](): pushRequestKeys, reflect.TypeFor[api.PushItem](): pushItemKeys} {
		var tags []string
		for i := range typ.NumField() {
			tags = append(tags, strings.Split(typ.Field(i).Tag.Get("json"), ",")[0])
		}
		sort.Strings(tags)
		require.ElementsMatch(t, tags, keys, typ.String())
	}
}

func unsafeSameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// Whatever the fast decoder takes, encoding/json decodes the same way.
func FuzzPushDecode(f *testing.F) {
	for _, seed := range []string{
		`{"items":[{"queue":"q","partition":"p","transactionId":"t","traceId":"0195a8c6-0000-7000-8000-000000000000","payload":{"a":[1,2.5,-3e2,true,false,null,"x"]}}]}`,
		`{"items":[]}`, `{"items":[{}]}`, `{"bufferMs":1e400,"items":[]}`, `{"items":[{"queue":"q","namespace":1e999}]}`,
		`{"items":[{"queue":"q\u0041","partition":"p\"","transactionId":"\ud800"}]}`, `{"items":[{"Queue":"q"}]}`,
		`{"items":[{"queue":"a","queue":"b"}]}`, `{"items":[{"queue":"q","payload":[1,]}]}`, `{"items":null}`,
		"{\"items\":[{\"queue\":\"\xff\"}]}", `{"items":[{"queue":"q","payload":-0.0e-0}]}`, `{"items":[{"queue":"q"}]} x`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		requireSameDecode(t, body)
	})
}

// BenchmarkPushBodyDecode compares the push body decodes at batch 100:
// the generated one (encoding/json into api.PushRequest, then broker items)
// and the fast one, each with the per-item checks.
func BenchmarkPushBodyDecode(b *testing.B) {
	v, err := newRequestValidator()
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{64, 256} {
		body := pushBody(100, size)
		b.Run(fmt.Sprintf("generated/%dB", size), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				items, err := generatedPushDecode(body)
				if err != nil {
					b.Fatal(err)
				}
				if err := v.checkPushItems(items); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("fast/%dB", size), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				items, ok := decodePushBody(body)
				if !ok {
					b.Fatal("not decoded")
				}
				if err := v.checkPushItems(items); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
