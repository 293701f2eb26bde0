package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
)

// gauge is one {avg, min, max, last} leaf of a system_metrics tree while
// rows are folded together: avg weighted by samples, last from the newest.
type gauge struct {
	avg, min, max, last float64
	weight              int
	lastAt              time.Time
}

// gaugeTree is a system_metrics tree being folded: inner nodes are
// gaugeTree, leaves *gauge, anything else (shared_state flags) is kept from
// the newest row.
type gaugeTree map[string]any

// fold adds one row's tree, of weight samples, taken at at.
func (t gaugeTree) fold(src map[string]any, weight int, at time.Time) {
	for k, v := range src {
		m, isMap := v.(map[string]any)
		if !isMap {
			if prev, ok := t[k+"\x00at"].(time.Time); !ok || !at.Before(prev) {
				t[k], t[k+"\x00at"] = v, at
			}
			continue
		}
		if leaf, ok := asLeaf(m); ok {
			g, _ := t[k].(*gauge)
			if g == nil {
				g = &gauge{min: leaf.min, max: leaf.max}
				t[k] = g
			}
			if w := g.weight + weight; w > 0 {
				g.avg = (g.avg*float64(g.weight) + leaf.avg*float64(weight)) / float64(w)
			}
			g.weight += weight
			g.min, g.max = min(g.min, leaf.min), max(g.max, leaf.max)
			if !at.Before(g.lastAt) {
				g.last, g.lastAt = leaf.last, at
			}
			continue
		}
		child, _ := t[k].(gaugeTree)
		if child == nil {
			child = gaugeTree{}
			t[k] = child
		}
		child.fold(m, weight, at)
	}
}

func asLeaf(m map[string]any) (gauge, bool) {
	if len(m) != 4 {
		return gauge{}, false
	}
	var g gauge
	for k, p := range map[string]*float64{"avg": &g.avg, "min": &g.min, "max": &g.max, "last": &g.last} {
		v, ok := m[k].(float64)
		if !ok {
			return gauge{}, false
		}
		*p = v
	}
	return g, true
}

// wire renders the folded tree as the dashboard reads it.
func (t gaugeTree) wire() map[string]any {
	out := make(map[string]any, len(t))
	for k, v := range t {
		switch v := v.(type) {
		case time.Time:
		case *gauge:
			out[k] = map[string]float64{"avg": round2(v.avg), "min": v.min, "max": v.max, "last": v.last}
		case gaugeTree:
			out[k] = v.wire()
		default:
			if len(k) > 0 && k[len(k)-1] != 0 {
				out[k] = v
			}
		}
	}
	return out
}

// leaf returns the gauge at a path, if present.
func (t gaugeTree) leaf(path ...string) *gauge {
	node := t
	for i, p := range path {
		if i == len(path)-1 {
			g, _ := node[p].(*gauge)
			return g
		}
		next, ok := node[p].(gaugeTree)
		if !ok {
			return nil
		}
		node = next
	}
	return nil
}

// systemRows reads the system_metrics rows of a range.
func (s *Server) systemRows(ctx context.Context, r seriesRange, hostname string, workerID *int32) ([]db.QueenSystemMetric, error) {
	rows, err := s.aq().SystemMetricsList(ctx, db.SystemMetricsListParams{
		FromTime: r.fromTime(), ToTime: r.toTime(), Hostname: hostname, WorkerID: workerID,
	})
	if err != nil {
		return nil, fmt.Errorf("read system metrics: %w", err)
	}
	return rows, nil
}

// bucketOf is the start of the bucket t falls in.
func (r seriesRange) bucketOf(t time.Time) time.Time {
	return t.UTC().Truncate(time.Duration(r.bucketMinutes) * time.Minute)
}

