package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/queenforgo/queen/gen/routes"
	"github.com/queenforgo/queen/proxy/inventory"
	"github.com/queenforgo/queen/proxy/limit"
	"github.com/queenforgo/queen/proxy/reply"
)

// parkedRetry is the Retry-After of a refused parked long-poll.
const parkedRetry = 5 * time.Second

// defaultPollTimeout is the wait a pop without timeout asks for (the
// broker's DEFAULT_TIMEOUT).
const defaultPollTimeout = 30 * time.Second

// admission is what admit let through: the parked-slot release of a
// long-poll (nil otherwise), its budget (0 for a plain call), the messages a
// produce request pushes, and undo, which forgets the queues and partitions
// the request was admitted for (called when the broker does not accept it).
type admission struct {
	release func()
	budget  time.Duration
	pushed  int
	undo    func()
}

// admit applies the cluster's limits (PROXY.md §5.1 step 5). A refusal is
// already written when ok is false.
func (p *Proxy) admit(w http.ResponseWriter, r *http.Request, cl *cluster, rt routes.Route) (a admission, ok bool) {
	lim := cl.Limits
	id := cl.ID.String()
	a.undo = func() {}
	if allowed, retry := p.cfg.Limiter.Request(id, lim); !allowed && !p.tooMany(w, cl, "requests", retry) {
		return a, false
	}
	switch {
	case rt.Proxy == routes.ProxyProduce:
		items, n, ok := p.inspectProduce(w, r, lim, rt)
		if !ok {
			return a, false
		}
		if a.undo, ok = p.admitQueues(w, cl, pairsOf(items)); !ok {
			return a, false
		}
		if allowed, retry := p.cfg.Limiter.Messages(id, lim, n); !allowed && !p.tooMany(w, cl, "messages", retry) {
			a.undo()
			return a, false
		}
		a.pushed = n
	case rt.OperationID == "configureQueue":
		if a.undo, ok = p.inspectConfigure(w, r, cl); !ok {
			return a, false
		}
	}
	a.budget = p.longPollBudget(r, rt)
	if a.budget == 0 {
		return a, true
	}
	slot, refused := p.cfg.Limiter.Park(id, cl.CellID.String(), lim, p.cfg.CellMaxParked, !p.cfg.Enforce)
	if refused != limit.ScopeNone && !p.tooMany(w, cl, "parked long-polls per "+string(refused), parkedRetry) {
		return a, false
	}
	p.cfg.Metrics.Parked(1)
	var once sync.Once
	a.release = func() { once.Do(func() { slot(); p.cfg.Metrics.Parked(-1) }) }
	return a, true
}

