package handlers

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/pgtest"
)

// fuzzHandler is the whole HTTP chain on its own database, called in
// process so that a fuzz iteration costs no network round trip.
func fuzzHandler(f *testing.F) http.Handler {
	srv := newServer(f, testConfig{Pool: pgtest.NewPool(f)})
	h, err := srv.Handler()
	require.NoError(f, err)
	return h
}

// Any push body answers 201 or a 4xx JSON error, never a 5xx.
func FuzzPushBody(f *testing.F) {
	for _, seed := range []string{
		`{"items":[{"queue":"q","payload":{"a":1}}]}`,
		`{"items":[{"queue":"q","partition":"p","transactionId":"t","traceId":"0195a8c6-0000-7000-8000-000000000000","payload":null}]}`,
		`{"items":[]}`, `{"items":[{"queue":""}]}`, `{"items":[{"queue":"q","payload":1e999}]}`,
		`{`, ``, `null`, `[]`, `{"items":null}`, `{"items":[{"queue":"q","transactionId":5}]}`,
		"{\"items\":[{\"queue\":\"q\u0000\"}]}", `{"items":[{"queue":"q","payload":"\ud800"}]}`,
	} {
		f.Add([]byte(seed))
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest("POST", "/api/v1/push", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch {
		case rec.Code == http.StatusCreated:
			var out []map[string]any
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out), "%s", rec.Body)
		case rec.Code >= 400 && rec.Code < 500:
			var e struct{ Error string }
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e), "%s", rec.Body)
			require.NotEmpty(t, e.Error)
		default:
			t.Fatalf("push %q answered %d %s", body, rec.Code, rec.Body)
		}
	})
}

var validName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,255}$`)

// A queue name is accepted exactly when it is 1-255 characters of
// [A-Za-z0-9_.-] other than "." and ".."; everything else is a 400 (or a
// 404 for what no route matches) before any database work.
func FuzzQueueName(f *testing.F) {
	for _, seed := range []string{"orders", "a.b-c_d", "", " ", "a/b", "ü", "..", "a b", "x%2Fy"} {
		f.Add(seed)
	}
	h := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, name string) {
		if name == "" {
			return // an empty segment is another route
		}
		req := httptest.NewRequest("GET", "/api/v1/pop/queue/"+url.PathEscape(name), nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if validName.MatchString(name) && name != "." && name != ".." {
			require.Equal(t, http.StatusNoContent, rec.Code, "%q: %s", name, rec.Body)
		} else if name == "." || name == ".." {
			// The standard mux redirects dot segments to the cleaned path.
			require.Equal(t, http.StatusTemporaryRedirect, rec.Code, "%q: %s", name, rec.Body)
		} else {
			require.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound}, rec.Code, "%q: %s", name, rec.Body)
		}
	})
}
