package handlers

import (
	"bytes"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// scrape fetches /metrics/prometheus through the HTTP chain and parses it
// with the Prometheus project's own text parser.
func (b *testBundle) scrape() map[string]*dto.MetricFamily {
	b.t.Helper()
	status, raw := b.do("GET", "/metrics/prometheus", nil)
	require.Equal(b.t, http.StatusOK, status)
	resp, err := http.Get(b.url + "/metrics/prometheus")
	require.NoError(b.t, err)
	defer resp.Body.Close()
	require.Equal(b.t, "text/plain; version=0.0.4; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Equal(b.t, "no-cache", resp.Header.Get("Cache-Control"))
	_, _ = io.Copy(io.Discard, resp.Body)
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(raw))
	require.NoError(b.t, err, "%s", raw)
	return fams
}

// value is the sample of family whose labels are exactly labels.
func value(t *testing.T, fams map[string]*dto.MetricFamily, family string, labels ...string) float64 {
	t.Helper()
	f := fams[family]
	require.NotNil(t, f, "family %s", family)
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if len(got) != len(want) {
			continue
		}
		match := true
		for k, v := range want {
			if got[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue()
		}
	}
	require.Failf(t, "no sample", "%s%v", family, labels)
	return 0
}

func TestPrometheusExposition(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t)
	t0 := time.Now().UTC().Truncate(time.Minute)
	workload(b, t0)
	require.NoError(t, b.jobs.Flush(t.Context(), t0.Add(time.Minute+10*time.Second)))
	fams := b.scrape()

	for name, typ := range map[string]dto.MetricType{
		"queen_uptime_seconds":                     dto.MetricType_GAUGE,
		"queen_cpu_user_microseconds_total":        dto.MetricType_COUNTER,
		"queen_process_resident_memory_bytes":      dto.MetricType_GAUGE,
		"queen_db_pool_size":                       dto.MetricType_GAUGE,
		"queen_db_pool_idle":                       dto.MetricType_GAUGE,
		"queen_db_pool_active":                     dto.MetricType_GAUGE,
		"queen_file_buffer_pending":                dto.MetricType_GAUGE,
		"queen_file_buffer_db_healthy":             dto.MetricType_GAUGE,
		"queen_maintenance_mode_enabled":           dto.MetricType_GAUGE,
		"queen_process_push_requests_total":        dto.MetricType_COUNTER,
		"queen_process_pop_messages_total":         dto.MetricType_COUNTER,
		"queen_cluster_push_messages_total":        dto.MetricType_COUNTER,
		"queen_cluster_ack_total":                  dto.MetricType_COUNTER,
		"queen_cluster_dlq_total":                  dto.MetricType_COUNTER,
		"queen_queue_pop_lag_milliseconds":         dto.MetricType_GAUGE,
		"queen_queue_ack_per_minute":               dto.MetricType_GAUGE,
		"queen_queue_parked_consumers":             dto.MetricType_GAUGE,
		"queen_queue_conflated_per_minute":         dto.MetricType_GAUGE,
		"queen_worker_requests_per_minute":         dto.MetricType_GAUGE,
		"queen_worker_event_loop_lag_milliseconds": dto.MetricType_GAUGE,
		"queen_dlq_depth":                          dto.MetricType_GAUGE,
		"queen_dlq_depth_by_queue":                 dto.MetricType_GAUGE,
	} {
		require.Contains(t, fams, name)
		require.Equal(t, typ, fams[name].GetType(), name)
		require.NotEmpty(t, fams[name].GetHelp(), name)
	}

	// PROM-2: every queen_queue_* sample has exactly its label set, and no
	// tenant label.
	extra := map[string]string{"queen_queue_pop_lag_milliseconds": "stat", "queen_queue_ack_per_minute": "result"}
	queueFams := 0
	for name, f := range fams {
		if !strings.HasPrefix(name, "queen_queue_") {
			continue
		}
		queueFams++
		want := []string{"queue"}
		if e, ok := extra[name]; ok {
			want = append(want, e)
		}
		sort.Strings(want)
		for _, m := range f.GetMetric() {
			var got []string
			for _, l := range m.GetLabel() {
				got = append(got, l.GetName())
			}
			sort.Strings(got)
			require.Equal(t, want, got, name)
		}
	}
	require.Equal(t, 10, queueFams)

	// Cluster totals are what the collectors wrote: every minute so far.
	require.Equal(t, 18.0, value(t, fams, "queen_cluster_push_messages_total", "scope", "cluster"))
	require.Equal(t, 4.0, value(t, fams, "queen_cluster_push_requests_total", "scope", "cluster"))
	require.Equal(t, 10.0, value(t, fams, "queen_cluster_pop_messages_total", "scope", "cluster"))
	require.Equal(t, 8.0, value(t, fams, "queen_cluster_ack_total", "scope", "cluster", "result", "success"))
	require.Equal(t, 2.0, value(t, fams, "queen_cluster_ack_total", "scope", "cluster", "result", "failed"))
	require.Equal(t, 1.0, value(t, fams, "queen_cluster_dlq_total", "scope", "cluster"))
	// Per-queue gauges are the queue's newest minute (t1: the 3 late pushes).
	require.Equal(t, 3.0, value(t, fams, "queen_queue_push_messages_per_minute", "queue", "orders"))
	require.Equal(t, 1.0, value(t, fams, "queen_queue_push_requests_per_minute", "queue", "orders"))
	require.Equal(t, 5.0, value(t, fams, "queen_queue_push_messages_per_minute", "queue", "billing"))
	require.Equal(t, 1.0, value(t, fams, "queen_queue_pop_empty_per_minute", "queue", "idle"))
	// Live DLQ depth, and this process's counters.
	require.Equal(t, 1.0, value(t, fams, "queen_dlq_depth", "scope", "cluster"))
	require.Equal(t, 1.0, value(t, fams, "queen_dlq_depth_by_queue", "queue", "orders"))
	require.Equal(t, 18.0, value(t, fams, "queen_process_push_messages_total"))
	require.Equal(t, 2.0, value(t, fams, "queen_process_pop_requests_total"))
	require.Equal(t, 0.0, value(t, fams, "queen_maintenance_mode_enabled"))
	require.Equal(t, 1.0, value(t, fams, "queen_worker_requests_per_minute", "hostname", "broker-a", "worker_id", "0", "pid", "4242", "op", "push"))
	// orders' newest minute popped nothing: its lag gauges are 0.
	require.Equal(t, 0.0, value(t, fams, "queen_queue_pop_lag_milliseconds", "queue", "orders", "stat", "avg"))
}

// The process families are served even when the database is not.
func TestPrometheusWithoutDatabase(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t)
	b.pool.Close()
	fams := b.scrape()
	require.Contains(t, fams, "queen_uptime_seconds")
	require.Contains(t, fams, "queen_db_pool_size")
	require.NotContains(t, fams, "queen_cluster_push_messages_total")
}
