package inventory

import (
	"strconv"
	"testing"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/proxy/limit"
)

// BenchmarkAdmitKnown is what the caps add to a push whose queues and
// partitions the cluster already has (the common case): 10 distinct pairs.
//
//	go test -run '^$' -bench AdmitKnown -benchmem ./proxy/inventory/
func BenchmarkAdmitKnown(b *testing.B) {
	i := New(Config{})
	cluster := uuid.New()
	parts := make([]string, 10)
	pairs := make([]Pair, 10)
	for k := range parts {
		parts[k] = "p" + strconv.Itoa(k)
		pairs[k] = Pair{"orders", parts[k]}
	}
	read(i, cluster, map[string][]string{"orders": parts})
	lim := limit.Limits{MaxQueues: 200, MaxPartitionsPerQueue: 32}
	for b.Loop() {
		if refusal, _ := i.Admit(cluster, lim, pairs, false); refusal != "" {
			b.Fatal(refusal)
		}
	}
}
