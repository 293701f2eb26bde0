// Package clientip says who a request came from, believing X-Forwarded-For
// and X-Forwarded-Proto only from the proxies in QUEEN_PROXY_TRUSTED_PROXIES
// (the reference believes them from anyone, which its own assessment flags:
// the login throttle could then be dodged by sending a new address each
// time).
package clientip

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Trusted is the set of addresses whose forwarding headers are believed.
// The zero value trusts no one.
type Trusted struct {
	prefixes []netip.Prefix
}

// The words Parse accepts besides addresses and CIDRs.
var words = map[string][]string{
	"loopback": {"127.0.0.0/8", "::1/128"},
	"private":  {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"},
}

// Parse reads a comma list of CIDRs, IP addresses and the words loopback
// and private. Empty entries are skipped; "" trusts no one.
func Parse(spec string) (Trusted, error) {
	var t Trusted
	for _, item := range strings.Split(spec, ",") {
		item = strings.ToLower(strings.TrimSpace(item))
		if item == "" {
			continue
		}
		list, ok := words[item]
		if !ok {
			list = []string{item}
		}
		for _, s := range list {
			p, err := parsePrefix(s)
			if err != nil {
				return Trusted{}, fmt.Errorf("%q is not an IP address, a CIDR, loopback or private", item)
			}
			t.prefixes = append(t.prefixes, p)
		}
	}
	return t, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Empty reports whether no one is trusted.
func (t Trusted) Empty() bool { return len(t.prefixes) == 0 }

// Contains reports whether ip is a trusted proxy.
func (t Trusted) Contains(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range t.prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// ClientIP is the address the request came from: the peer's, or, when the
// peer is trusted, the right-most X-Forwarded-For entry not appended by a
// trusted proxy. An entry that does not parse stops the walk at the last
// trusted hop. The zero Addr when the peer address does not parse.
func (t Trusted) ClientIP(r *http.Request) netip.Addr {
	ip := remote(r)
	if !ip.IsValid() || !t.Contains(ip) {
		return ip
	}
	var hops []string
	for _, h := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(h, ",")...)
	}
	for i := len(hops) - 1; i >= 0 && t.Contains(ip); i-- {
		next, ok := parseHop(hops[i])
		if !ok {
			break
		}
		ip = next
	}
	return ip
}

// Secure reports whether the client's connection is TLS: this listener's,
// or the one a trusted proxy in front says it terminated
// (X-Forwarded-Proto: https).
func (t Trusted) Secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	ip := remote(r)
	return ip.IsValid() && t.Contains(ip) && strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https")
}

// Origin is the origin the client addressed: scheme and Host.
func (t Trusted) Origin(r *http.Request) string {
	scheme := "http"
	if t.Secure(r) {
		scheme = "https"
	}
	return scheme + "://" + strings.ToLower(r.Host)
}

// Bucket is the key a per-address limit counts under: the address, or its
// /64 for IPv6, where one client usually holds the whole prefix.
func Bucket(ip netip.Addr) string {
	if !ip.IsValid() {
		return "unknown"
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

func remote(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// parseHop reads one X-Forwarded-For entry: an address, maybe with a port
// or in brackets.
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}
