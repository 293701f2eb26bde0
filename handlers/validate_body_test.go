package handlers

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// countingBody is a request body that counts the reads made of it.
type countingBody struct {
	r     io.Reader
	reads int
}

func (c *countingBody) Read(p []byte) (int, error) { c.reads++; return c.r.Read(p) }
func (c *countingBody) Close() error               { return nil }

// The validator hands the push and the batch ack to their handlers with the
// body unread: their handlers decode it once, and the validator has nothing
// of it to check (kin-openapi's security check read every body into a second
// buffer and swapped it in, for an authentication function that accepts
// everything).
func TestValidatorLeavesTypedBodiesUnread(t *testing.T) {
	t.Parallel()
	v, err := sharedValidator()
	require.NoError(t, err)
	for pattern, body := range map[string]string{
		pushPattern:     `{"items":[{"queue":"q","payload":1}]}`,
		ackBatchPattern: `{"acknowledgments":[{"transactionId":"t","partitionId":"00000000-0000-0000-0000-000000000001","status":"completed"}]}`,
	} {
		method, path, _ := strings.Cut(pattern, " ")
		cb := &countingBody{r: strings.NewReader(body)}
		req := httptest.NewRequest(method, path, nil)
		req.Body, req.ContentLength, req.Pattern = cb, int64(len(body)), pattern
		req.Header.Set("Content-Type", "application/json")
		var got io.ReadCloser
		next := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = r.Body })
		rec := httptest.NewRecorder()
		v.middleware(nil)(next).ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, "%s: %s", pattern, rec.Body)
		require.Same(t, cb, got, "%s: the handler gets the request's own body", pattern)
		require.Zero(t, cb.reads, "%s: the validator read the body", pattern)
	}
}

// A batch ack whose body is over the limit answers 413 through the whole
// chain, whether its length is declared or it arrives chunked: the body's
// reader, not the validator, refuses it.
func TestAckBodyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{repoll: 50 * time.Millisecond, config: func(c *testConfig) { c.MaxBodyBytes = 100 }})
	body := `{"acknowledgments":[{"transactionId":"` + strings.Repeat("x", 200) + `","partitionId":"00000000-0000-0000-0000-000000000001"}]}`
	requireBodyTooLarge(t, b.url+"/api/v1/ack/batch", body)
}
