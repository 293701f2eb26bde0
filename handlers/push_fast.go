package handlers

import (
	"bytes"
	"errors"
	"io"
	"net/http"
)

// pushPattern is the push route as the generated router registers it.
const pushPattern = http.MethodPost + " /api/v1/push"

// pushFastPath serves the push route with decodePushBody instead of the
// generated strict handler's encoding/json decode. It sits innermost among
// the generated router's middlewares, so the request has passed the same
// parameter binding, validation and authorization as any other. A body the
// fast decoder does not decide (a refusal, an unusual shape) or cannot read
// goes on to the strict handler unchanged, the bytes already read replayed in
// front of the rest (and of the read error), so its answer is the one the
// generated decoding always gave.
func (s *Server) pushFastPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Pattern != pushPattern || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := readBody(r.Body, r.ContentLength)
		if err == nil {
			if items, ok := decodePushBody(body); ok {
				resp, err := s.push(r.Context(), items)
				if err == nil {
					err = resp.VisitPushMessagesResponse(w)
				}
				if err != nil {
					s.responseError(w, r, err)
				}
				return
			}
		}
		var rest io.Reader = bytes.NewReader(body)
		if err != nil {
			rest = io.MultiReader(rest, errReader{err})
		}
		r.Body = io.NopCloser(rest)
		next.ServeHTTP(w, r)
	})
}

// readBodyChunk is the most a body's declared length makes readBody allocate
// up front; a larger body grows as it arrives.
const readBodyChunk = 1 << 20

// readBody reads r to its end, in one allocation when size (the declared
// Content-Length, or -1) is right. On an error it returns what it read.
func readBody(r io.Reader, size int64) ([]byte, error) {
	n := 512
	if size >= 0 {
		// One byte more, so that the end is seen without growing.
		n = int(min(size, readBodyChunk)) + 1
	}
	buf := make([]byte, 0, n)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// errReader fails every read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
