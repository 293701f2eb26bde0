package mesh

import (
	"encoding/json"
	"strings"
)

// DefaultTenant is the tenant of a broker without tenancy. An outbound call
// with an empty tenant announces it.
const DefaultTenant = "00000000-0000-0000-0000-000000000001"

type readyMsg struct {
	Tenant string   `json:"tenant"`
	Queues []string `json:"queues"`
}

type queueConfigMsg struct {
	Tenant string `json:"tenant"`
	Queue  string `json:"queue"`
}

// maintenanceMsg is the payload of both maintenance frames. The switches are
// broker-wide (cell-wide, not per tenant), so it carries no tenant.
type maintenanceMsg struct {
	Enabled bool `json:"enabled"`
}

type heartbeatMsg struct {
	ServerID string `json:"server_id"`
}

// inboundTenant is the tenant a received frame targets: the frame's tenant
// in canonical (lower-case) form, or "" when it is absent or not a UUID,
// which the handler reads as "every tenant that has this queue name" (a
// safe over-wake, never a guess at the default tenant).
func inboundTenant(s string) string {
	if !isUUID(s) {
		return ""
	}
	return strings.ToLower(s)
}

// outboundTenant is the tenant an outbound frame carries.
func outboundTenant(s string) string {
	if s == "" {
		return DefaultTenant
	}
	return s
}

// isUUID reports whether s has the 8-4-4-4-12 hex form of a UUID.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !hexByte(c) {
				return false
			}
		}
	}
	return true
}

// mustJSON marshals the payload types above, which cannot fail.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("mesh: marshal " + err.Error())
	}
	return b
}

// readyChunk is the most queue-name bytes one MESSAGE_AVAILABLE frame
// carries; a bigger batch goes out as several frames, far below MaxFrameLen
// even if every byte needs escaping.
const readyChunk = 256 << 10

// readyFrames splits one tenant's ready queues into MESSAGE_AVAILABLE
// payloads.
func readyFrames(tenant string, queues []string) [][]byte {
	var out [][]byte
	var chunk []string
	size := 0
	for _, q := range queues {
		if size > 0 && size+len(q)+3 > readyChunk {
			out = append(out, mustJSON(readyMsg{Tenant: tenant, Queues: chunk}))
			chunk, size = nil, 0
		}
		chunk = append(chunk, q)
		size += len(q) + 3 // quotes and comma
	}
	if len(chunk) > 0 {
		out = append(out, mustJSON(readyMsg{Tenant: tenant, Queues: chunk}))
	}
	return out
}

// dispatch decodes one authenticated frame and calls the handler. A payload
// that is not valid JSON is ignored and the connection kept, as is an
// unknown type (a newer peer during a rolling upgrade).
func dispatch(h Handler, t FrameType, payload []byte) {
	switch t {
	case FrameMessageAvailable:
		var m readyMsg
		if json.Unmarshal(payload, &m) != nil {
			return
		}
		queues := m.Queues[:0]
		for _, q := range m.Queues {
			if q != "" {
				queues = append(queues, q)
			}
		}
		if len(queues) > 0 {
			h.QueuesReady(inboundTenant(m.Tenant), queues)
		}
	case FrameQueueConfigSet, FrameQueueConfigDelete:
		var m queueConfigMsg
		if json.Unmarshal(payload, &m) != nil || m.Queue == "" {
			return
		}
		h.QueueConfigChanged(inboundTenant(m.Tenant), m.Queue, t == FrameQueueConfigDelete)
	case FrameMaintenance, FramePopMaintenance:
		var m maintenanceMsg // a missing "enabled" means false, as in the reference
		if json.Unmarshal(payload, &m) != nil {
			return
		}
		if t == FrameMaintenance {
			h.PushMaintenanceChanged(m.Enabled)
		} else {
			h.PopMaintenanceChanged(m.Enabled)
		}
	}
}

func hexByte(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
