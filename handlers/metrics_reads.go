package handlers

import (
	"bytes"
	"context"
	"net/http"
	"runtime"
	"time"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/metrics"
	"github.com/queenforgo/queen/handlers/metrics/exposition"
)

// GetMetrics answers this broker's counters since boot.
func (s *Server) GetMetrics(ctx context.Context, _ api.GetMetricsRequestObject) (api.GetMetricsResponseObject, error) {
	reg := s.metrics
	uptime := time.Since(reg.Started())
	proc := reg.Process()
	queues := reg.Queues()
	tot := metrics.Totals(queues)
	requests := proc.Of(metrics.OpPush) + proc.Of(metrics.OpPop) + proc.Of(metrics.OpAck)
	messages := tot.PushMessages + tot.PopMessages + tot.AckMessages
	rate := func(n int64) float64 {
		if uptime < time.Second {
			return 0
		}
		return float64(n) / uptime.Seconds()
	}
	var resp api.GetMetrics200JSONResponse
	resp.Uptime = int(uptime / time.Second)
	resp.Requests.Total, resp.Requests.Rate = int(requests), rate(requests)
	resp.Messages.Total, resp.Messages.Rate = int(messages), rate(messages)
	st := s.pool.Stat()
	resp.Database.PoolSize, resp.Database.IdleConnections = int(st.MaxConns()), int(st.IdleConns())
	ps := metrics.ReadProcess()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	resp.Memory.Rss, resp.Memory.HeapTotal, resp.Memory.HeapUsed = int(ps.RSSBytes), int(ms.HeapSys), int(ms.HeapAlloc)
	resp.Cpu.User, resp.Cpu.System = int(ps.CPUUserMicros), int(ps.CPUSystemMicros)
	resp.Queues = make(map[string]api.QueueCounters, len(queues))
	for _, q := range queues {
		resp.Queues[q.Queue] = api.QueueCounters{
			Pushed: int(q.PushMessages), Popped: int(q.PopMessages), Acked: int(q.AckSuccess),
			Failed: int(q.AckFail), Dlq: int(q.DeadLettered),
		}
	}
	return resp, nil
}

// prometheusResponse is the exposition with the headers the format wants.
type prometheusResponse []byte

func (r prometheusResponse) VisitGetPrometheusMetricsResponse(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", exposition.ContentType)
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(r)
	return err
}

// GetPrometheusMetrics writes every family of the exposition
// (handlers/metrics/exposition). Always 200: a family that could not be
// collected (the cluster ones while the database is down) is left out.
func (s *Server) GetPrometheusMetrics(context.Context, api.GetPrometheusMetricsRequestObject) (api.GetPrometheusMetricsResponseObject, error) {
	var buf bytes.Buffer
	if err := s.exp.Write(&buf); err != nil {
		s.log.Warn("prometheus exposition incomplete", "err", err)
	}
	return prometheusResponse(buf.Bytes()), nil
}
