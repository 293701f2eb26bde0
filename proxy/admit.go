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
	"github.com/queenforgo/queen/proxy/limit"
	"github.com/queenforgo/queen/proxy/reply"
)

// parkedRetry is the Retry-After of a refused parked long-poll.
const parkedRetry = 5 * time.Second

// defaultPollTimeout is the wait a pop without timeout asks for (the
// broker's DEFAULT_TIMEOUT).
const defaultPollTimeout = 30 * time.Second

// admit applies the cluster's limits (PROXY.md §5.1 step 5). It returns the
// parked-slot release of a long-poll (nil otherwise), its budget (0 for a
// plain call) and the messages a produce request pushes. A refusal is
// already written when ok is false.
func (p *Proxy) admit(w http.ResponseWriter, r *http.Request, cl *cluster, rt routes.Route) (release func(), budget time.Duration, pushed int, ok bool) {
	lim := cl.Limits
	id := cl.ID.String()
	if allowed, retry := p.cfg.Limiter.Request(id, lim); !allowed && !p.tooMany(w, cl, "requests", retry) {
		return nil, 0, 0, false
	}
	if rt.Proxy == routes.ProxyProduce {
		n, ok := p.inspectProduce(w, r, lim, rt)
		if !ok {
			return nil, 0, 0, false
		}
		if allowed, retry := p.cfg.Limiter.Messages(id, lim, n); !allowed && !p.tooMany(w, cl, "messages", retry) {
			return nil, 0, 0, false
		}
		pushed = n
	}
	budget = p.longPollBudget(r, rt)
	if budget == 0 {
		return nil, 0, pushed, true
	}
	slot, refused := p.cfg.Limiter.Park(id, cl.CellID.String(), lim, p.cfg.CellMaxParked, !p.cfg.Enforce)
	if refused != limit.ScopeNone && !p.tooMany(w, cl, "parked long-polls per "+string(refused), parkedRetry) {
		return nil, 0, 0, false
	}
	p.cfg.Metrics.Parked(1)
	var once sync.Once
	return func() { once.Do(func() { slot(); p.cfg.Metrics.Parked(-1) }) }, budget, pushed, true
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
// not parse is forwarded as it is for the broker to refuse; it counts as one
// message. n is the number of messages pushed.
func (p *Proxy) inspectProduce(w http.ResponseWriter, r *http.Request, lim limit.Limits, rt routes.Route) (n int, ok bool) {
	if r.ContentLength > p.cfg.MaxBodyBytes {
		p.deny(w, http.StatusRequestEntityTooLarge, reply.CodePayloadTooLarge, tooLargeText(p.cfg.MaxBodyBytes), false)
		return 0, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, p.cfg.MaxBodyBytes+1))
	_ = r.Body.Close()
	switch {
	case err != nil:
		p.deny(w, http.StatusBadRequest, "invalid_request", "could not read the request body", false)
		return 0, false
	case int64(len(body)) > p.cfg.MaxBodyBytes:
		p.deny(w, http.StatusRequestEntityTooLarge, reply.CodePayloadTooLarge, tooLargeText(p.cfg.MaxBodyBytes), false)
		return 0, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))

	payloads, parsed := pushedPayloads(body, rt.OperationID == "executeTransaction")
	if !parsed {
		return 1, true
	}
	maxItems := lim.MaxBatchItems
	if maxItems == 0 {
		maxItems = p.cfg.MaxBatchItems
	}
	if maxItems > 0 && int64(len(payloads)) > maxItems {
		p.deny(w, http.StatusRequestEntityTooLarge, reply.CodePayloadTooLarge,
			fmt.Sprintf("batch of %d items is over the limit of %d", len(payloads), maxItems), false)
		return 0, false
	}
	if lim.MaxPayloadBytes > 0 {
		for i, pl := range payloads {
			if int64(len(pl)) > lim.MaxPayloadBytes {
				p.deny(w, http.StatusRequestEntityTooLarge, reply.CodePayloadTooLarge,
					fmt.Sprintf("item %d: payload of %d bytes is over the limit of %d", i, len(pl), lim.MaxPayloadBytes), false)
				return 0, false
			}
		}
	}
	return len(payloads), true
}

func tooLargeText(limit int64) string {
	return fmt.Sprintf("request body is over the limit of %d bytes", limit)
}

// pushedPayloads returns the raw payload of every message a push
// ({"items": [...]}) or a transaction ({"operations": [{"type": "push",
// "items": [...]}, ...]}, where a push without items is one flat item and
// acks are skipped) would store.
func pushedPayloads(body []byte, transaction bool) ([]json.RawMessage, bool) {
	type item struct {
		Payload json.RawMessage `json:"payload"`
	}
	var doc struct {
		Items      []item `json:"items"`
		Operations []struct {
			Type    string          `json:"type"`
			Items   []item          `json:"items"`
			Payload json.RawMessage `json:"payload"`
		} `json:"operations"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return nil, false
	}
	items := doc.Items
	if transaction {
		items = nil
		for _, op := range doc.Operations {
			switch {
			case op.Type != "push":
			case len(op.Items) > 0:
				items = append(items, op.Items...)
			default:
				items = append(items, item{Payload: op.Payload})
			}
		}
	}
	out := make([]json.RawMessage, len(items))
	for i, it := range items {
		out[i] = it.Payload
	}
	return out, true
}
