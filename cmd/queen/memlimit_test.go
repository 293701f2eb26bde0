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
	require.EqualValues(t, softLimitBase, softLimit(15<<20, 5<<20))
	require.EqualValues(t, 20<<20+2*100<<20, softLimit(100<<20, 20<<20))
	require.EqualValues(t, 1<<20+2*1<<30, softLimit(1<<30, 1<<20))
}

// The base binds where the flat-out fan-out run's heap would otherwise
// grow to three times its live heap (10-13 MB live, 7 MB of stacks and
// metadata: 45-50 MB of the runtime's memory, with the binary's pages an
// RSS over 64 MB), and lets it grow to more than twice its live heap.
func TestSoftLimitBindsBelowTheFanOutRunsHeap(t *testing.T) {
	t.Parallel()
	live, other := int64(13<<20), int64(7<<20)
	limit := softLimit(uint64(live), uint64(other))
	require.Less(t, limit, other+3*live, "the limit binds under GOGC 200's heap")
	require.Greater(t, limit, other+2*live, "above GOGC 100's")
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
