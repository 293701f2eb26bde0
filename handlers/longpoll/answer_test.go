package longpoll

import (
	"bufio"
	"bytes"
	"io"
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
			rec := &recorder{header: http.Header{}}
			h(rec, nil)
			got := rec.response(false)
			require.Equal(t, string(dateHeader.ReplaceAll(want, []byte("\r\n"))), string(dateHeader.ReplaceAll(got, []byte("\r\n"))))
		})
	}
}

func TestRecorderClosingSaysConnectionClose(t *testing.T) {
	t.Parallel()
	rec := &recorder{header: http.Header{}}
	rec.WriteHeader(204)
	require.Contains(t, string(rec.response(true)), "\r\nConnection: close\r\n")
}
