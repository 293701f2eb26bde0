package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/cmd/cmdtest"
	"github.com/queenforgo/queen/sql/pgtest"
)

// main wires the data plane's Timings into both the broker and the
// exposition: after a push and a pop, the binary's /metrics/prometheus
// shows the latency and group-commit histograms beside the reference's
// families and the Go runtime's.
func TestBinaryExposesHistograms(t *testing.T) {
	t.Parallel()
	b := startBroker(t, cmdtest.Binary(t, "cmd/queen"), brokerEnv(t, pgtest.NewDB(t), t.TempDir()))
	b.mustCall("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "q", "payload": 1}}}, http.StatusCreated)
	b.mustCall("GET", "/api/v1/pop/queue/q", nil, http.StatusOK)
	text := string(b.mustCall("GET", "/metrics/prometheus", nil, http.StatusOK))
	for _, line := range []string{
		"queen_push_duration_seconds_count 1",
		`queen_pop_duration_seconds_count{result="messages"} 1`,
		`queen_group_commit_flush_items_sum{kind="push"} 1`,
		`queen_group_commit_flush_duration_seconds_count{kind="push"} 1`,
		"# TYPE queen_uptime_seconds gauge",
		"# TYPE go_goroutines gauge",
	} {
		require.True(t, strings.Contains(text, line+"\n"), "missing %q in:\n%s", line, text)
	}
}
