package handlers

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/queenforgo/queen/sql/pgtest"
)

// BenchmarkConsumeCycle is one cycle of queen-bench's consume, through the
// broker's whole HTTP chain on the test harness's PostgreSQL: a pop of 100
// (queue mode, no wait) from a queue of 16 partitions, then one batch ack of
// everything it delivered, with the leases. Per op: the broker's CPU and
// allocations for 100 consumed messages, statements included (the
// benchmark's own reading of the pop answer is a few byte scans).
func BenchmarkConsumeCycle(b *testing.B) {
	srv := newServer(b, testConfig{Pool: pgtest.NewPool(b)})
	chain, err := srv.Handler()
	if err != nil {
		b.Fatal(err)
	}
	serve := func(method, path string, body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		chain.ServeHTTP(rec, req)
		return rec
	}
	pad := strings.Repeat("x", 64-34)
	seq := 0
	fill := func() {
		var body []byte
		for range 100 {
			body = append(body[:0], `{"items":[`...)
			for i := range 100 {
				if i > 0 {
					body = append(body, ',')
				}
				seq++
				body = fmt.Appendf(body, `{"queue":"consume","partition":"p-%d","transactionId":"c-%d","payload":{"t":1764740000000000000,"pad":"%s"}}`, seq/100%16, seq, pad)
			}
			body = append(body, "]}"...)
			if rec := serve("POST", "/api/v1/push", body); rec.Code != http.StatusCreated {
				b.Fatalf("push: %d %s", rec.Code, rec.Body)
			}
		}
	}
	fill()
	var ack []byte
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for b.Loop() {
		rec := serve("GET", "/api/v1/pop/queue/consume?batch=100&wait=false", nil)
		if rec.Code == http.StatusNoContent {
			b.StopTimer()
			t := processCPU(b)
			fill()
			cpu0 += processCPU(b) - t
			b.StartTimer()
			continue
		}
		if rec.Code != http.StatusOK {
			b.Fatalf("pop: %d %s", rec.Code, rec.Body)
		}
		ack = appendAckOfPop(ack[:0], rec.Body.Bytes())
		if rec := serve("POST", "/api/v1/ack/batch", ack); rec.Code != http.StatusOK || bytes.Contains(rec.Body.Bytes(), []byte(`"success":false`)) {
			b.Fatalf("ack: %d %s", rec.Code, rec.Body)
		}
	}
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// processCPU is the user and system time of this process so far: the
// broker's side of the work, without PostgreSQL's.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// appendAckOfPop appends the batch ack body of a pop answer: every message
// completed under its lease, as queen-bench sends it. It reads the answer
// by its member names, which popAnswer writes in a fixed order, and
// allocates nothing of its own.
func appendAckOfPop(buf, pop []byte) []byte {
	member := func(rest []byte, name string) ([]byte, []byte) {
		i := bytes.Index(rest, []byte(name))
		if i < 0 {
			return nil, nil
		}
		rest = rest[i+len(name):]
		j := bytes.IndexByte(rest, '"')
		return rest[:j], rest[j:]
	}
	buf = append(buf, `{"acknowledgments":[`...)
	rest := pop[bytes.Index(pop, []byte(`"messages":[`)):]
	for n := 0; ; n++ {
		var lease, pid, tx []byte
		if lease, rest = member(rest, `"leaseId":"`); rest == nil {
			break
		}
		pid, rest = member(rest, `"partitionId":"`)
		tx, rest = member(rest, `"transactionId":"`)
		if n > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"transactionId":"`...)
		buf = append(buf, tx...)
		buf = append(buf, `","partitionId":"`...)
		buf = append(buf, pid...)
		buf = append(buf, `","leaseId":"`...)
		buf = append(buf, lease...)
		buf = append(buf, `","status":"completed"}`...)
	}
	return append(buf, "]}"...)
}
