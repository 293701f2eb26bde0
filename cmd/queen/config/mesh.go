package config

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/queenforgo/queen/handlers/broker"
	"github.com/queenforgo/queen/mesh"
)

// Mesh holds the broker-to-broker sync settings (SECURITY-REQUIREMENTS
// §8.1, docs/mesh.md). The mesh runs only when Active.
type Mesh struct {
	Enabled bool // QUEEN_SYNC_ENABLED
	// Peers is QUEEN_MESH_PEERS (legacy QUEEN_UDP_PEERS) as host:port
	// entries: scheme and trailing slash stripped, a bare host given Port,
	// duplicates dropped.
	Peers         []string
	Port          int           // QUEEN_MESH_PORT (legacy QUEEN_UDP_NOTIFY_PORT): listened on and dialled
	BindAddr      netip.Addr    // QUEEN_MESH_BIND_ADDR; unset means the resolved QUEEN_BIND_ADDR
	AdvertiseHost string        // QUEEN_MESH_ADVERTISE_HOST; empty means the OS host name (resolved by the mesh)
	Secret        string        // QUEEN_SYNC_SECRET (secret), trimmed; empty means open mode
	Heartbeat     time.Duration // QUEEN_SYNC_HEARTBEAT_MS
	DeadThreshold time.Duration // QUEEN_SYNC_DEAD_THRESHOLD_MS; at least twice Heartbeat
	// CacheRefresh is QUEEN_CACHE_REFRESH_INTERVAL_MS, the reconcile period
	// (MESH-7): every broker re-reads the maintenance switches this often
	// and serves a cached queue row (lease time, encryption flag, options)
	// at most this long, so that a lost announcement heals by itself. The
	// reference's default is 60 s; ours is the broker's 5 s.
	CacheRefresh time.Duration
	// ServerID is QUEEN_SERVER_ID: this broker's identity on the mesh and
	// in NOTIFY events. Empty means main picks one (it must be unique per
	// broker on a database).
	ServerID string
}

// Defaults and limits of Mesh.
const (
	MeshPortDefault          = mesh.PortDefault
	MeshHeartbeatDefault     = mesh.HeartbeatDefault
	MeshDeadThresholdDefault = mesh.DeadThresholdDefault
	// MeshSecretMinBytes: the secret keys HMAC-SHA256; anything shorter
	// than 32 bytes is guessable offline from one recorded handshake.
	MeshSecretMinBytes = 32
	meshServerIDMaxLen = 128
	// MeshCacheRefreshDefault: the broker's own refresh periods, which
	// are equal (one variable sets both).
	MeshCacheRefreshDefault = broker.MaintenanceRefreshDefault
	meshCacheRefreshMinMs   = 100
)

// MeshDefault is Mesh with every variable unset (and QUEEN_BIND_ADDR unset).
func MeshDefault() Mesh {
	return Mesh{
		Enabled:       true,
		Peers:         []string{},
		Port:          MeshPortDefault,
		BindAddr:      netip.MustParseAddr(BindAddrDefault),
		Heartbeat:     MeshHeartbeatDefault,
		DeadThreshold: MeshDeadThresholdDefault,
		CacheRefresh:  MeshCacheRefreshDefault,
	}
}

// Active reports whether the mesh runs: enabled and with at least one peer.
func (m Mesh) Active() bool { return m.Enabled && len(m.Peers) > 0 }

// Auth is mesh.AuthHMAC with a secret and mesh.AuthOff without.
func (m Mesh) Auth() string {
	if m.Secret == "" {
		return mesh.AuthOff
	}
	return mesh.AuthHMAC
}

// ListenAddr is the mesh listener's address (an IPv6 host bracketed).
func (m Mesh) ListenAddr() string {
	return net.JoinHostPort(m.BindAddr.String(), strconv.Itoa(m.Port))
}

