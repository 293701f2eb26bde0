package config

import (
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxNone is the upper bound of an integer variable that has only a minimum.
const maxNone = math.MaxInt

// maxMillis bounds every duration variable (one day) so that the conversion
// to time.Duration can never overflow.
const maxMillis = 24 * 60 * 60 * 1000

// varError is one problem with one variable. Its text is always one line.
type varError struct {
	name    string
	problem string
}

func (e *varError) Error() string { return e.name + ": " + e.problem }

// loader reads variables and collects problems instead of stopping at the
// first one.
type loader struct {
	getenv func(string) (string, bool)
	errs   []error
}

func (l *loader) fail(name, format string, args ...any) {
	l.errs = append(l.errs, &varError{name: name, problem: fmt.Sprintf(format, args...)})
}

// trimmed returns the value with surrounding white space removed; ok is
// false when the variable is unset or blank, which means "use the default".
func (l *loader) trimmed(name string) (string, bool) {
	v, ok := l.getenv(name)
	if !ok {
		return "", false
	}
	v = strings.TrimSpace(v)
	return v, v != ""
}

// present reports whether name is set to something other than blanks.
func (l *loader) present(name string) bool {
	_, ok := l.trimmed(name)
	return ok
}

// str returns a free-form value as given (not trimmed), or def when the
// variable is unset or empty.
func (l *loader) str(name, def string) string {
	v, ok := l.getenv(name)
	if !ok || v == "" {
		return def
	}
	return v
}

// list splits a comma-separated value, trimming each entry and dropping
// empty ones. Unlike the other variables, set-but-empty is kept: it means an
// empty list (CFG-2); only an unset variable takes def.
func (l *loader) list(name string, def []string) []string {
	v, ok := l.getenv(name)
	if !ok {
		return def
	}
	out := []string{}
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// pgString is str for values that end up in the PostgreSQL connection
// string, where a NUL byte is refused by the driver.
func (l *loader) pgString(name, def string, secret bool) string {
	v := l.str(name, def)
	if strings.IndexByte(v, 0) >= 0 {
		if secret {
			l.fail(name, "contains a NUL byte")
		} else {
			l.fail(name, "%s contains a NUL byte", quote(v))
		}
		return def
	}
	return v
}

// boolean accepts true/false, 1/0, yes/no, on/off in any case. Anything else
// is an error, never a silent default (CFG-1).
func (l *loader) boolean(name string, def bool) bool {
	v, ok := l.trimmed(name)
	if !ok {
		return def
	}
	switch strings.ToLower(v) {
	case "true", "1", "yes", "on":
		return true
	case "false", "0", "no", "off":
		return false
	}
	l.fail(name, "%s is not a boolean (use true/false, 1/0, yes/no or on/off)", quote(v))
	return def
}

// integer parses a whole base-10 integer within [lo, hi].
func (l *loader) integer(name string, def, lo, hi int64) int64 {
	v, ok := l.trimmed(name)
	if !ok {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		l.fail(name, "%s is not an integer", quote(v))
	case err != nil || n < lo || n > hi:
		if hi == maxNone {
			l.fail(name, "%s is out of range (minimum %d)", quote(v), lo)
		} else {
			l.fail(name, "%s is out of range (%d-%d)", quote(v), lo, hi)
		}
	default:
		return n
	}
	return def
}

// gcPercent parses GOGC as the runtime does, an integer percentage or
// "off" (-1), but refuses what the runtime would silently take for 100.
func (l *loader) gcPercent(name string) int {
	v, ok := l.trimmed(name)
	if !ok {
		return GCPercentDefault
	}
	if strings.EqualFold(v, "off") {
		return -1
	}
	return int(l.integer(name, GCPercentDefault, 1, math.MaxInt32))
}

// port parses a TCP port number.
func (l *loader) port(name string, def int) int {
	v, ok := l.trimmed(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 65535 {
		l.fail(name, "%s is not a port number (1-65535)", quote(v))
		return def
	}
	return n
}

// millis parses a duration given in milliseconds, at least lo and at most a day.
func (l *loader) millis(name string, def time.Duration, lo int64) time.Duration {
	n := l.integer(name, def.Milliseconds(), lo, maxMillis)
	return time.Duration(n) * time.Millisecond
}

// seconds parses a duration given in seconds, at least lo and at most a day.
func (l *loader) seconds(name string, def time.Duration, lo int64) time.Duration {
	n := l.integer(name, int64(def/time.Second), lo, maxMillis/1000)
	return time.Duration(n) * time.Second
}

// oneOf accepts one of the allowed words in any case and returns it lower-cased.
func (l *loader) oneOf(name, def string, allowed ...string) string {
	v, ok := l.trimmed(name)
	if !ok {
		return def
	}
	for _, a := range allowed {
		if strings.EqualFold(v, a) {
			return a
		}
	}
	list := strings.Join(allowed, ", ")
	if def == "" {
		list += " (or empty)"
	}
	l.fail(name, "%s is not one of %s", quote(v), list)
	return def
}

func (l *loader) logLevel(name string) slog.Level {
	switch l.oneOf(name, "info", "debug", "info", "warn", "error") {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// bindAddr parses the HTTP bind host (SECURITY-REQUIREMENTS L-2): an IPv4 or
// IPv6 literal (brackets allowed), or localhost meaning 127.0.0.1. Unlike
// other variables, set-but-empty is refused rather than defaulted, and a value
// carrying a port points at PORT.
func (l *loader) bindAddr(name string) netip.Addr {
	return l.hostAddr(name, "PORT", netip.MustParseAddr(BindAddrDefault))
}

// hostAddr is bindAddr for any listener: def when unset, and portVar named
// as the owner of the port.
func (l *loader) hostAddr(name, portVar string, def netip.Addr) netip.Addr {
	raw, set := l.getenv(name)
	if !set {
		return def
	}
	v := strings.TrimSpace(raw)
	if v == "" {
		l.fail(name, "is set to the empty string (unset it for the default %s)", def)
		return def
	}
	if strings.EqualFold(v, "localhost") {
		return netip.AddrFrom4([4]byte{127, 0, 0, 1})
	}
	host := v
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		return addr
	}
	if strings.Contains(v, ":") {
		if _, _, err := net.SplitHostPort(v); err == nil {
			l.fail(name, "%s carries a port; give the host only and set the port with %s", quote(v), portVar)
			return def
		}
	}
	l.fail(name, "%s is not an IP address (use an IPv4 or IPv6 literal, or localhost)", quote(v))
	return def
}

// hexKey decodes the AES-256 key: unset/empty means no key; otherwise exactly
// 64 hex characters after trimming. Errors never include any of the value.
//
// A malformed key stops the boot. The reference (ENC-1) warns instead and
// runs without encryption, so every flagged queue silently stores
// plaintext; but whoever sets a key means to encrypt, and a boot failure
// is noticed where a warning is not. The trailing newline a secret store
// leaves, the usual way into the reference's silent mode, is trimmed and
// accepted (docs/compatibility.md).
func (l *loader) hexKey(name string) []byte {
	v, ok := l.trimmed(name)
	if !ok {
		return nil
	}
	if len(v) != 64 {
		l.fail(name, "must be 64 hexadecimal characters (32 bytes), got %d characters", utf8.RuneCountInString(v))
		return nil
	}
	key, err := hex.DecodeString(v)
	if err != nil {
		// The decoder's error names the offending byte: do not pass it on.
		l.fail(name, "must be 64 hexadecimal characters (32 bytes) and holds a non-hex character")
		return nil
	}
	return key
}

// rootCert validates PEM content holding one or more CA certificates
// (SECURITY-REQUIREMENTS PGT-5). Literal `\n` sequences are expanded so that
// the PEM fits on one line of an env file. Malformed content is an error,
// never a silent fallback. Errors never include any of the value.
func (l *loader) rootCert(name string) string {
	v, ok := l.trimmed(name)
	if !ok {
		return ""
	}
	v = strings.ReplaceAll(v, `\n`, "\n")
	rest := []byte(v)
	n := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		n++
		if block.Type != "CERTIFICATE" {
			l.fail(name, "PEM block %d is not a CERTIFICATE", n)
			return ""
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			l.fail(name, "certificate %d is not a valid X.509 certificate", n)
			return ""
		}
	}
	switch {
	case n == 0:
		l.fail(name, "holds no PEM certificate")
		return ""
	case strings.Contains(string(rest), "-----BEGIN"):
		l.fail(name, "PEM block %d is malformed", n+1)
		return ""
	}
	return v
}

// quote renders a non-secret value for an error message: quoted, escaped
// onto one line, and cut short if long.
func quote(v string) string {
	const max = 64
	if len(v) <= max {
		return strconv.Quote(v)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return strconv.Quote(v[:cut]) + "..."
}
