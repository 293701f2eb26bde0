package longpoll

import (
	"bufio"
	"bytes"
	"net/http"
	"strconv"
	"time"
)

// chunkingAfter is net/http's bufferBeforeChunkingSize: the handler's
// writes go through a buffer of this size; what it flushes while the
// handler runs is sent in chunks, an answer that stays in it gets a
// Content-Length.
const chunkingAfter = 2048

// recorder is the ResponseWriter a held request's answer is rendered into.
// Its writes go through a buffer like net/http's, so that the chunks (or
// the Content-Length) come out the same.
type recorder struct {
	header http.Header
	status int
	bw     *bufio.Writer
	chunks chunkSink
}

// chunkSink keeps what the buffer flushes: the chunks of the answer, and
// whether the handler was still running (then net/http chunks the answer).
type chunkSink struct {
	parts       [][]byte
	handlerDone bool
	chunked     bool
}

func (c *chunkSink) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(c.parts) == 0 && !c.handlerDone {
		c.chunked = true
	}
	c.parts = append(c.parts, bytes.Clone(p))
	return len(p), nil
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	if r.bw == nil {
		r.bw = bufio.NewWriterSize(&r.chunks, chunkingAfter)
	}
	return r.bw.Write(p)
}

func (r *recorder) WriteString(s string) (int, error) {
	r.WriteHeader(http.StatusOK)
	if r.bw == nil {
		r.bw = bufio.NewWriterSize(&r.chunks, chunkingAfter)
	}
	return r.bw.WriteString(s)
}

// response renders the HTTP/1.1 answer, once the handler is done, with the
// bytes net/http's chunkWriter writes for the same handler output (Go
// 1.26, net/http/server.go) to a GET: the status line; the handler's
// headers, sorted; then Date, Content-Length, a sniffed Content-Type,
// Connection and Transfer-Encoding, in that order; the body, whole or in
// the chunks the buffer flushed. closing adds Connection: close, as
// net/http does while the server shuts down.
func (r *recorder) response(closing bool) []byte {
	r.chunks.handlerDone = true
	if r.bw != nil {
		_ = r.bw.Flush()
	}
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	h := r.header
	body := bytes.Join(r.chunks.parts, nil)
	bodyAllowed := status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
	if !bodyAllowed {
		h.Del("Content-Length")
		h.Del("Transfer-Encoding")
		body = nil
	}
	var contentLength, contentType, connection, transferEncoding string
	_, hasCL := h["Content-Length"]
	chunked := bodyAllowed && !hasCL && r.chunks.chunked
	if bodyAllowed && !hasCL && !chunked {
		contentLength = strconv.Itoa(len(body))
	}
	if _, haveType := h["Content-Type"]; bodyAllowed && !haveType && h.Get("Content-Encoding") == "" && len(body) > 0 {
		// net/http sniffs the first chunk it is given.
		contentType = http.DetectContentType(r.chunks.parts[0])
	}
	if closing {
		h.Del("Connection")
		connection = "close"
	}
	if chunked {
		transferEncoding = "chunked"
	}
	out := make([]byte, 0, 256+len(body))
	out = append(out, "HTTP/1.1 "...)
	if text := http.StatusText(status); text != "" {
		out = strconv.AppendInt(out, int64(status), 10)
		out = append(out, ' ')
		out = append(out, text...)
	} else {
		out = append(out, strconv.Itoa(status)+" status code "+strconv.Itoa(status)...)
	}
	out = append(out, "\r\n"...)
	var hb bytes.Buffer
	_ = h.Write(&hb)
	out = append(out, hb.Bytes()...)
	if _, ok := h["Date"]; !ok {
		out = append(out, "Date: "...)
		out = time.Now().UTC().AppendFormat(out, http.TimeFormat)
		out = append(out, "\r\n"...)
	}
	for _, kv := range [...][2]string{
		{"Content-Length", contentLength}, {"Content-Type", contentType},
		{"Connection", connection}, {"Transfer-Encoding", transferEncoding},
	} {
		if kv[1] != "" {
			out = append(out, kv[0]+": "+kv[1]+"\r\n"...)
		}
	}
	out = append(out, "\r\n"...)
	if !chunked {
		return append(out, body...)
	}
	for _, c := range r.chunks.parts {
		out = strconv.AppendInt(out, int64(len(c)), 16)
		out = append(out, "\r\n"...)
		out = append(out, c...)
		out = append(out, "\r\n"...)
	}
	return append(out, "0\r\n\r\n"...)
}