func (l *loader) mesh(httpBind netip.Addr) Mesh {
	m := Mesh{
		Enabled:       l.boolean("QUEEN_SYNC_ENABLED", true),
		Port:          l.port(l.alias("QUEEN_MESH_PORT", "QUEEN_UDP_NOTIFY_PORT"), MeshPortDefault),
		BindAddr:      l.hostAddr("QUEEN_MESH_BIND_ADDR", "QUEEN_MESH_PORT", httpBind),
		AdvertiseHost: l.advertiseHost("QUEEN_MESH_ADVERTISE_HOST"),
		Secret:        l.syncSecret("QUEEN_SYNC_SECRET"),
		Heartbeat:     l.millis("QUEEN_SYNC_HEARTBEAT_MS", MeshHeartbeatDefault, 1),
		DeadThreshold: l.millis("QUEEN_SYNC_DEAD_THRESHOLD_MS", MeshDeadThresholdDefault, 1),
		ServerID:      l.serverID("QUEEN_SERVER_ID"),
		CacheRefresh:  l.millis("QUEEN_CACHE_REFRESH_INTERVAL_MS", MeshCacheRefreshDefault, meshCacheRefreshMinMs),
		Peers:         []string{},
	}
	if m.DeadThreshold < 2*m.Heartbeat {
		l.fail("QUEEN_SYNC_DEAD_THRESHOLD_MS", "%d must be at least twice QUEEN_SYNC_HEARTBEAT_MS (%d), or peers flap between up and down",
			m.DeadThreshold.Milliseconds(), m.Heartbeat.Milliseconds())
	}
	name := l.alias("QUEEN_MESH_PEERS", "QUEEN_UDP_PEERS")
	if v, ok := l.trimmed(name); ok {
		peers, err := parsePeers(v, m.Port)
		if err != nil {
			l.fail(name, "%v", err)
		} else {
			m.Peers = peers
		}
	}
	return m
}

// alias returns the variable to read: name, or its legacy alias when only
// that one is set. Both set to different values is an error.
func (l *loader) alias(name, legacy string) string {
	v, ok := l.trimmed(name)
	old, oldOK := l.trimmed(legacy)
	switch {
	case !oldOK:
		return name
	case !ok:
		return legacy
	case v != old:
		l.fail(legacy, "is the legacy name of %s and disagrees with it; unset one of them", name)
	}
	return name
}

// syncSecret reads the mesh secret, trimmed (a secret store's trailing
// newline must not make two brokers disagree). Errors never include it.
func (l *loader) syncSecret(name string) string {
	v, ok := l.trimmed(name)
	if !ok {
		return ""
	}
	if len(v) < MeshSecretMinBytes {
		l.fail(name, "is %d bytes long; use at least %d (for example: openssl rand -hex 32)", len(v), MeshSecretMinBytes)
		return ""
	}
	return v
}

// advertiseHost reads a host name or IP literal to announce; never a URL
// and never a port.
func (l *loader) advertiseHost(name string) string {
	v, ok := l.trimmed(name)
	if !ok {
		return ""
	}
	host := strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
	if validIP(host) {
		return host
	}
	if h, port, err := net.SplitHostPort(v); err == nil && validHostName(h) && isDigits(port) {
		l.fail(name, "%s carries a port; give the host only (the HTTP port is PORT)", quote(v))
		return ""
	}
	if !validHostName(v) {
		l.fail(name, "%s is not a host name or IP address", quote(v))
		return ""
	}
	return v
}

