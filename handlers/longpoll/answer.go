package longpoll

import (
	"bufio"
	"bytes"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// chunkingAfter is net/http's bufferBeforeChunkingSize: the handler's
// writes go through a buffer of this size; what it flushes while the
// handler runs is sent in chunks, an answer that stays in it gets a
// Content-Length.
const chunkingAfter = 2048

// recorderKeepsUpTo is the largest buffer a recorder goes back to the pool
// with: a pop answer of 100 messages of 64 bytes is about 30 kB, and a rare
// answer of megabytes is not kept alive for the next one.
const recorderKeepsUpTo = 1 << 20

// recorder is the ResponseWriter a held request's answer is rendered into.
// Its writes go through a buffer like net/http's, so that the chunks (or
// the Content-Length) come out the same.
//
// Recorders are pooled with their buffers (newRecorder, release): a held
// pop's answer is about half of a fan-out run's allocated bytes otherwise,
// copied three times per answer (docs/benchmarks.md, "Round 6: memory of
// the fan-out run").
type recorder struct {
	header http.Header
	status int
	bw     *bufio.Writer
	chunks chunkSink
	out    bytes.Buffer // the response, head and body
}

// chunkSink keeps what the buffer flushes: the chunks of the answer, back
// to back, and whether the handler was still running (then net/http
// chunks the answer).
type chunkSink struct {
	body        []byte
	ends        []int // where each chunk ends in body
	handlerDone bool
	chunked     bool
}

func (c *chunkSink) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(c.ends) == 0 && !c.handlerDone {
		c.chunked = true
	}
	c.body = append(c.body, p...)
	c.ends = append(c.ends, len(c.body))
	return len(p), nil
}

var recorders = sync.Pool{New: func() any {
	r := &recorder{}
	r.bw = bufio.NewWriterSize(&r.chunks, chunkingAfter)
	return r
}}

// newRecorder is a recorder from the pool for an answer with header.
func newRecorder(header http.Header) *recorder {
	r := recorders.Get().(*recorder)
	r.header = header
	return r
}

// release empties r and puts it back in the pool; what response returned
// is no longer r's caller's.
func (r *recorder) release() {
	r.header, r.status = nil, 0
	r.bw.Reset(&r.chunks)
	r.chunks.handlerDone, r.chunks.chunked = false, false
	r.chunks.ends = r.chunks.ends[:0]
	r.chunks.body = r.chunks.body[:0]
	if cap(r.chunks.body) > recorderKeepsUpTo {
		r.chunks.body = nil
	}
	r.out.Reset()
	if r.out.Cap() > recorderKeepsUpTo {
		r.out = bytes.Buffer{}
	}
	recorders.Put(r)
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.bw.Write(p)
}

func (r *recorder) WriteString(s string) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.bw.WriteString(s)
}

// response renders the HTTP/1.1 answer, once the handler is done, with the
// bytes net/http's chunkWriter writes for the same handler output (Go
// 1.26, net/http/server.go) to a GET: the status line; the handler's
// headers, sorted; then Date, Content-Length, a sniffed Content-Type,
// Connection and Transfer-Encoding, in that order; the body, whole or in
// the chunks the buffer flushed. closing adds Connection: close, as
// net/http does while the server shuts down. The bytes are r's until
// release.
func (r *recorder) response(closing bool) []byte {
	r.chunks.handlerDone = true
	_ = r.bw.Flush()
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	h := r.header
	body := r.chunks.body
	bodyAllowed := status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
	if !bodyAllowed {
		h.Del("Content-Length")
		h.Del("Transfer-Encoding")
		body = nil
	}
	var num, clNum [20]byte
	var contentLength []byte
	var contentType, connection, transferEncoding string
	_, hasCL := h["Content-Length"]
	chunked := bodyAllowed && !hasCL && r.chunks.chunked
	if bodyAllowed && !hasCL && !chunked {
		contentLength = strconv.AppendInt(clNum[:0], int64(len(body)), 10)
	}
	if _, haveType := h["Content-Type"]; bodyAllowed && !haveType && h.Get("Content-Encoding") == "" && len(body) > 0 {
		// net/http sniffs the first chunk it is given.
		contentType = http.DetectContentType(body[:r.chunks.ends[0]])
	}
	if closing {
		h.Del("Connection")
		connection = "close"
	}
	if chunked {
		transferEncoding = "chunked"
	}
	out := &r.out
	out.Grow(256 + len(body) + 16*len(r.chunks.ends))
	out.WriteString("HTTP/1.1 ")
	if text := http.StatusText(status); text != "" {
		out.Write(strconv.AppendInt(num[:0], int64(status), 10))
		out.WriteByte(' ')
		out.WriteString(text)
	} else {
		out.WriteString(strconv.Itoa(status) + " status code " + strconv.Itoa(status))
	}
	out.WriteString("\r\n")
	_ = h.Write(out)
	if _, ok := h["Date"]; !ok {
		out.WriteString("Date: ")
		out.Write(time.Now().UTC().AppendFormat(out.AvailableBuffer(), http.TimeFormat))
		out.WriteString("\r\n")
	}
	if contentLength != nil {
		out.WriteString("Content-Length: ")
		out.Write(contentLength)
		out.WriteString("\r\n")
	}
	for _, kv := range [...][2]string{
		{"Content-Type", contentType}, {"Connection", connection}, {"Transfer-Encoding", transferEncoding},
	} {
		if kv[1] != "" {
			out.WriteString(kv[0])
			out.WriteString(": ")
			out.WriteString(kv[1])
			out.WriteString("\r\n")
		}
	}
	out.WriteString("\r\n")
	if !chunked {
		out.Write(body)
		return out.Bytes()
	}
	start := 0
	for _, end := range r.chunks.ends {
		out.Write(strconv.AppendInt(num[:0], int64(end-start), 16))
		out.WriteString("\r\n")
		out.Write(body[start:end])
		out.WriteString("\r\n")
		start = end
	}
	out.WriteString("0\r\n\r\n")
	return out.Bytes()
}
