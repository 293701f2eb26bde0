package pgevents

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/google/uuid"
)

// Values of an event's "type" (contract 3 in the coordination notes).
const (
	TypeReady       = "ready"        // queues have poppable messages
	TypeQueueConfig = "queue_config" // queues were configured or deleted
	TypeMaintenance = "maintenance"  // the maintenance switches changed
)

// event is one notification's payload, a compact JSON object:
//
//	{"v":1,"from":"<server id>","type":"ready","tenant":"<uuid>","queues":["a","b"]}
//
// From is absent when the sender is not a broker (the SQL API). Deleted is
// our addition to queue_config; Push and Pop belong to maintenance.
type event struct {
	V       int      `json:"v"`
	From    string   `json:"from,omitempty"`
	Type    string   `json:"type"`
	Tenant  string   `json:"tenant,omitempty"`
	Queues  []string `json:"queues,omitempty"`
	Deleted bool     `json:"deleted,omitempty"`
	Push    *bool    `json:"push,omitempty"`
	Pop     *bool    `json:"pop,omitempty"`
}

// payloadVersion is the only "v" this package reads and writes.
const payloadVersion = 1

func marshal(e event) []byte {
	b, err := json.Marshal(e)
	if err != nil {
		panic("pgevents: marshal: " + err.Error()) // strings, bools and a slice of strings
	}
	return b
}

// split encodes e with queues spread over as few payloads as fit in
// MaxPayload bytes each: a big batch becomes several notifications, never a
// truncated one. A name too long to fit even alone is left out and counted
// in skipped.
func split(e event, queues []string) (payloads [][]byte, skipped int) {
	e.Queues = nil
	base := len(marshal(e)) + len(`,"queues":[]`)
	var chunk []string
	size := base
	for _, q := range queues {
		if q == "" {
			continue
		}
		n := len(marshal(event{Type: q})) - len(`{"v":0,"type":}`) // q as JSON, escaped as in the payload
		if base+n > MaxPayload {
			skipped++
			continue
		}
		extra := n
		if len(chunk) > 0 {
			extra++ // the comma
		}
		if size+extra > MaxPayload {
			e.Queues = chunk
			payloads = append(payloads, marshal(e))
			chunk, size, extra = nil, base, n
		}
		chunk = append(chunk, q)
		size += extra
	}
	if len(chunk) > 0 {
		e.Queues = chunk
		payloads = append(payloads, marshal(e))
	}
	return payloads, skipped
}

var errMalformed = errors.New("pgevents: malformed event")

// decode parses and checks a received payload. The tenant comes back in
// canonical form, or "" when absent or not a UUID ("every tenant with these
// queue names"); empty queue names are dropped.
func decode(payload string) (event, error) {
	var e event
	if !strings.HasPrefix(payload, "{") || json.Unmarshal([]byte(payload), &e) != nil || e.V != payloadVersion {
		return event{}, errMalformed
	}
	e.Tenant = canonicalTenant(e.Tenant)
	queues := e.Queues[:0]
	for _, q := range e.Queues {
		if q != "" {
			queues = append(queues, q)
		}
	}
	e.Queues = queues
	if len(queues) == 0 {
		e.Queues = nil
	}
	switch e.Type {
	case TypeReady, TypeQueueConfig:
		if len(e.Queues) == 0 {
			return event{}, errMalformed
		}
	case TypeMaintenance:
		if e.Push == nil && e.Pop == nil {
			return event{}, errMalformed
		}
	default:
		return event{}, errMalformed
	}
	return e, nil
}

// canonicalTenant returns a UUID in its lower-case hyphenated form and
// anything else as "".
func canonicalTenant(s string) string {
	id, err := uuid.Parse(s)
	if err != nil {
		return ""
	}
	return id.String()
}
