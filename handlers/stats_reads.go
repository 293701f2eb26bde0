package handlers

import (
	"context"
	"fmt"
	"time"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
)

// RefreshStats writes this broker's in-memory metrics now. Every count the
// admin routes show is computed live, so that is all there is to refresh;
// the answer reports what the database holds.
func (s *Server) RefreshStats(ctx context.Context, _ api.RefreshStatsRequestObject) (api.RefreshStatsResponseObject, error) {
	var resp api.RefreshStats200JSONResponse
	if s.cfg.StatsFlushFunc != nil {
		if err := s.cfg.StatsFlushFunc(ctx); err != nil {
			return nil, fmt.Errorf("flush metrics: %w", err)
		}
		resp.System.Flushed = true
	}
	resp.System.RefreshedAt = ptr(fmtMillis(time.Now()))
	// Cell-wide: the queues and partitions of every tenant (a NULL tenant).
	queues, err := s.aq().QueueListPage(ctx, db.QueueListPageParams{})
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	partitions, err := s.aq().PartitionCountFiltered(ctx, db.PartitionCountFilteredParams{})
	if err != nil {
		return nil, fmt.Errorf("count partitions: %w", err)
	}
	namespaces, tasks := map[string]bool{}, map[string]bool{}
	for _, q := range queues {
		if q.Namespace != "" {
			namespaces[q.Namespace] = true
		}
		if q.Task != "" {
			tasks[q.Task] = true
		}
	}
	resp.Queue.QueuesUpdated, resp.Partition.Partitions = len(queues), int(partitions)
	resp.Namespace.Namespaces, resp.Task.Tasks = len(namespaces), len(tasks)
	resp.Cleanup = map[string]any{}
	return resp, nil
}
