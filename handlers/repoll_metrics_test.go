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
	for _, name := range []string{"queen_pop_repoll_statements_total", "queen_pop_repoll_keys_total", "queen_pop_repoll_woken_total", "queen_pop_repoll_skipped_total"} {
		require.Contains(t, fams, name)
		require.Equal(t, dto.MetricType_COUNTER, fams[name].GetType(), name)
		require.Zero(t, value(t, fams, name), "%s before any long-poll", name)
	}
	require.Nil(t, b.pop("/api/v1/pop/queue/idle?wait=true&timeout=400"))
	fams = b.scrape()
	statements := value(t, fams, "queen_pop_repoll_statements_total")
	require.Positive(t, statements, "the parked pop was looked at by the shared re-poll")
	require.Equal(t, statements, value(t, fams, "queen_pop_repoll_keys_total"), "one parked key per statement")
	require.Zero(t, value(t, fams, "queen_pop_repoll_woken_total"), "an empty queue wakes nobody")
}
