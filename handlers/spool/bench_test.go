package spool

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// BenchmarkAppend measures what a `buffered` answer costs: Appends of one
// 256-byte record each, with and without the fsync, from 1 to 64
// concurrent pushers. ns/op is per append over all pushers (the inverse of
// throughput); appends/fsync shows how many pushes share one group fsync.
// Numbers are in docs/spool.md; run with
//
//	go test -run '^$' -bench Append -benchtime 2s ./handlers/spool
//
// with TMPDIR on the disk you care about.
func BenchmarkAppend(b *testing.B) {
	payload := json.RawMessage(`{"data":"` + strings.Repeat("x", 256-11) + `"}`)
	for _, fsync := range []bool{true, false} {
		for _, writers := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("fsync=%v/writers=%d", fsync, writers), func(b *testing.B) {
				s := Open(Config{Dir: b.TempDir(), noSync: !fsync, EventsPerFile: 1 << 30})
				defer s.Close()
				b.SetBytes(int64(len(payload)))
				b.ResetTimer()
				var wg sync.WaitGroup
				for w := range writers {
					wg.Go(func() {
						for i := w; i < b.N; i += writers {
							r := Record{Queue: "bench", Partition: "Default", TransactionID: fmt.Sprint(i), Payload: payload}
							if err := s.Append(b.Context(), []Record{r}); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				if f := s.flushes.Load(); f > 0 {
					b.ReportMetric(float64(b.N)/float64(f), "appends/fsync")
				}
			})
		}
	}
}
