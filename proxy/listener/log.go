package listener

import (
	"log"
	"strings"
	"time"
)

// readHeaderTimeout bounds how long a client may take to send its headers;
// idleTimeout how long a kept-alive connection may wait for its next
// request. Nothing bounds a request once it is read: long-polls last.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
)

// lineWriter hands each line net/http logs (TLS handshake errors and the
// like) to fn.
type lineWriter func(string)

func (f lineWriter) Write(p []byte) (int, error) {
	f(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func newLogger(fn func(string)) *log.Logger { return log.New(lineWriter(fn), "", 0) }
