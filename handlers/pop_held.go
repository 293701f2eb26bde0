package handlers

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/broker"
)

// minHeldWait is the shortest wait worth taking a connection out of
// net/http for (Config.LongPolls): a hijack, a goroutine and a hand-back
// cost more than a short wait in the handler's goroutine.
const minHeldWait = time.Second

// holdKey carries a pop's ResponseWriter and request to its strict
// handler, which sees only a context (holdLongPolls).
type holdKey struct{}

type holdable struct {
	w http.ResponseWriter
	r *http.Request
}

// holdLongPolls is the strict middleware that lets the pop handlers hold
// their request (pop): a no-op for every other operation, and for all of
// them when Config.LongPolls is nil.
func (s *Server) holdLongPolls(f api.StrictHandlerFunc, op string) api.StrictHandlerFunc {
	if s.cfg.LongPolls == nil || (op != "PopQueue" && op != "PopPartition" && op != "PopNamespaceTask") {
		return f
	}
	return func(ctx context.Context, w http.ResponseWriter, r *http.Request, req any) (any, error) {
		return f(context.WithValue(ctx, holdKey{}, holdable{w, r}), w, r, req)
	}
}

// pop runs a pop. One that must park for a while is held outside net/http
// when it can be (held: the handler then returns heldResponse, and write
// renders the answer later); otherwise it waits in this goroutine.
func (s *Server) pop(ctx context.Context, pr broker.PopRequest, write popWriter) (res *broker.PopResult, held bool, err error) {
	res, parked, err := s.b.PopStart(ctx, pr)
	if parked == nil {
		return res, false, err
	}
	if h, ok := ctx.Value(holdKey{}).(holdable); ok && parked.Timeout() >= minHeldWait {
		hp := &heldPop{s: s, p: parked, write: write, method: h.r.Method, path: h.r.URL.Path}
		if s.cfg.LongPolls.Hold(h.w, h.r, hp) {
			return nil, true, nil
		}
	}
	res, err = parked.Wait(ctx)
	return res, false, err
}

// popWriter writes a pop's answer as its route's strict handler does: the
// typed response, or the error through responseError.
type popWriter func(w http.ResponseWriter, res *broker.PopResult, err error) error

var (
	writePopQueue popWriter = func(w http.ResponseWriter, res *broker.PopResult, err error) error {
		resp, err := answerPopQueue(res, err)
		if err != nil {
			return err
		}
		return resp.VisitPopQueueResponse(w)
	}
	writePopPartition popWriter = func(w http.ResponseWriter, res *broker.PopResult, err error) error {
		resp, err := answerPopPartition(res, err)
		if err != nil {
			return err
		}
		return resp.VisitPopPartitionResponse(w)
	}
	writePopNamespaceTask popWriter = func(w http.ResponseWriter, res *broker.PopResult, err error) error {
		resp, err := answerPopNamespaceTask(res, err)
		if err != nil {
			return err
		}
		return resp.VisitPopNamespaceTaskResponse(w)
	}
)

// heldPop is a parked pop as handlers/longpoll holds it: only what the
// answer needs (not the request).
type heldPop struct {
	s            *Server
	p            *broker.ParkedPop
	write        popWriter
	method, path string
	res          *broker.PopResult
	err          error
}

func (h *heldPop) Watch(fn func()) { h.p.Watch(fn) }
func (h *heldPop) Cancel()         { h.p.Cancel() }

func (h *heldPop) Resume(ctx context.Context) bool {
	res, done, err := h.p.Resume(ctx)
	if done {
		h.res, h.err = res, err
	}
	return done
}

func (h *heldPop) Answer(w http.ResponseWriter) {
	if err := h.write(w, h.res, h.err); err != nil {
		// responseError reads the method and path for its log line.
		h.s.responseError(w, &http.Request{Method: h.method, URL: &url.URL{Path: h.path}}, err)
	}
}

// heldResponse is what a pop handler returns once its request is held: the
// answer is written later, by handlers/longpoll, so nothing is written now.
type heldResponse struct{}

func (heldResponse) VisitPopQueueResponse(http.ResponseWriter) error         { return nil }
func (heldResponse) VisitPopPartitionResponse(http.ResponseWriter) error     { return nil }
func (heldResponse) VisitPopNamespaceTaskResponse(http.ResponseWriter) error { return nil }