// systemByBucket folds every broker's rows per bucket.
func systemByBucket(r seriesRange, rows []db.QueenSystemMetric) (map[time.Time]gaugeTree, error) {
	out := map[time.Time]gaugeTree{}
	for _, row := range rows {
		var m map[string]any
		if err := json.Unmarshal(row.Metrics, &m); err != nil {
			return nil, fmt.Errorf("decode system metrics: %w", err)
		}
		b := r.bucketOf(row.Bucket.Time)
		if out[b] == nil {
			out[b] = gaugeTree{}
		}
		out[b].fold(m, int(row.SampleCount), row.Bucket.Time)
	}
	return out, nil
}

// GetSystemMetrics answers each broker's process gauges over time.
func (s *Server) GetSystemMetrics(ctx context.Context, req api.GetSystemMetricsRequestObject) (api.GetSystemMetricsResponseObject, error) {
	p := req.Params
	r, err := newSeriesRange(p.From, p.To, time.Hour)
	if err != nil {
		return badRequest[api.GetSystemMetrics400JSONResponse](err.Error()), nil
	}
	var workerID *int32
	if w := deref(p.WorkerId, ""); w != "" {
		n, err := strconv.ParseInt(w, 10, 32)
		if err != nil {
			// A worker id that is not a number matches no broker.
			resp := api.GetSystemMetrics200JSONResponse{TimeRange: r.wire(), BucketMinutes: r.bucketMinutes}
			resp.Replicas = nonNil(resp.Replicas)
			return resp, nil
		}
		workerID = ptr(int32(n))
	}
	rows, err := s.systemRows(ctx, r, deref(p.Hostname, ""), workerID)
	if err != nil {
		return nil, err
	}
	type replicaKey struct {
		host      string
		port, pid int32
		worker    int32
	}
	resp := api.GetSystemMetrics200JSONResponse{TimeRange: r.wire(), BucketMinutes: r.bucketMinutes}
	index := map[replicaKey]int{}
	// Rows come ordered by broker, then time: fold runs of the same bucket.
	var cur gaugeTree
	var curBucket time.Time
	var curSamples int
	var curKey replicaKey
	emit := func() error {
		if cur == nil {
			return nil
		}
		raw, err := json.Marshal(cur.wire())
		if err != nil {
			return err
		}
		i := index[curKey]
		rep := &resp.Replicas[i]
		rep.TimeSeries = append(rep.TimeSeries, struct {
			Metrics     json.RawMessage `json:"metrics"`
			SampleCount int             `json:"sampleCount"`
			Timestamp   string          `json:"timestamp"`
		}{Metrics: raw, SampleCount: curSamples, Timestamp: fmtBucket(curBucket)})
		resp.PointCount++
		cur = nil
		return nil
	}
	for _, row := range rows {
		k := replicaKey{row.Hostname, row.Port, row.Pid, row.WorkerID}
		b := r.bucketOf(row.Bucket.Time)
		if cur != nil && (k != curKey || !b.Equal(curBucket)) {
			if err := emit(); err != nil {
				return nil, err
			}
		}
		if _, ok := index[k]; !ok {
			index[k] = len(resp.Replicas)
			resp.Replicas = append(resp.Replicas, struct {
				Hostname   string `json:"hostname"`
				Pid        int    `json:"pid"`
				Port       int    `json:"port"`
				TimeSeries []struct {
					Metrics     json.RawMessage `json:"metrics"`
					SampleCount int             `json:"sampleCount"`
					Timestamp   string          `json:"timestamp"`
				} `json:"timeSeries"`
				WorkerId string `json:"workerId"`
			}{Hostname: k.host, Port: int(k.port), Pid: int(k.pid), WorkerId: strconv.Itoa(int(k.worker))})
		}
		if cur == nil {
			cur, curBucket, curSamples, curKey = gaugeTree{}, b, 0, k
		}
		var m map[string]any
		if err := json.Unmarshal(row.Metrics, &m); err != nil {
			return nil, fmt.Errorf("decode system metrics: %w", err)
		}
		cur.fold(m, int(row.SampleCount), row.Bucket.Time)
		curSamples += int(row.SampleCount)
	}
	if err := emit(); err != nil {
		return nil, err
	}
	resp.ReplicaCount = len(resp.Replicas)
	resp.Replicas = nonNil(resp.Replicas)
	return resp, nil
}
