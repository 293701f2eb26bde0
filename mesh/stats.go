package mesh

import (
	"slices"
	"sync/atomic"
	"time"
)

// Reasons an inbound connection is refused, the keys of Stats.AuthFailures.
const (
	RefusedTimeout    = "timeout"     // no HELLO before the handshake deadline
	RefusedNotHello   = "not_hello"   // a first frame other than HELLO
	RefusedBadHello   = "bad_hello"   // HELLO malformed or of another protocol version
	RefusedUnsigned   = "unsigned"    // HELLO without a MAC while a secret is set
	RefusedBadMAC     = "bad_mac"     // HELLO MAC wrong: wrong secret, or a replayed HELLO
	RefusedFrameMAC   = "frame_mac"   // a later frame's MAC wrong: forged or altered
	RefusedSequence   = "sequence"    // a later frame's sequence number replayed or skipped
	RefusedBusy       = "busy"        // too many handshakes in progress
	RefusedFrameError = "frame_error" // a length of zero or over the limit
)

var refusedReasons = []string{
	RefusedTimeout, RefusedNotHello, RefusedBadHello, RefusedUnsigned, RefusedBadMAC,
	RefusedFrameMAC, RefusedSequence, RefusedBusy, RefusedFrameError,
}

// Stats is a snapshot of the mesh for GET /internal/api/shared-state/stats
// (the reference's field names, plus ours) and for the Prometheus counters.
// The route adds "enabled" and the maintenance flags, which are the broker's:
// embed Stats in the answer's struct and encoding/json flattens it.
type Stats struct {
	ServerID  string `json:"server_id"`
	Transport string `json:"transport"` // always "tcp-mesh"
	Port      int    `json:"port"`      // the bound mesh port
	Auth      string `json:"auth"`      // AuthOff or AuthHMAC
	Running   bool   `json:"running"`

	PeerCount      int         `json:"peer_count"`
	PeersConnected int         `json:"peers_connected"` // outbound connections up
	Peers          []PeerStats `json:"peers"`

	// Inbound liveness, per server id announced in a HELLO.
	ServersAlive int           `json:"servers_alive"`
	ServersDead  int           `json:"servers_dead"`
	Servers      []ServerStats `json:"servers"`

	MessagesSent     uint64 `json:"messages_sent"`
	MessagesReceived uint64 `json:"messages_received"`
	MessagesDropped  uint64 `json:"messages_dropped"`
	// SignatureFailures counts MACs that did not verify (HELLO or frame).
	SignatureFailures uint64 `json:"signature_failures"`
	// HandshakeFailures counts connections refused before HELLO was accepted.
	HandshakeFailures uint64 `json:"handshake_failures"`
	// SequenceRejections counts replayed or skipped sequence numbers (always
	// 0 in the reference, which has none).
	SequenceRejections uint64            `json:"sequence_rejections"`
	AuthFailures       map[string]uint64 `json:"auth_failures"` // by Refused* reason

	Frames map[string]FrameCounts `json:"frames"` // by frame type name
}

// PeerStats is one configured peer, that is one outbound connection.
type PeerStats struct {
	Host       string  `json:"host"`
	Port       int     `json:"port"`
	Connected  bool    `json:"connected"`
	Resolved   bool    `json:"resolved"`    // the reference's name for Connected
	ResolvedIP *string `json:"resolved_ip"` // remote IP while connected
	Self       bool    `json:"self"`        // this entry is this broker: not dialled
	Dropped    uint64  `json:"messages_dropped"`
}

// ServerStats is one peer as seen from its inbound frames.
type ServerStats struct {
	ServerID      string `json:"server_id"`
	Alive         bool   `json:"alive"`
	LastSeenAgoMs int64  `json:"last_seen_ago_ms"`
	HTTPAddr      string `json:"http_addr,omitempty"`
}

// FrameCounts counts one frame type. In counts frames received and
// authenticated; Out frames written to a peer; Dropped frames discarded
// because a peer's queue was full or the peer was not connected.
type FrameCounts struct {
	In      uint64 `json:"in"`
	Out     uint64 `json:"out"`
	Dropped uint64 `json:"dropped"`
}

// counters are the mesh's lock-free counters.
type counters struct {
	in, out, dropped [256]atomic.Uint64
	refused          map[string]*atomic.Uint64 // fixed keys, read-only after newCounters
	refusedLog       map[string]*atomic.Int64  // when each reason was last logged (unix ns)
}

func newCounters() *counters {
	c := &counters{
		refused:    make(map[string]*atomic.Uint64, len(refusedReasons)),
		refusedLog: make(map[string]*atomic.Int64, len(refusedReasons)),
	}
	for _, r := range refusedReasons {
		c.refused[r] = new(atomic.Uint64)
		c.refusedLog[r] = new(atomic.Int64)
	}
	return c
}

func sum(a *[256]atomic.Uint64) uint64 {
	var n uint64
	for i := range a {
		n += a[i].Load()
	}
	return n
}

// Stats returns a snapshot. It is safe to call at any time, also before
// Start and after Stop.
func (m *Mesh) Stats() Stats {
	c := m.counters
	s := Stats{
		ServerID:  m.cfg.ServerID,
		Transport: "tcp-mesh",
		Port:      m.boundPort(),
		Auth:      m.Auth(),
		Running:   m.running.Load(),
		PeerCount: len(m.peers),
		Peers:     make([]PeerStats, 0, len(m.peers)),

		MessagesSent:       sum(&c.out),
		MessagesReceived:   sum(&c.in),
		MessagesDropped:    sum(&c.dropped),
		SequenceRejections: c.refused[RefusedSequence].Load(),
		SignatureFailures:  c.refused[RefusedBadMAC].Load() + c.refused[RefusedFrameMAC].Load(),
		AuthFailures:       make(map[string]uint64, len(refusedReasons)),
		Frames:             make(map[string]FrameCounts),
	}
	for _, r := range refusedReasons {
		n := c.refused[r].Load()
		s.AuthFailures[r] = n
		if r != RefusedFrameMAC && r != RefusedSequence {
			s.HandshakeFailures += n
		}
	}
	for i := range 256 {
		fc := FrameCounts{In: c.in[i].Load(), Out: c.out[i].Load(), Dropped: c.dropped[i].Load()}
		if fc != (FrameCounts{}) || slices.Contains(dataFrameTypes, FrameType(i)) {
			s.Frames[FrameType(i).String()] = fc
		}
	}
	for _, p := range m.peers {
		ps := p.stats()
		if ps.Connected {
			s.PeersConnected++
		}
		s.Peers = append(s.Peers, ps)
	}
	s.Servers = m.liveness.snapshot(time.Now(), m.cfg.DeadThreshold)
	for _, srv := range s.Servers {
		if srv.Alive {
			s.ServersAlive++
		} else {
			s.ServersDead++
		}
	}
	return s
}
