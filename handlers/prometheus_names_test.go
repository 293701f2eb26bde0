package handlers

import (
	"sort"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

// referenceFamily is a family of the reference broker's exposition that
// dashboards and alerts read: its type, the label names of every sample,
// and the values of its enumerated label (stat, result, op, scope).
type referenceFamily struct {
	typ    dto.MetricType
	labels []string
	enum   map[string][]string
}

const (
	promGauge   = dto.MetricType_GAUGE
	promCounter = dto.MetricType_COUNTER
)

var worker = []string{"hostname", "worker_id", "pid"}

func withWorker(extra ...string) []string { return append(append([]string{}, worker...), extra...) }

// referenceFamilies are the names this broker keeps, from the reference's
// documentation (docs/http-api: the database block, the contract for 0.x
// dashboards; the in-process block; the Rust broker's per-process counters
// and queen_queue_conflated_per_minute) as listed in the specs
// (SECURITY-REQUIREMENTS §10, API-ADMIN §3.3). The C++ broker's thread pool,
// response registry, sidecar, pop backoff and UDP cluster-sync families have
// no counterpart in this broker (the Rust broker dropped them too); the
// mesh's families plug in through Config.Collectors.
var referenceFamilies = map[string]referenceFamily{
	// In-process, per broker.
	"queen_uptime_seconds":                {typ: promGauge},
	"queen_cpu_user_microseconds_total":   {typ: promCounter},
	"queen_cpu_system_microseconds_total": {typ: promCounter},
	"queen_process_resident_memory_bytes": {typ: promGauge},
	"queen_process_virtual_memory_bytes":  {typ: promGauge},
	"queen_db_pool_size":                  {typ: promGauge},
	"queen_db_pool_idle":                  {typ: promGauge},
	"queen_db_pool_active":                {typ: promGauge},
	"queen_file_buffer_pending":           {typ: promGauge},
	"queen_file_buffer_failed":            {typ: promGauge},
	"queen_file_buffer_db_healthy":        {typ: promGauge},
	"queen_maintenance_mode_enabled":      {typ: promGauge},
	"queen_process_push_requests_total":   {typ: promCounter},
	"queen_process_push_messages_total":   {typ: promCounter},
	"queen_process_pop_requests_total":    {typ: promCounter},
	"queen_process_pop_messages_total":    {typ: promCounter},
	"queen_process_ack_requests_total":    {typ: promCounter},
	"queen_process_ack_messages_total":    {typ: promCounter},
	"queen_process_transactions_total":    {typ: promCounter},
	"queen_process_db_errors_total":       {typ: promCounter},
	"queen_parked_long_polls":             {typ: promGauge, labels: []string{"queue"}},

	// From the database: cluster totals.
	"queen_cluster_push_requests_total": {typ: promCounter, labels: []string{"scope"}, enum: map[string][]string{"scope": {"cluster"}}},
	"queen_cluster_pop_requests_total":  {typ: promCounter, labels: []string{"scope"}, enum: map[string][]string{"scope": {"cluster"}}},
	"queen_cluster_ack_requests_total":  {typ: promCounter, labels: []string{"scope"}, enum: map[string][]string{"scope": {"cluster"}}},
	"queen_cluster_transactions_total":  {typ: promCounter, labels: []string{"scope"}, enum: map[string][]string{"scope": {"cluster"}}},
	"queen_cluster_push_messages_total": {typ: promCounter, labels: []string{"scope"}, enum: map[string][]string{"scope": {"cluster"}}},
	"queen_cluster_pop_messages_total":  {typ: promCounter, labels: []string{"scope"}, enum: map[string][]string{"scope": {"cluster"}}},
	"queen_cluster_ack_messages_total":  {typ: promCounter, labels: []string{"scope"}, enum: map[string][]string{"scope": {"cluster"}}},
	"queen_cluster_ack_total": {typ: promCounter, labels: []string{"scope", "result"},
		enum: map[string][]string{"scope": {"cluster"}, "result": {"success", "failed"}}},
	"queen_cluster_db_errors_total": {typ: promCounter, labels: []string{"scope"}, enum: map[string][]string{"scope": {"cluster"}}},
	"queen_cluster_dlq_total":       {typ: promCounter, labels: []string{"scope"}, enum: map[string][]string{"scope": {"cluster"}}},

	// Per queue: its newest minute.
	"queen_queue_pop_messages_per_minute": {typ: promGauge, labels: []string{"queue"}},
	"queen_queue_pop_lag_milliseconds": {typ: promGauge, labels: []string{"queue", "stat"},
		enum: map[string][]string{"stat": {"avg", "max"}}},
	"queen_queue_push_requests_per_minute": {typ: promGauge, labels: []string{"queue"}},
	"queen_queue_push_messages_per_minute": {typ: promGauge, labels: []string{"queue"}},
	"queen_queue_pop_empty_per_minute":     {typ: promGauge, labels: []string{"queue"}},
	"queen_queue_ack_per_minute": {typ: promGauge, labels: []string{"queue", "result"},
		enum: map[string][]string{"result": {"success", "failed"}}},
	"queen_queue_transactions_per_minute": {typ: promGauge, labels: []string{"queue"}},
	"queen_queue_conflated_per_minute":    {typ: promGauge, labels: []string{"queue"}},
	"queen_queue_parked_consumers":        {typ: promGauge, labels: []string{"queue"}},
	"queen_queue_metrics_age_seconds":     {typ: promGauge, labels: []string{"queue"}},

	// Per broker: its newest minute.
	"queen_worker_event_loop_lag_milliseconds": {typ: promGauge, labels: withWorker("stat"), enum: map[string][]string{"stat": {"avg", "max"}}},
	"queen_worker_free_slots":                  {typ: promGauge, labels: withWorker("stat"), enum: map[string][]string{"stat": {"avg", "min"}}},
	"queen_worker_db_connections":              {typ: promGauge, labels: worker},
	"queen_worker_job_queue_size":              {typ: promGauge, labels: withWorker("stat"), enum: map[string][]string{"stat": {"avg", "max"}}},
	"queen_worker_backoff_size":                {typ: promGauge, labels: worker},
	"queen_worker_jobs_done_per_minute":        {typ: promGauge, labels: worker},
	"queen_worker_requests_per_minute": {typ: promGauge, labels: withWorker("op"),
		enum: map[string][]string{"op": {"push", "pop", "ack", "transaction"}}},
	"queen_worker_messages_per_minute": {typ: promGauge, labels: withWorker("op"),
		enum: map[string][]string{"op": {"push", "pop", "ack"}}},
	"queen_worker_ack_per_minute": {typ: promGauge, labels: withWorker("result"),
		enum: map[string][]string{"result": {"success", "failed"}}},
	"queen_worker_lag_milliseconds":     {typ: promGauge, labels: withWorker("stat"), enum: map[string][]string{"stat": {"avg", "max"}}},
	"queen_worker_db_errors_per_minute": {typ: promGauge, labels: worker},
	"queen_worker_dlq_per_minute":       {typ: promGauge, labels: worker},
	"queen_worker_metrics_age_seconds":  {typ: promGauge, labels: worker},

	// Dead letters stored now.
	"queen_dlq_depth":          {typ: promGauge, labels: []string{"scope"}, enum: map[string][]string{"scope": {"cluster"}}},
	"queen_dlq_depth_by_queue": {typ: promGauge, labels: []string{"queue"}},
}

// Every reference family is there after a workload, with its type, a help
// text, exactly its label names on every sample, and every value of its
// enumerated label (and no other).
func TestPrometheusReferenceNames(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t)
	t0 := time.Now().UTC().Truncate(time.Minute)
	workload(b, t0)
	require.NoError(t, b.jobs.Flush(t.Context(), t0.Add(time.Minute+10*time.Second)))
	// A parked long-poll, for queen_parked_long_polls.
	parked := make(chan *popped, 1)
	go func() { parked <- b.pop("/api/v1/pop/queue/idle?wait=true&timeout=30000") }()
	require.Eventually(t, func() bool { return b.parked("idle") == 1 }, 10*time.Second, 10*time.Millisecond)

	fams := b.scrape()
	b.srv.Drain() // ends the parked pop
	require.Nil(t, <-parked)

	for name, want := range referenceFamilies {
		f := fams[name]
		require.NotNil(t, f, "reference family %s is missing", name)
		require.Equal(t, want.typ, f.GetType(), name)
		require.NotEmpty(t, f.GetHelp(), name)
		require.NotEmpty(t, f.GetMetric(), name)
		wantLabels := append([]string{}, want.labels...)
		sort.Strings(wantLabels)
		seen := map[string]map[string]bool{}
		for _, m := range f.GetMetric() {
			var got []string
			for _, l := range m.GetLabel() {
				got = append(got, l.GetName())
				if allowed, ok := want.enum[l.GetName()]; ok {
					require.Contains(t, allowed, l.GetValue(), "%s{%s}", name, l.GetName())
					if seen[l.GetName()] == nil {
						seen[l.GetName()] = map[string]bool{}
					}
					seen[l.GetName()][l.GetValue()] = true
				}
			}
			sort.Strings(got)
			if len(wantLabels) == 0 {
				require.Empty(t, got, name)
			} else {
				require.Equal(t, wantLabels, got, name)
			}
		}
		for label, values := range want.enum {
			for _, v := range values {
				require.True(t, seen[label][v], "%s has no sample with %s=%q", name, label, v)
			}
		}
	}
}
