// Package mesh carries best-effort hints between brokers that share one
// PostgreSQL: "these queues have messages" (wake your parked long-polls),
// "this queue's configuration changed" (drop your cached lease time and
// encryption flag), and the two maintenance switches. PostgreSQL stays the
// only source of truth; a lost frame costs latency (the long-poll re-poll and
// the reconcile loop heal it), never data. It imports nothing of the broker:
// cmd/queen adapts between the broker's notifier and this package.
//
// # Use
//
//	m, err := mesh.New(mesh.Config{ServerID: id, BindAddr: "10.0.0.5", Port: 6633,
//		Peers: []string{"10.0.0.6:6633", "10.0.0.7:6633"}, Secret: secret, Logger: log})
//	err = m.Start(ctx, handler)      // binds; an error means "run without the mesh"
//	m.QueuesReady(tenant, queues)    // after a commit made messages poppable
//	m.QueueConfigChanged(tenant, queue, deleted)
//	m.MaintenanceChanged(push, pop)
//	stats := m.Stats()               // for /internal/api/shared-state/stats and metrics
//	err = m.Stop(ctx)                // idempotent
//
// New does no I/O. The outbound methods never block: each peer has a bounded
// queue, and a frame for a peer that is down or whose queue is full is
// dropped and counted. Handler receives what peers announce, on the
// connection's goroutine. An empty tenant in an outbound call means
// DefaultTenant; a received frame without a valid tenant reaches the handler
// with tenant "" ("every tenant with that queue name").
//
// # Topology and framing
//
// A full mesh of static peers. Each broker listens, and dials every peer;
// it sends only on connections it dialled and receives only on connections
// it accepted, so every pair has two one-way connections and no tie-break.
// A dial re-resolves the host; reconnects back off exponentially (with
// jitter) from ReconnectMin to ReconnectMax; frames queued while a peer was
// down are dropped, not replayed. A peer entry that turns out to be this
// broker (a shared peer list) is recognised in the handshake and skipped.
//
// Every frame is a u32 big-endian length (counting what follows), a u8 type
// and a JSON payload. A length of zero or over MaxFrameLen (16 MiB) closes
// the connection before anything is allocated; before authentication the
// limit is 4 KiB. Unknown types and payloads that are not JSON are ignored
// and the connection kept (rolling upgrades). The types keep the reference
// broker's numbers: MESSAGE_AVAILABLE (1, {"tenant","queues"}: coalesced,
// many queues per frame; the first after a quiet spell leaves at once, then
// at most one per Coalesce window), HEARTBEAT (3, {"server_id"}, sent when
// a connection was otherwise quiet for a Heartbeat), HELLO (4),
// QUEUE_CONFIG_SET and QUEUE_CONFIG_DELETE (10 and 11, {"tenant","queue"}),
// MAINTENANCE_MODE_SET and POP_MAINTENANCE_MODE_SET (40 and 41,
// {"enabled"}; the switches are broker-wide, so these two carry no tenant).
// CHALLENGE (100) and WELCOME (101) are the handshake's own.
//
// # Handshake and frame authentication
//
// On every accepted connection the listener sends CHALLENGE: its server id,
// a random per-process instance id, a fresh 32-byte nonce and whether it
// requires authentication. The dialer answers HELLO: its server id, its own
// fresh nonce, its HTTP address and, with a secret,
// HMAC-SHA256(secret, label ‖ version ‖ both nonces ‖ both server ids ‖
// HTTP address). The listener checks it in constant time and answers
// WELCOME, whose MAC (another label) proves to the dialer that the listener
// knows the secret too; a dialer with a secret refuses a listener that
// offers open mode, so it never talks to an impostor. Both then derive a
// session key with HKDF-SHA256 from the secret, salted with both nonces,
// and every later frame carries, between type and payload, a 64-bit
// sequence number (1, 2, 3, ...) and HMAC-SHA256(session key, sequence ‖
// type ‖ payload).
//
// So, unlike the reference (which MACs only a dialer-chosen nonce, and
// nothing after it): a HELLO recorded on one connection fails on any other
// (the listener's nonce differs); a frame cannot be forged or altered
// without the session key; and a frame sent again, on its own connection
// or another, fails the sequence or the MAC. A first frame other than
// HELLO, a malformed or unsigned HELLO, a wrong MAC (wrong secret or a
// replay), a bad frame MAC or sequence: the connection is closed without a
// reply and the refusal counted by reason (Stats.AuthFailures), with one log
// line per reason per minute. At most 64 handshakes may be in progress and
// each must finish within HandshakeTimeout.
//
// Without a secret the mesh is open: anyone who can reach the port can wake
// long-polls, drop cache entries and flip maintenance (until the broker's
// reconcile pass or the next maintenance GET restores it). Auth reports the
// mode so that the boot log can say so; the port should be reachable only
// from the other brokers in any case (docs/mesh.md). The frames are not
// encrypted: they name tenants and queues, nothing else.
//
// # Liveness and stats
//
// A peer is up while its last inbound frame is younger than DeadThreshold;
// "mesh peer up" and "mesh peer down" are logged once per change. Stats
// returns the reference's stats fields (server_id, transport, port, peers,
// servers_alive, servers_dead, messages_sent/received/dropped,
// signature_failures, handshake_failures, sequence_rejections) plus
// per-frame-type in/out/dropped counts, refusals by reason and per-server
// liveness.
package mesh
