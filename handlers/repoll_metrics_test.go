package handlers

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

// The shared re-poll's counters reach /metrics/prometheus as counters: a
// long-poll parked on an empty queue is looked at by the re-poll (50 ms here)
// until its timeout, one key per statement.
func TestRepollFamilies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fams := b.scrape()
	requireZeroCounters(t, fams, "queen_pop_repoll_statements_total", "queen_pop_repoll_keys_total", "queen_pop_repoll_woken_total", "queen_pop_repoll_skipped_total")
	require.Nil(t, b.pop("/api/v1/pop/queue/idle?wait=true&timeout=400"))
	fams = b.scrape()
	statements := value(t, fams, "queen_pop_repoll_statements_total")
	require.Positive(t, statements, "the parked pop was looked at by the shared re-poll")
	require.Equal(t, statements, value(t, fams, "queen_pop_repoll_keys_total"), "one parked key per statement")
	require.Zero(t, value(t, fams, "queen_pop_repoll_woken_total"), "an empty queue wakes nobody")
}

// The shared autoAck reads' counters reach /metrics/prometheus as counters:
// once both groups' cursors are known here, group g2's pop of what g1's pop
// just read is served from g1's rows (handlers/broker/read_share.go).
func TestSharedReadFamilies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fams := b.scrape()
	requireZeroCounters(t, fams, "queen_pop_autoack_reads_total", "queen_pop_autoack_shared_total", "queen_pop_autoack_shared_fallbacks_total", "queen_pop_autoack_shared_waits_total")
	b.push(item("fan", "p", "m0", 0))
	for _, g := range []string{"g1", "g2"} {
		require.Len(t, b.pop("/api/v1/pop/queue/fan?consumerGroup="+g+"&autoAck=true&batch=2").Messages, 1, g)
	}
	b.push(item("fan", "p", "m1", 1))
	b.push(item("fan", "p", "m2", 2))
	for _, g := range []string{"g1", "g2"} {
		require.Len(t, b.pop("/api/v1/pop/queue/fan?consumerGroup="+g+"&autoAck=true&batch=2").Messages, 2, g)
	}
	fams = b.scrape()
	require.Equal(t, 1.0, value(t, fams, "queen_pop_autoack_shared_total"), "g2's second pop served from g1's read")
	require.Equal(t, 3.0, value(t, fams, "queen_pop_autoack_reads_total"), "the first pop of each group and g1's second")
	require.Zero(t, value(t, fams, "queen_pop_autoack_shared_fallbacks_total"))
}

// requireZeroCounters checks that each family is exposed as a counter and is
// still at zero (nothing has happened on the fresh broker yet).
func requireZeroCounters(t *testing.T, fams map[string]*dto.MetricFamily, names ...string) {
	t.Helper()
	for _, name := range names {
		require.Contains(t, fams, name)
		require.Equal(t, dto.MetricType_COUNTER, fams[name].GetType(), name)
		require.Zero(t, value(t, fams, name), name)
	}
}
