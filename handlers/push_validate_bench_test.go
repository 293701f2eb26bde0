package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/queenforgo/queen/gen/api"
)

// pushBody is a push of n items with payloads of size bytes, as the
// benchmark tool sends.
func pushBody(n, size int) []byte {
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = map[string]any{
			"queue": "bench.orders", "partition": fmt.Sprintf("p-%d", i%16),
			"transactionId": fmt.Sprintf("0195a8c6-0000-7000-8000-%012d", i),
			"payload":       map[string]any{"i": i, "pad": strings.Repeat("x", size)},
		}
	}
	b, _ := json.Marshal(map[string]any{"items": items})
	return b
}

// BenchmarkPushBodyFullSchemaValidation is what every push paid before:
// kin-openapi decodes the whole body into a generic tree and validates it,
// then the typed decoder decodes it again.
func BenchmarkPushBodyFullSchemaValidation(b *testing.B) {
	v, err := newRequestValidator()
	if err != nil {
		b.Fatal(err)
	}
	route := v.byPattern["POST /api/v1/push"]
	body := pushBody(100, 256)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest("POST", "/api/v1/push", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		in := &openapi3filter.RequestValidationInput{Request: r, Route: route, Options: &openapi3filter.Options{}}
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			b.Fatal(err)
		}
		var req api.PushRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			b.Fatal(err)
		}
	}
}
