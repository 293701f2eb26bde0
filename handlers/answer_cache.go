package handlers

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/aggcache"
)

// The read routes the dashboard polls that aggregate over every partition or
// cursor of a tenant go through the answer cache (Config.AnswerCache,
// handlers/aggcache): an answer that cost 50 ms or more to compute is served
// to the next polls while one recomputation runs behind them, so on a large
// database a poll shows what the previous poll's recomputation found (at
// most 30 s old) instead of waiting seconds for it. Cheaper answers, every
// answer on a small database, are always live. docs/observability.md says
// which routes and how stale.

// answerChanging are the operations after which the answer cache is
// cleared: admin changes to what the aggregates count. The dashboard
// refreshes its page after each of them and must see the change; the data
// plane's pushes, pops and acks do not clear it (that is what the cache is
// for).
var answerChanging = map[string]bool{
	"ConfigureQueue": true, "DeleteQueue": true, "ClearQueue": true,
	"DeleteConsumerGroup": true, "UpdateConsumerGroupSubscription": true, "DeleteConsumerGroupForQueue": true,
	"SeekConsumerGroup": true, "SeekConsumerGroupPartition": true,
	"PurgeDeadLetters": true, "ReplayDeadLetter": true,
	"DeleteMessage": true, "RetryMessage": true, "MoveMessageToDLQ": true,
	"RefreshStats": true,
}

// clearAnswersAfter is the strict middleware that clears the answer cache
// once one of answerChanging has run, whatever it answered.
func (s *Server) clearAnswersAfter(f api.StrictHandlerFunc, operationID string) api.StrictHandlerFunc {
	if !answerChanging[operationID] {
		return f
	}
	return func(ctx context.Context, w http.ResponseWriter, r *http.Request, request any) (any, error) {
		defer s.cfg.AnswerCache.Clear()
		return f(ctx, w, r, request)
	}
}

// cachedAnswer serves one route through the answer cache under the
// request's tenant and key (the route and its arguments).
func cachedAnswer[T any](s *Server, ctx context.Context, key string, fn func(context.Context) (T, error)) (T, error) {
	return aggcache.Get(s.cfg.AnswerCache, ctx, tenantID(ctx).String()+" "+key, fn)
}

// windowKey names a from/to window in a cache key. A window that ends about
// now (no `to`, or a `to` within a minute of the clock: the dashboard's
// "last N minutes") is named by its length, so that successive polls share
// an answer; any other window by its bounds as given.
func windowKey(from, to *string) string {
	f, ferr := parseTimestampParam("from", from)
	t, terr := parseTimestampParam("to", to)
	if ferr != nil || terr != nil {
		return fmt.Sprintf("from=%q to=%q", deref(from, ""), deref(to, ""))
	}
	end := time.Now()
	if t != nil {
		if d := end.Sub(*t); d > time.Minute || d < -time.Minute {
			return fmt.Sprintf("from=%q to=%q", deref(from, ""), deref(to, ""))
		}
		end = *t
	}
	if f == nil {
		return "last default"
	}
	return "last " + end.Sub(*f).Round(time.Second).String()
}

// cachedPageRows is the largest page the cache keeps: the dashboard's pages
// (1,000 partitions) are kept, larger ones (up to 10,000, what scripts ask
// for) are computed for their request, so a script paging through a large
// queue does not fill the memory with pages nobody asks for twice.
const cachedPageRows = 1000

// optKey renders an optional parameter for a cache key.
func optKey[T any](p *T) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%q", fmt.Sprint(*p))
}

func (s *Server) GetOverview(ctx context.Context, req api.GetOverviewRequestObject) (api.GetOverviewResponseObject, error) {
	return s.cachedOverview(ctx, req)
}

func (s *Server) cachedOverview(ctx context.Context, req api.GetOverviewRequestObject) (api.GetOverviewResponseObject, error) {
	return cachedAnswer(s, ctx, "overview", func(ctx context.Context) (api.GetOverviewResponseObject, error) {
		return s.getOverview(ctx, req)
	})
}

