package handlers

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/queenforgo/queen/gen/api"
)

// GetPostgresStats answers a snapshot of PostgreSQL's statistics for the
// queen schema.
func (s *Server) GetPostgresStats(ctx context.Context, _ api.GetPostgresStatsRequestObject) (api.GetPostgresStatsResponseObject, error) {
	dbc, err := s.aq().PostgresDatabaseCache(ctx)
	if err != nil {
		return nil, fmt.Errorf("read database cache: %w", err)
	}
	tables, err := s.aq().PostgresTableCache(ctx)
	if err != nil {
		return nil, fmt.Errorf("read table cache: %w", err)
	}
	indexes, err := s.aq().PostgresIndexCache(ctx)
	if err != nil {
		return nil, fmt.Errorf("read index cache: %w", err)
	}
	activity, err := s.aq().PostgresTableActivity(ctx)
	if err != nil {
		return nil, fmt.Errorf("read table activity: %w", err)
	}
	queries, err := s.aq().PostgresActiveQueries(ctx)
	if err != nil {
		return nil, fmt.Errorf("read active queries: %w", err)
	}
	buffers, err := s.aq().PostgresSharedBuffers(ctx)
	if err != nil {
		return nil, fmt.Errorf("read shared buffers: %w", err)
	}
	sizes, err := s.aq().PostgresTableSizes(ctx)
	if err != nil {
		return nil, fmt.Errorf("read table sizes: %w", err)
	}

	resp := api.GetPostgresStats200JSONResponse{Timestamp: fmtMillis(time.Now()), Database: dbc.Database}
	resp.DatabaseCache = api.CacheRatio{
		Database: ptr(dbc.Database), DiskReads: int(dbc.DiskReads), CacheHits: int(dbc.CacheHits),
		CacheHitRatio: hitRatio(dbc.DiskReads, dbc.CacheHits),
	}
	var tr, th, ir, ih int64
	resp.TableCache = make([]api.CacheRatio, 0, len(tables))
	for _, t := range tables {
		tr, th = tr+t.DiskReads, th+t.CacheHits
		resp.TableCache = append(resp.TableCache, api.CacheRatio{
			Schema: ptr(t.SchemaName), Table: ptr(t.TableName), DiskReads: int(t.DiskReads), CacheHits: int(t.CacheHits),
			CacheHitRatio: hitRatio(t.DiskReads, t.CacheHits),
		})
	}
	resp.IndexCache = make([]api.CacheRatio, 0, len(indexes))
	for _, i := range indexes {
		ir, ih = ir+i.DiskReads, ih+i.CacheHits
		resp.IndexCache = append(resp.IndexCache, api.CacheRatio{
			Schema: ptr(i.SchemaName), Table: ptr(i.TableName), Index: ptr(i.IndexName),
			DiskReads: int(i.DiskReads), CacheHits: int(i.CacheHits), CacheHitRatio: hitRatio(i.DiskReads, i.CacheHits),
		})
	}
	resp.CacheSummary.Tables = api.CacheTotals{DiskReads: int(tr), CacheHits: int(th), HitRatio: hitRatio(tr, th)}
	resp.CacheSummary.Indexes = api.CacheTotals{DiskReads: int(ir), CacheHits: int(ih), HitRatio: hitRatio(ir, ih)}

	for _, a := range activity {
		i := len(resp.DeadTuples)
		resp.DeadTuples = slices.Grow(resp.DeadTuples, 1)[:i+1]
		d := &resp.DeadTuples[i]
		d.Schema, d.Table, d.DeadTuples, d.LiveTuples = a.SchemaName, a.TableName, int(a.DeadTuples), int(a.LiveTuples)
		if all := a.DeadTuples + a.LiveTuples; all > 0 {
			d.DeadPercentage = round2(float64(a.DeadTuples) / float64(all) * 100)
		}
		d.LastVacuum, d.LastAutovacuum = fmtTimestamptz(a.LastVacuum), fmtTimestamptz(a.LastAutovacuum)

		i = len(resp.HotUpdates)
		resp.HotUpdates = slices.Grow(resp.HotUpdates, 1)[:i+1]
		h := &resp.HotUpdates[i]
		h.Schema, h.Table, h.TotalUpdates, h.HotUpdates = a.SchemaName, a.TableName, int(a.Updates), int(a.HotUpdates)
		if a.Updates > 0 {
			h.HotUpdatePercentage = round2(float64(a.HotUpdates) / float64(a.Updates) * 100)
		}

		if a.DeadTuples > 1000 {
			i = len(resp.AutovacuumStatus)
			resp.AutovacuumStatus = slices.Grow(resp.AutovacuumStatus, 1)[:i+1]
			v := &resp.AutovacuumStatus[i]
			v.Table, v.LastAutovacuum, v.DeadTuples = a.TableName, fmtTimestamptz(a.LastAutovacuum), int(a.DeadTuples)
			v.AutovacuumCount, v.AutoanalyzeCount = int(a.AutovacuumCount), int(a.AutoanalyzeCount)
		}
	}
	resp.DeadTuples, resp.HotUpdates, resp.AutovacuumStatus = nonNil(resp.DeadTuples), nonNil(resp.HotUpdates), nonNil(resp.AutovacuumStatus)

	resp.ActiveQueries = slices.Grow(resp.ActiveQueries, len(queries))[:len(queries)]
	for i, q := range queries {
		a := &resp.ActiveQueries[i]
		a.Pid, a.State, a.Query = int(q.Pid), q.State, q.Query
		a.Duration = fmtDuration(time.Duration(q.DurationSeconds * float64(time.Second)))
		if q.WaitEventType != "" {
			a.WaitEventType = ptr(q.WaitEventType)
		}
		if q.WaitEvent != "" {
			a.WaitEvent = ptr(q.WaitEvent)
		}
	}
	resp.ActiveQueries = nonNil(resp.ActiveQueries)
	resp.BufferConfig.SharedBuffers, resp.BufferConfig.SharedBuffersSize = buffers.SharedBuffers, int(buffers.SharedBuffersBytes)
	resp.BufferUsage = []api.PostgresBufferUsage{}
	resp.TableSizes = slices.Grow(resp.TableSizes, len(sizes))[:len(sizes)]
	for i, t := range sizes {
		z := &resp.TableSizes[i]
		z.Table, z.TotalSize, z.TotalSizeBytes = t.TableName, t.TotalPretty, int(t.TotalBytes)
		z.TableSize, z.TableSizeBytes, z.IndexSize, z.IndexSizeBytes = t.TablePretty, int(t.TableBytes), t.IndexPretty, int(t.IndexBytes)
	}
	resp.TableSizes = nonNil(resp.TableSizes)
	return resp, nil
}

// hitRatio is the percentage of block reads served from cache, 2 decimals.
func hitRatio(reads, hits int64) float64 {
	if reads+hits == 0 {
		return 0
	}
	return round2(float64(hits) / float64(reads+hits) * 100)
}

// fmtDuration renders HH:MM:SS.mmm.
func fmtDuration(d time.Duration) string {
	ms := d.Milliseconds()
	return fmt.Sprintf("%02d:%02d:%02d.%03d", ms/3600000, ms/60000%60, ms/1000%60, ms%1000)
}
