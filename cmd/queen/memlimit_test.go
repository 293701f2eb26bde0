package main

import (
	"runtime/metrics"
	"testing"

	"github.com/stretchr/testify/require"
)

// The soft limit is the base while the heap is small, and never less than
// twice the live heap plus the runtime's other memory: the collector never
// runs more often than at GOGC 100.
func TestSoftLimitNeverBelowTwiceTheLiveHeap(t *testing.T) {
	t.Parallel()
	require.EqualValues(t, softLimitBase, softLimit(10<<20, 5<<20))
	require.EqualValues(t, softLimitBase, softLimit(60<<20, 20<<20))
	require.EqualValues(t, 20<<20+2*100<<20, softLimit(100<<20, 20<<20))
	require.EqualValues(t, 1<<20+2*1<<30, softLimit(1<<30, 1<<20))
}

// The runtime's metrics the limit reads exist (a renamed one would read
// as zero and leave the limit at its base whatever the live heap).
func TestSoftLimitMetricsExist(t *testing.T) {
	t.Parallel()
	known := map[string]bool{}
	for _, d := range metrics.All() {
		known[d.Name] = d.Kind == metrics.KindUint64
	}
	for _, name := range memorySamples {
		require.True(t, known[name], name)
	}
}