// serverID reads an identity: printable, no spaces, at most 128 bytes.
func (l *loader) serverID(name string) string {
	v, ok := l.trimmed(name)
	if !ok {
		return ""
	}
	if len(v) > meshServerIDMaxLen || strings.IndexFunc(v, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 {
		l.fail(name, "%s must be at most %d printable characters without spaces", quote(v), meshServerIDMaxLen)
		return ""
	}
	return v
}

// parsePeers parses a peer list: comma-separated host, host:port,
// [IPv6]:port or bare IPv6 entries, each optionally written as an http://
// or https:// URL with a trailing slash (the reference accepts both forms).
// Blank entries are skipped, a missing port is defPort, duplicates are
// dropped. Unlike the reference, a port that is not a number is an error,
// not a silent fallback to the mesh port.
func parsePeers(v string, defPort int) ([]string, error) {
	out := []string{}
	seen := map[string]bool{}
	for _, raw := range strings.Split(v, ",") {
		e := strings.TrimSpace(raw)
		if e == "" {
			continue
		}
		peer, err := parsePeer(e, defPort)
		if err != nil {
			return nil, fmt.Errorf("entry %s: %v", quote(e), err)
		}
		if !seen[peer] {
			seen[peer] = true
			out = append(out, peer)
		}
	}
	return out, nil
}

func parsePeer(e string, defPort int) (string, error) {
	for _, scheme := range []string{"http://", "https://"} {
		if len(e) >= len(scheme) && strings.EqualFold(e[:len(scheme)], scheme) {
			e = e[len(scheme):]
			break
		}
	}
	e = strings.TrimSuffix(e, "/")
	if strings.ContainsAny(e, "/?#@") {
		return "", fmt.Errorf("give host or host:port, not a URL with a path or user")
	}
	host, port := e, ""
	switch {
	case strings.HasPrefix(e, "["):
		h, p, err := net.SplitHostPort(e)
		if err != nil {
			if !strings.HasSuffix(e, "]") {
				return "", fmt.Errorf("malformed bracketed IPv6 address")
			}
			h = e[1 : len(e)-1]
		}
		if !validIP(h) || !strings.Contains(h, ":") {
			return "", fmt.Errorf("%s is not an IPv6 address", quote(h))
		}
		host, port = h, p
	case strings.Count(e, ":") > 1:
		if !validIP(e) {
			return "", fmt.Errorf("not host:port (write an IPv6 address with a port as [address]:port)")
		}
	case strings.Contains(e, ":"):
		h, p, err := net.SplitHostPort(e)
		if err != nil {
			return "", fmt.Errorf("not host:port")
		}
		host, port = h, p
		if port == "" {
			return "", fmt.Errorf("the port after the colon is missing")
		}
	}
	if !validIP(host) && !validHostName(host) {
		return "", fmt.Errorf("%s is not a host name or IP address", quote(host))
	}
	n := defPort
	if port != "" {
		var err error
		if n, err = strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("port %s is not a port number (1-65535)", quote(port))
		}
	}
	return net.JoinHostPort(host, strconv.Itoa(n)), nil
}

// validIP accepts an IP literal whose IPv6 zone, if any, is a plain
// interface name.
func validIP(h string) bool {
	a, err := netip.ParseAddr(h)
	return err == nil && (a.Zone() == "" || validHostName(a.Zone()))
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// validHostName accepts DNS names (letters, digits, hyphens, dots, and the
// underscores some service registries use), at most 253 bytes.
func validHostName(h string) bool {
	if h == "" || len(h) > 253 || strings.HasPrefix(h, ".") || strings.Contains(h, "..") {
		return false
	}
	for i := 0; i < len(h); i++ {
		if !hostNameByte(h[i]) {
			return false
		}
	}
	return true
}

func hostNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_'
}

func (m Mesh) summary() []slog.Attr {
	return []slog.Attr{
		slog.Bool("enabled", m.Enabled),
		slog.Bool("active", m.Active()),
		slog.String("server_id", m.ServerID),
		slog.String("peers", strings.Join(m.Peers, ",")),
		slog.String("mesh_bind", m.ListenAddr()),
		slog.String("advertise_host", m.AdvertiseHost),
		slog.String("auth", m.Auth()),
		slog.String("secret", redact(m.Secret)),
		slog.Int64("heartbeat_ms", m.Heartbeat.Milliseconds()),
		slog.Int64("dead_threshold_ms", m.DeadThreshold.Milliseconds()),
		slog.Int64("cache_refresh_ms", m.CacheRefresh.Milliseconds()),
	}
}
