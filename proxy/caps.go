package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/queenforgo/queen/gen/routes"
	"github.com/queenforgo/queen/proxy/inventory"
	"github.com/queenforgo/queen/proxy/reply"
)

// admitQueues applies the queue and partition caps to the (queue,
// partition) pairs a request writes to (PROXY.md §5.1 step 5): over a cap
// is 403 quota_exceeded, or in shadow mode a would_block line and the
// request goes on. undo forgets the pairs again; it is nil when ok is false.
func (p *Proxy) admitQueues(w http.ResponseWriter, cl *cluster, pairs []inventory.Pair) (undo func(), ok bool) {
	refusal, undo := p.cfg.Inventory.Admit(cl.ID, cl.Limits, pairs, !p.cfg.Enforce)
	return undo, refusal == "" || p.overQuota(w, cl, refusal)
}

// overQuota is the 403 of a queue, partition or retention limit, or its
// shadow; it reports whether the request goes on.
func (p *Proxy) overQuota(w http.ResponseWriter, cl *cluster, why string) bool {
	if !p.cfg.Enforce {
		p.cfg.Metrics.Denial(reply.CodeQuotaExceeded, true)
		p.cfg.Logger.Info("would_block", "cluster", cl.Slug, "limit", why)
		return true
	}
	p.deny(w, http.StatusForbidden, reply.CodeQuotaExceeded, why, false)
	return false
}

// inspectConfigure buffers a configure body, refuses a retention above the
// cluster's max_retention_seconds (never clamped: the broker would store
// something else than what was asked), then admits the queue with its
// Default partition, which configure creates. A body that does not parse is
// forwarded for the broker to refuse.
func (p *Proxy) inspectConfigure(w http.ResponseWriter, r *http.Request, cl *cluster) (undo func(), ok bool) {
	body, ok := p.buffer(w, r)
	if !ok {
		return nil, false
	}
	var doc struct {
		Queue   string                     `json:"queue"`
		Options map[string]json.RawMessage `json:"options"`
	}
	if json.Unmarshal(body, &doc) != nil || doc.Queue == "" {
		return func() {}, true
	}
	if ceiling := cl.Limits.MaxRetentionSeconds; ceiling > 0 {
		for _, name := range []string{"retentionSeconds", "completedRetentionSeconds"} {
			// Read as a float so that a number too large for an integer is
			// still seen as too large.
			v, err := strconv.ParseFloat(string(doc.Options[name]), 64)
			if err != nil || v <= float64(ceiling) {
				continue
			}
			why := fmt.Sprintf("%s %s is over the plan's retention ceiling of %d seconds", name, doc.Options[name], ceiling)
			if !p.overQuota(w, cl, why) {
				return nil, false
			}
		}
	}
	return p.admitQueues(w, cl, []inventory.Pair{{Queue: doc.Queue, Partition: inventory.DefaultPartition}})
}

// forgetDeleted frees the places of a queue deleted, or of partitions
// cleared, through this proxy as soon as the broker has done it, so that a
// cluster at its cap may create another at once.
func (p *Proxy) forgetDeleted(cl *cluster, rt routes.Route, r *http.Request, rawPath string) {
	if rt.OperationID != "deleteQueue" && rt.OperationID != "clearQueue" {
		return
	}
	queue, ok := pathParam(rt.Path, rawPath, "{queue}")
	if !ok {
		return
	}
	if rt.OperationID == "deleteQueue" {
		p.cfg.Inventory.Forget(cl.ID, queue, "", false)
		return
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return
	}
	partition := q.Get("partition")
	p.cfg.Inventory.Forget(cl.ID, queue, partition, partition == "")
}

// pathParam is the unescaped value of the segment of rawPath that the
// route's template names param.
func pathParam(template, rawPath, param string) (string, bool) {
	tsegs, psegs := strings.Split(template, "/"), strings.Split(rawPath, "/")
	if len(tsegs) != len(psegs) {
		return "", false
	}
	for i, seg := range tsegs {
		if seg == param {
			v, err := url.PathUnescape(psegs[i])
			return v, err == nil
		}
	}
	return "", false
}
