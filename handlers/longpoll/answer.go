package longpoll

import (
	"bytes"
	"net/http"
	"strconv"
	"time"
)

// recorder is the ResponseWriter a held request's answer is rendered into.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

// chunkingAfter is net/http's bufferBeforeChunkingSize: a handler that
// writes more than this in one Write gets a chunked answer, one that
// writes no more gets a Content-Length.
const chunkingAfter = 2048

// response renders the HTTP/1.1 answer with the bytes net/http's
// chunkWriter.writeHeader writes for the same handler output (Go 1.26,
// net/http/server.go) to a GET: the status line; the handler's headers,
// sorted; then Date, Content-Length, a sniffed Content-Type, Connection and
// Transfer-Encoding, in that order. The one difference: a body written in
// several Writes of more than chunkingAfter bytes in all is sent as one
// chunk (the pop answers are one Write). closing adds Connection: close,
// as net/http does while the server shuts down.
func (r *recorder) response(closing bool) []byte {
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	h := r.header
	body := r.body.Bytes()
	bodyAllowed := status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
	if !bodyAllowed {
		h.Del("Content-Length")
		h.Del("Transfer-Encoding")
		body = nil
	}
	var contentLength, contentType, connection, transferEncoding string
	_, hasCL := h["Content-Length"]
	chunked := bodyAllowed && !hasCL && len(body) > chunkingAfter
	if bodyAllowed && !hasCL && !chunked {
		contentLength = strconv.Itoa(len(body))
	}
	if _, haveType := h["Content-Type"]; bodyAllowed && !haveType && h.Get("Content-Encoding") == "" && len(body) > 0 {
		contentType = http.DetectContentType(body)
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
	out = strconv.AppendInt(out, int64(len(body)), 16)
	out = append(out, "\r\n"...)
	out = append(out, body...)
	return append(out, "\r\n0\r\n\r\n"...)
}