func (s *Server) ListQueues(ctx context.Context, req api.ListQueuesRequestObject) (api.ListQueuesResponseObject, error) {
	p := req.Params
	key := "queues " + optKey(p.Namespace) + " " + optKey(p.Task) + " " + optKey(p.Limit) + " " + optKey(p.Offset)
	return cachedAnswer(s, ctx, key, func(ctx context.Context) (api.ListQueuesResponseObject, error) {
		return s.listQueues(ctx, req)
	})
}

func (s *Server) GetQueue(ctx context.Context, req api.GetQueueRequestObject) (api.GetQueueResponseObject, error) {
	p := req.Params
	if deref(p.Limit, 0) > cachedPageRows {
		return s.getQueue(ctx, req)
	}
	key := fmt.Sprintf("queue %q %s %s", req.Queue, optKey(p.Limit), optKey(p.Offset))
	return cachedAnswer(s, ctx, key, func(ctx context.Context) (api.GetQueueResponseObject, error) {
		return s.getQueue(ctx, req)
	})
}

func (s *Server) ListPartitions(ctx context.Context, req api.ListPartitionsRequestObject) (api.ListPartitionsResponseObject, error) {
	p := req.Params
	if deref(p.Limit, 0) > cachedPageRows {
		return s.listPartitions(ctx, req)
	}
	key := "partitions " + optKey(p.Queue) + " " + optKey(p.Limit) + " " + optKey(p.Offset)
	return cachedAnswer(s, ctx, key, func(ctx context.Context) (api.ListPartitionsResponseObject, error) {
		return s.listPartitions(ctx, req)
	})
}

func (s *Server) ListConsumerGroups(ctx context.Context, req api.ListConsumerGroupsRequestObject) (api.ListConsumerGroupsResponseObject, error) {
	return cachedAnswer(s, ctx, "consumer-groups", func(ctx context.Context) (api.ListConsumerGroupsResponseObject, error) {
		return s.listConsumerGroups(ctx, req)
	})
}

func (s *Server) ListLaggingPartitions(ctx context.Context, req api.ListLaggingPartitionsRequestObject) (api.ListLaggingPartitionsResponseObject, error) {
	key := "lagging " + optKey(req.Params.MinLagSeconds) + " " + optKey(req.Params.Limit)
	return cachedAnswer(s, ctx, key, func(ctx context.Context) (api.ListLaggingPartitionsResponseObject, error) {
		resp, err := s.listLaggingPartitions(ctx, req)
		// A low threshold on a large backlog lists every partition of
		// every group (hundreds of thousands of rows): answered, not kept.
		if rows, ok := resp.(api.ListLaggingPartitions200JSONResponse); ok && err == nil && len(rows) > cachedPageRows {
			return resp, aggcache.ErrDontKeep
		}
		return resp, err
	})
}

func (s *Server) GetStatus(ctx context.Context, req api.GetStatusRequestObject) (api.GetStatusResponseObject, error) {
	p := req.Params
	key := "status " + windowKey(p.From, p.To) + " " + optKey(p.Queue) + " " + optKey(p.Namespace) + " " + optKey(p.Task)
	return cachedAnswer(s, ctx, key, func(ctx context.Context) (api.GetStatusResponseObject, error) {
		return s.getStatus(ctx, req)
	})
}

func (s *Server) GetWorkerMetrics(ctx context.Context, req api.GetWorkerMetricsRequestObject) (api.GetWorkerMetricsResponseObject, error) {
	p := req.Params
	key := "worker-metrics " + windowKey(p.From, p.To) + " " + optKey(p.Hostname) + " " + optKey(p.WorkerId)
	return cachedAnswer(s, ctx, key, func(ctx context.Context) (api.GetWorkerMetricsResponseObject, error) {
		return s.getWorkerMetrics(ctx, req)
	})
}

func (s *Server) GetQueueOps(ctx context.Context, req api.GetQueueOpsRequestObject) (api.GetQueueOpsResponseObject, error) {
	p := req.Params
	key := "queue-ops " + windowKey(p.From, p.To) + " " + optKey(p.Queue)
	return cachedAnswer(s, ctx, key, func(ctx context.Context) (api.GetQueueOpsResponseObject, error) {
		return s.getQueueOps(ctx, req)
	})
}
