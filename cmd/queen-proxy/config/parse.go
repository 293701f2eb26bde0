package config

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/cmd/queen/pgtls"
	"github.com/queenforgo/queen/proxy/clientip"
)

// maxMillis bounds duration variables (a day), so no conversion overflows.
const maxMillis = 24 * 60 * 60 * 1000

var (
	slugRe       = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	cookieNameRe = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$")
	domainRe     = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
)

// loader reads variables and collects one problem per variable.
type loader struct {
	getenv func(string) (string, bool)
	errs   []error
	bad    map[string]bool
}

type varError struct{ name, problem string }

func (e *varError) Error() string { return e.name + ": " + e.problem }

func (l *loader) fail(name, format string, args ...any) {
	if l.bad == nil {
		l.bad = map[string]bool{}
	}
	l.bad[name] = true
	l.errs = append(l.errs, &varError{name: name, problem: fmt.Sprintf(format, args...)})
}

func (l *loader) failed(name string) bool { return l.bad[name] }

// str returns the value trimmed; unset and empty are "" (PROXY.md §1.1).
func (l *loader) str(name string) string {
	v, _ := l.getenv(name)
	return strings.TrimSpace(v)
}

// strDefault is str with a default for unset and empty.
func (l *loader) strDefault(name, def string) string {
	if v := l.str(name); v != "" {
		return v
	}
	return def
}

// cookieName is a cookie name: an RFC 6265 token.
func (l *loader) cookieName(name string) string {
	v := l.strDefault(name, CookieNameDefault)
	if !cookieNameRe.MatchString(v) {
		l.fail(name, "%s is not a cookie name (letters, digits and !#$%%&'*+-.^_`|~)", strconv.Quote(v))
		return CookieNameDefault
	}
	return v
}

// cookieDomain is a host name the cookie is shared across (a leading dot
// is dropped, as browsers do).
func (l *loader) cookieDomain(name string) string {
	v := strings.TrimPrefix(strings.ToLower(l.str(name)), ".")
	if v != "" && !domainRe.MatchString(v) {
		l.fail(name, "%s is not a domain name", strconv.Quote(v))
		return ""
	}
	return v
}

// trusted parses QUEEN_PROXY_TRUSTED_PROXIES.
func (l *loader) trusted(name string) clientip.Trusted {
	t, err := clientip.Parse(l.str(name))
	if err != nil {
		l.fail(name, "%s", err.Error())
	}
	return t
}

// optional is str for a value whose absence differs from "" (a token).
func (l *loader) optional(name string) *string {
	if v := l.str(name); v != "" {
		return &v
	}
	return nil
}

func (l *loader) pgString(name, def string, secret bool) string {
	v := l.str(name)
	if v == "" {
		return def
	}
	if strings.IndexByte(v, 0) >= 0 {
		if secret {
			l.fail(name, "contains a NUL byte")
		} else {
			l.fail(name, "%s contains a NUL byte", strconv.Quote(v))
		}
		return def
	}
	return v
}

func (l *loader) boolean(name string, def bool) bool {
	v := l.str(name)
	switch strings.ToLower(v) {
	case "":
		return def
	case "true", "1", "yes", "on":
		return true
	case "false", "0", "no", "off":
		return false
	}
	l.fail(name, "%s is not a boolean (use true/false, 1/0, yes/no or on/off)", strconv.Quote(v))
	return def
}

func (l *loader) integer(name string, def, lo, hi int64) int64 {
	v := l.str(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil && n == 0:
		l.fail(name, "%s is not an integer", strconv.Quote(v))
	case err != nil || n < lo || n > hi:
		l.fail(name, "%s is out of range (%d-%d)", strconv.Quote(v), lo, hi)
	default:
		return n
	}
	return def
}

func (l *loader) port(name string, def int) int {
	return int(l.integer(name, int64(def), 1, 65535))
}

func (l *loader) millis(name string, def time.Duration, lo int64) time.Duration {
	return time.Duration(l.integer(name, def.Milliseconds(), lo, maxMillis)) * time.Millisecond
}

func (l *loader) oneOf(name, def string, allowed ...string) string {
	v := strings.ToLower(l.str(name))
	if v == "" {
		return def
	}
	for _, a := range allowed {
		if v == a {
			return a
		}
	}
	l.fail(name, "%s is not one of %s", strconv.Quote(v), strings.Join(allowed, ", "))
	return def
}