// longPollBudget is the wait of a long-poll pop (query wait=true): the
// client's timeout (30 s without one) clamped to QUEEN_PROXY_LONGPOLL_MAX_MS,
// plus QUEEN_PROXY_LONGPOLL_MARGIN_MS. 0 for anything else.
func (p *Proxy) longPollBudget(r *http.Request, rt routes.Route) time.Duration {
	if rt.Proxy != routes.ProxyConsume || r.Method != http.MethodGet {
		return 0
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil || q.Get("wait") != "true" {
		return 0
	}
	wait := defaultPollTimeout
	if ms, err := strconv.ParseInt(q.Get("timeout"), 10, 64); err == nil && ms >= 0 {
		wait = time.Duration(min(ms, int64(p.cfg.LongPollMax/time.Millisecond))) * time.Millisecond
	}
	return min(wait, p.cfg.LongPollMax) + p.cfg.LongPollMargin
}

// inspectProduce buffers a push or transaction body (at most
// QUEEN_PROXY_MAX_BODY_BYTES) and checks its items against the batch and
// payload caps. These caps are enforced in shadow mode too. A body that does
// not parse is forwarded as it is for the broker to refuse: it has no
// items and counts as one message. n is the number of messages pushed.
func (p *Proxy) inspectProduce(w http.ResponseWriter, r *http.Request, lim limit.Limits, rt routes.Route) (items []pushedItem, n int, ok bool) {
	body, ok := p.buffer(w, r)
	if !ok {
		return nil, 0, false
	}
	items, parsed := pushedItems(body, rt.OperationID == "executeTransaction")
	if !parsed {
		return nil, 1, true
	}
	maxItems := lim.MaxBatchItems
	if maxItems == 0 {
		maxItems = p.cfg.MaxBatchItems
	}
	if maxItems > 0 && int64(len(items)) > maxItems {
		p.deny(w, http.StatusRequestEntityTooLarge, reply.CodePayloadTooLarge,
			fmt.Sprintf("batch of %d items is over the limit of %d", len(items), maxItems), false)
		return nil, 0, false
	}
	if lim.MaxPayloadBytes > 0 {
		for i, it := range items {
			if int64(len(it.Payload)) > lim.MaxPayloadBytes {
				p.deny(w, http.StatusRequestEntityTooLarge, reply.CodePayloadTooLarge,
					fmt.Sprintf("item %d: payload of %d bytes is over the limit of %d", i, len(it.Payload), lim.MaxPayloadBytes), false)
				return nil, 0, false
			}
		}
	}
	return items, len(items), true
}

// buffer reads the request body whole (at most QUEEN_PROXY_MAX_BODY_BYTES,
// 413 over it) and puts the bytes back for the forwarder.
func (p *Proxy) buffer(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.ContentLength > p.cfg.MaxBodyBytes {
		p.deny(w, http.StatusRequestEntityTooLarge, reply.CodePayloadTooLarge, tooLargeText(p.cfg.MaxBodyBytes), false)
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, p.cfg.MaxBodyBytes+1))
	_ = r.Body.Close()
	switch {
	case err != nil:
		p.deny(w, http.StatusBadRequest, reply.CodeInvalidRequest, "could not read the request body", false)
		return nil, false
	case int64(len(body)) > p.cfg.MaxBodyBytes:
		p.deny(w, http.StatusRequestEntityTooLarge, reply.CodePayloadTooLarge, tooLargeText(p.cfg.MaxBodyBytes), false)
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return body, true
}

func tooLargeText(limit int64) string {
	return fmt.Sprintf("request body is over the limit of %d bytes", limit)
}

// pushedItem is one message a push or transaction would store.
type pushedItem struct {
	Queue     string          `json:"queue"`
	Partition string          `json:"partition"`
	Payload   json.RawMessage `json:"payload"`
}

// pushedItems returns every message a push ({"items": [...]}) or a
// transaction ({"operations": [{"type": "push", "items": [...]}, ...]},
// where a push without items is one flat item and acks are skipped) would
// store.
func pushedItems(body []byte, transaction bool) ([]pushedItem, bool) {
	var doc struct {
		Items      []pushedItem `json:"items"`
		Operations []struct {
			Type  string       `json:"type"`
			Items []pushedItem `json:"items"`
			pushedItem
		} `json:"operations"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return nil, false
	}
	if !transaction {
		return doc.Items, true
	}
	var items []pushedItem
	for _, op := range doc.Operations {
		switch {
		case op.Type != "push":
		case len(op.Items) > 0:
			items = append(items, op.Items...)
		default:
			items = append(items, op.pushedItem)
		}
	}
	return items, true
}

// pairsOf is the distinct (queue, partition) pairs of items, in order; an
// absent or empty partition is Default.
func pairsOf(items []pushedItem) []inventory.Pair {
	seen := make(map[inventory.Pair]bool, len(items))
	var pairs []inventory.Pair
	for _, it := range items {
		pr := inventory.Pair{Queue: it.Queue, Partition: it.Partition}
		if pr.Partition == "" {
			pr.Partition = inventory.DefaultPartition
		}
		if !seen[pr] {
			seen[pr] = true
			pairs = append(pairs, pr)
		}
	}
	return pairs
}
