package jobs

import (
	"context"
	"fmt"
	"time"
)

// StatsWatchIntervalDefault is how often a broker looks for tables whose
// statistics say far less than they hold. The look is one catalog query;
// the cost of waiting is every plan made meanwhile (see RunStatsWatch).
const StatsWatchIntervalDefault = time.Second

// RunStatsWatch re-analyzes the tables of the queen schema whose recorded
// statistics the planner would take for less than a quarter of their rows,
// and returns their names. It exists for the moment a queue system goes
// through often: every message deleted (queues deleted, retention), an
// ANALYZE of the empty tables, then a refill. Until autovacuum's next round
// (a minute apart by default) every plan made believes the tables empty and
// reads whole partitions, or every partition, where it should read a few
// rows (docs/benchmarks.md, "Round 3's consume: a plan made for an empty
// table"). One broker runs it at a time (queen.analyze_stale_tables takes a
// try-lock).
func (s *Services) RunStatsWatch(ctx context.Context) ([]string, error) {
	tables, err := s.q.AnalyzeStaleTables(ctx)
	if err != nil {
		return nil, fmt.Errorf("analyze stale tables: %w", err)
	}
	if len(tables) > 0 {
		s.log.Info("analyzed tables with stale statistics", "tables", tables)
	}
	return tables, nil
}