func (l *loader) logLevel(name string) slog.Level {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.oneOf(name, "info", "debug", "info", "warn", "error"))); err != nil {
		return slog.LevelInfo
	}
	return level
}

// bindAddr is an IP literal (or localhost); set-but-empty and a value with
// a port are refused (PROXY.md §1.8 item 3).
func (l *loader) bindAddr(name, portVar string) netip.Addr {
	def := netip.MustParseAddr(BindAddrDefault)
	raw, set := l.getenv(name)
	if !set {
		return def
	}
	v := strings.TrimSpace(raw)
	host := strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
	addr, err := netip.ParseAddr(host)
	switch {
	case v == "":
		l.fail(name, "is set to the empty string (unset it for the default %s)", BindAddrDefault)
	case strings.EqualFold(v, "localhost"):
		return netip.AddrFrom4([4]byte{127, 0, 0, 1})
	case err == nil:
		return addr
	case strings.Contains(v, ":"):
		if _, _, err := net.SplitHostPort(v); err == nil {
			l.fail(name, "%s carries a port; give the host only and set the port with %s", strconv.Quote(v), portVar)
			break
		}
		fallthrough
	default:
		l.fail(name, "%s is not an IP address (use an IPv4 or IPv6 literal, or localhost)", strconv.Quote(v))
	}
	return def
}

func (l *loader) httpURL(name string) string {
	v := l.str(name)
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		l.fail(name, "%s is not an http(s)://host[:port][/prefix] URL", strconv.Quote(v))
		return ""
	}
	return v
}

func (l *loader) tenantUUID(name, def string) string {
	v := l.str(name)
	if v == "" {
		return def
	}
	id, err := uuid.Parse(v)
	if err != nil || len(v) != 36 {
		l.fail(name, "%s is not a UUID (8-4-4-4-12 hex digits)", strconv.Quote(v))
		return def
	}
	return id.String()
}

func (l *loader) slug(name string) string {
	v := strings.ToLower(l.str(name))
	if v != "" && !slugRe.MatchString(v) {
		l.fail(name, "%s is not a cluster slug (a DNS label)", strconv.Quote(v))
		return ""
	}
	return v
}

// hosts splits a comma list of full host names, lower-cased, with a port
// and a trailing root dot stripped; empty entries are dropped.
func (l *loader) hosts(name string) []string {
	var out []string
	for _, h := range strings.Split(l.str(name), ",") {
		h = strings.ToLower(strings.TrimSpace(h))
		if host, _, err := net.SplitHostPort(h); err == nil {
			h = host
		}
		if h = strings.TrimSuffix(h, "."); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// pemValue un-escapes a PEM given on one line with literal \n.
func (l *loader) pemValue(name string) string {
	return strings.ReplaceAll(l.str(name), `\n`, "\n")
}

// rootCert validates PXDB_SSL_ROOT_CERT the way the broker's PostgreSQL TLS
// uses it (cmd/queen/pgtls), even when PXDB_HOST is unset (§1.8 item 4).
func (l *loader) rootCert(name string) string {
	v := l.pemValue(name)
	if v == "" {
		return ""
	}
	if _, err := (pgtls.Settings{UseSSL: true, RootCertPEM: v}).TLSConfig("pxdb"); err != nil {
		l.fail(name, "%s", strings.TrimPrefix(err.Error(), "PG_SSL_ROOT_CERT: "))
		return ""
	}
	return v
}

func (l *loader) ed25519Private(name string) string {
	v := l.pemValue(name)
	if v == "" {
		return ""
	}
	block, _ := pem.Decode([]byte(v))
	if block == nil {
		l.fail(name, "holds no PEM block")
		return ""
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if _, ok := key.(ed25519.PrivateKey); err != nil || !ok {
		l.fail(name, "is not a PKCS#8 Ed25519 private key")
		return ""
	}
	return v
}

func (l *loader) ed25519Public(name string) string {
	v := l.pemValue(name)
	if v == "" {
		return ""
	}
	block, _ := pem.Decode([]byte(v))
	if block == nil {
		l.fail(name, "holds no PEM block")
		return ""
	}
	if len(block.Bytes) == ed25519.PublicKeySize {
		return v
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if _, ok := key.(ed25519.PublicKey); err != nil || !ok {
		l.fail(name, "is not an Ed25519 public key (SPKI PEM, or the raw 32 bytes)")
		return ""
	}
	return v
}
