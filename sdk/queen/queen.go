// Package queen is the Go SDK of the broker: the client generated from
// openapi/openapi.yaml (package gen/client, every route with typed requests
// and responses) plus the few helpers where calling it by hand is awkward:
// Push (payloads as Go values, an error for any answer but 201) and Consume
// (long-poll pop → handler → ack, with lease renewal while the handler runs).
//
//	c, err := queen.New("http://localhost:6632")
//	_, err = c.Push(ctx, queen.Message{Queue: "orders", Payload: order})
//	err = c.Consume(ctx, queen.ConsumerConfig{Queue: "orders"}, handle)
//
// Everything else goes through c.API(), the generated client.
package queen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/queenforgo/queen/gen/client"
)

// Client is a broker client: the generated one and the helpers of this package.
type Client struct {
	api *client.ClientWithResponses
}

// New returns a client of the broker at baseURL (e.g. http://localhost:6632).
// Options are the generated client's (client.WithHTTPClient,
// client.WithRequestEditorFn), WithToken and WithTenant.
//
// The default HTTP client has no overall timeout, since long-poll pops wait
// on the server; every call is bounded by its context instead.
func New(baseURL string, opts ...client.ClientOption) (*Client, error) {
	api, err := client.NewClientWithResponses(strings.TrimRight(baseURL, "/"), opts...)
	if err != nil {
		return nil, fmt.Errorf("new queen client: %w", err)
	}
	return &Client{api: api}, nil
}

// WithToken sends token as a bearer token on every request (brokers with
// JWT_ENABLED=true, or behind queen-proxy).
func WithToken(token string) client.ClientOption {
	return client.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	})
}

// WithTenant sends tenant as x-queen-tenant on every request: the tenant a
// broker with QUEEN_TENANCY_HEADER=true scopes the client's queues to
// (docs/tenancy.md). Behind queen-proxy, or with a token whose tenant claim
// decides, the header is not needed.
func WithTenant(tenant string) client.ClientOption {
	return client.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("x-queen-tenant", tenant)
		return nil
	})
}

// API is the generated client, for every route the helpers do not cover.
func (c *Client) API() *client.ClientWithResponses { return c.api }

// APIError is an answer with an unexpected status.
type APIError struct {
	Op      string // the operationId
	Status  int
	Message string // the body's "error", or the body itself
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s: HTTP %d: %s", e.Op, e.Status, e.Message)
}

// apiError builds the error of an answer whose status was not the expected
// one. It reads the body itself rather than the generated JSON4xx fields, so
// it works for every status whether or not the spec declares it.
func apiError(op string, status int, body []byte) error {
	var e struct {
		Error string `json:"error"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		msg = e.Error
	}
	if len(msg) > 500 {
		msg = msg[:500] + "…"
	}
	return &APIError{Op: op, Status: status, Message: msg}
}

// Message is one message to push.
type Message struct {
	Queue     string
	Partition string // "" is the partition "Default"
	// TransactionID is the dedup key inside the partition: a repeat answers
	// "duplicate". "" lets the broker generate one.
	TransactionID string
	TraceID       string // a UUID, or ""
	// Payload is encoded with encoding/json; a json.RawMessage or []byte
	// holding JSON is sent as is.
	Payload any
}

// ErrPushFailed is wrapped by Push when an item answered "failed".
var ErrPushFailed = errors.New("push failed")

// Push pushes messages in one request and returns one result per message,
// in order. Statuses "queued", "duplicate" and "buffered" (written to the
// broker's disk spool) are success; items that answered "failed" are
// reported in an error wrapping ErrPushFailed, with every result returned.
func (c *Client) Push(ctx context.Context, msgs ...Message) ([]client.PushResult, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	items := make([]client.PushItem, len(msgs))
	for i, m := range msgs {
		payload, err := encodePayload(m.Payload)
		if err != nil {
			return nil, fmt.Errorf("push: payload of message %d: %w", i, err)
		}
		items[i] = client.PushItem{Queue: m.Queue, Payload: &payload}
		if m.Partition != "" {
			items[i].Partition = &msgs[i].Partition
		}
		if m.TransactionID != "" {
			items[i].TransactionId = &msgs[i].TransactionID
		}
		if m.TraceID != "" {
			items[i].TraceId = &msgs[i].TraceID
		}
	}
	resp, err := c.api.PushMessagesWithResponse(ctx, nil, client.PushRequest{Items: items})
	if err != nil {
		return nil, fmt.Errorf("push: %w", err)
	}
	if resp.JSON201 == nil {
		return nil, apiError("pushMessages", resp.StatusCode(), resp.Body)
	}
	results := *resp.JSON201
	var failed []string
	for _, r := range results {
		if r.Status == "failed" {
			reason := "no reason given"
			if r.Error != nil {
				reason = *r.Error
			}
			failed = append(failed, fmt.Sprintf("item %d: %s", r.Index, reason))
		}
	}
	if failed != nil {
		return results, fmt.Errorf("%w: %s", ErrPushFailed, strings.Join(failed, "; "))
	}
	return results, nil
}

func encodePayload(v any) (json.RawMessage, error) {
	switch p := v.(type) {
	case json.RawMessage:
		if !json.Valid(p) {
			return nil, errors.New("not valid JSON")
		}
		return p, nil
	case []byte:
		if !json.Valid(p) {
			return nil, errors.New("not valid JSON")
		}
		return p, nil
	}
	return json.Marshal(v)
}
