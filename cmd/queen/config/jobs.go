package config

import (
	"log/slog"
	"time"

	"github.com/queenforgo/queen/handlers/jobs"
)

// Jobs holds the background services' settings (handlers/jobs). The
// variable names are the reference broker's, except the last one.
type Jobs struct {
	SampleInterval    time.Duration // METRICS_SAMPLE_INTERVAL_MS: gauge sampling of the metrics collector
	RetentionInterval time.Duration // RETENTION_INTERVAL (ms): retention runs
	EvictionInterval  time.Duration // EVICTION_INTERVAL (ms): maxWaitTimeSeconds eviction runs
	HistoryRetention  time.Duration // METRICS_RETENTION_DAYS: system metrics and retention history kept
	// QueueMetricsRetention bounds the per-minute queue and broker rows
	// (QUEEN_QUEUE_METRICS_RETENTION_DAYS; the reference never purged them).
	QueueMetricsRetention time.Duration
	// PartitionRetention: empty partitions are deleted this long after their
	// last message (PARTITION_CLEANUP_DAYS).
	PartitionRetention time.Duration
}

// JobsDefault is Jobs with every variable unset: the defaults of
// handlers/jobs.
func JobsDefault() Jobs {
	return Jobs{
		SampleInterval:        jobs.SampleIntervalDefault,
		RetentionInterval:     jobs.RetentionIntervalDefault,
		EvictionInterval:      jobs.EvictionIntervalDefault,
		HistoryRetention:      jobs.HistoryRetentionDefault,
		QueueMetricsRetention: jobs.MetricsRetentionDefault,
		PartitionRetention:    jobs.PartitionRetentionDefault,
	}
}

// days is a whole-day default as its variable counts it.
func days(d time.Duration) int64 { return int64(d / (24 * time.Hour)) }

func (l *loader) jobs() Jobs {
	day := 24 * time.Hour
	return Jobs{
		SampleInterval:        l.millis("METRICS_SAMPLE_INTERVAL_MS", jobs.SampleIntervalDefault, 100),
		RetentionInterval:     l.millis("RETENTION_INTERVAL", jobs.RetentionIntervalDefault, 1000),
		EvictionInterval:      l.millis("EVICTION_INTERVAL", jobs.EvictionIntervalDefault, 1000),
		HistoryRetention:      time.Duration(l.integer("METRICS_RETENTION_DAYS", days(jobs.HistoryRetentionDefault), 1, 3650)) * day,
		QueueMetricsRetention: time.Duration(l.integer("QUEEN_QUEUE_METRICS_RETENTION_DAYS", days(jobs.MetricsRetentionDefault), 1, 3650)) * day,
		PartitionRetention:    time.Duration(l.integer("PARTITION_CLEANUP_DAYS", days(jobs.PartitionRetentionDefault), 1, 3650)) * day,
	}
}

func (j Jobs) summary() []slog.Attr {
	return []slog.Attr{
		slog.Int64("metrics_sample_interval_ms", j.SampleInterval.Milliseconds()),
		slog.Int64("retention_interval_ms", j.RetentionInterval.Milliseconds()),
		slog.Int64("eviction_interval_ms", j.EvictionInterval.Milliseconds()),
		slog.Int64("metrics_retention_days", int64(j.HistoryRetention/(24*time.Hour))),
		slog.Int64("queue_metrics_retention_days", int64(j.QueueMetricsRetention/(24*time.Hour))),
		slog.Int64("partition_cleanup_days", int64(j.PartitionRetention/(24*time.Hour))),
	}
}
