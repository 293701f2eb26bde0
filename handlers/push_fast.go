package handlers

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/queenforgo/queen/gen/api"
)

// The routes with a one-pass body decoder, as the generated router
// registers them.
const (
	pushPattern     = http.MethodPost + " /api/v1/push"
	ackBatchPattern = http.MethodPost + " /api/v1/ack/batch"
)

// fastBodyPath serves the push and batch ack routes with their one-pass
// decoders (decodePushBody, decodeAckBody) instead of the generated strict
// handler's encoding/json decode. It sits innermost among the generated
// router's middlewares, so the request has passed the same parameter
// binding, validation and authorization as any other; neither route has a
// strict middleware of its own. A body the fast decoder does not decide (a
// refusal, an unusual shape) or cannot read goes on to the strict handler
// unchanged, the bytes already read replayed in front of the rest (and of
// the read error), so its answer is the one the generated decoding always
// gave.
func (s *Server) fastBodyPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.Pattern != pushPattern && r.Pattern != ackBatchPattern) || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := readBody(r.Body, r.ContentLength)
		if err == nil && s.serveFast(w, r, body) {
			return
		}
		var rest io.Reader = bytes.NewReader(body)
		if err != nil {
			rest = io.MultiReader(rest, errReader{err})
		}
		r.Body = io.NopCloser(rest)
		next.ServeHTTP(w, r)
	})
}

// serveFast answers r from body when its route's decoder decides the body,
// as the strict handler would answer it: the operation's handler, its
// response written, an error through responseError.
func (s *Server) serveFast(w http.ResponseWriter, r *http.Request, body []byte) bool {
	var err error
	switch r.Pattern {
	case pushPattern:
		items, ok := decodePushBody(body)
		if !ok {
			return false
		}
		var resp api.PushMessagesResponseObject
		if resp, err = s.push(r.Context(), items); err == nil {
			err = resp.VisitPushMessagesResponse(w)
		}
	case ackBatchPattern:
		req, ok := decodeAckBody(body)
		if !ok {
			return false
		}
		var resp api.AckBatchResponseObject
		if resp, err = s.AckBatch(r.Context(), api.AckBatchRequestObject{Body: &req}); err == nil {
			err = resp.VisitAckBatchResponse(w)
		}
	default:
		return false
	}
	if err != nil {
		s.responseError(w, r, err)
	}
	return true
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
