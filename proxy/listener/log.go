package listener

import (
	"log"
	"strings"
	"time"
)

// readHeaderTimeout bounds how long a client may take to send its headers.
const readHeaderTimeout = 10 * time.Second

// lineWriter hands each line net/http logs (TLS handshake errors and the
// like) to fn.
type lineWriter func(string)

func (f lineWriter) Write(p []byte) (int, error) {
	f(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func newLogger(fn func(string)) *log.Logger { return log.New(lineWriter(fn), "", 0) }
