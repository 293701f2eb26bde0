package longpoll

import (
	"bufio"
	"bytes"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var dateHeader = regexp.MustCompile(`\r\nDate: [^\r]*\r\n`)

// netHTTPBytes is what net/http writes on the wire for handler's answer
// to a GET.
func netHTTPBytes(t *testing.T, handler http.HandlerFunc) []byte {
	t.Helper()
	srv := httptest.NewServer(handler)
	defer srv.Close()
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "GET /x HTTP/1.1\r\nHost: t\r\n\r\n")
	require.NoError(t, err)
	var seen bytes.Buffer
	resp, err := http.ReadResponse(bufio.NewReader(io.TeeReader(c, &seen)), nil)
	require.NoError(t, err)
	_, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	return seen.Bytes()
}

func TestRecorderWritesNetHTTPBytes(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 3000)
	cases := map[string]http.HandlerFunc{
		"json 200": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(200)
			_, _ = io.WriteString(w, `{"ok":true}`+"\n")
		},
		"exactly 2048": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, strings.Repeat("y", 2048))
		},
		"chunked above 2048": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, big)
		},
		"one large Write": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(big)) // the generated Visit methods' buf.WriteTo
		},
		"several writes": func(w http.ResponseWriter, _ *http.Request) {
			for range 5 {
				_, _ = io.WriteString(w, strings.Repeat("z", 700))
			}
		},
		"204": func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) },
		"204 with a type": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(204)
		},
		"sniffed, middleware headers": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Access-Control-Allow-Origin", "*")
			w.Header().Add("X-Request-Id", "abc")
			w.Header().Add("Vary", "Origin")
			w.WriteHeader(503)
			_, _ = io.WriteString(w, "<html>down</html>")
		},
		"empty 200": func(w http.ResponseWriter, _ *http.Request) {},
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want := netHTTPBytes(t, h)
			rec := newRecorder(http.Header{})
			defer rec.release()
			h(rec, nil)
			got := rec.response(false)
			require.Equal(t, string(dateHeader.ReplaceAll(want, []byte("\r\n"))), string(dateHeader.ReplaceAll(got, []byte("\r\n"))))
		})
	}
}

func TestRecorderClosingSaysConnectionClose(t *testing.T) {
	t.Parallel()
	rec := newRecorder(http.Header{})
	defer rec.release()
	rec.WriteHeader(204)
	require.Contains(t, string(rec.response(true)), "\r\nConnection: close\r\n")
}

// A held answer is rendered from a pooled recorder: once warm, rendering a
// pop answer of 30 kB allocates (almost) nothing, where a recorder per
// answer made four allocations: its buffer, a copy of each chunk, the
// joined body and the response. Under -race the pool drops a quarter of
// what it is given at random, and a collection empties it, so an average
// may exceed the bound by chance; the fewest allocations of 20 single
// answers does not (all 20 would have to miss the pool).
func TestRecorderReusesItsBuffers(t *testing.T) {
	body := []byte(strings.Repeat("m", 30_000))
	header := http.Header{}
	answer := func() {
		header.Set("Content-Type", "application/json")
		rec := newRecorder(header)
		_, _ = rec.Write(body)
		out := rec.response(false)
		if len(out) < len(body) {
			t.Fatal("short response")
		}
		rec.release()
	}
	answer()
	fewest := math.Inf(1)
	for range 20 {
		fewest = min(fewest, testing.AllocsPerRun(1, answer))
	}
	require.Less(t, fewest, 2.0, "allocations of a held answer")
}

// A released recorder starts the next answer empty: nothing of the last
// one's status, chunks or bytes is in it.
func TestRecorderReleasedStartsEmpty(t *testing.T) {
	t.Parallel()
	rec := newRecorder(http.Header{})
	rec.WriteHeader(503)
	_, _ = io.WriteString(rec, strings.Repeat("a", 3000))
	_ = rec.response(false)
	rec.release()
	rec = newRecorder(http.Header{})
	defer rec.release()
	_, _ = io.WriteString(rec, `{"ok":true}`)
	got := string(dateHeader.ReplaceAll(rec.response(false), []byte("\r\n")))
	require.Equal(t, "HTTP/1.1 200 OK\r\nContent-Length: 11\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{\"ok\":true}", got)
}
