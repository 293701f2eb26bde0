// Package pgtls decides what the broker's PostgreSQL link trusts and builds
// the TLS configuration for it (SECURITY-REQUIREMENTS §5, DECISIONS §5).
//
// Three variables, one table:
//
//	PG_USE_SSL  PG_SSL_ROOT_CERT  PG_SSL_REJECT_UNAUTHORIZED  trust         verified
//	false       -                 -                           plaintext     no
//	true        set               either                      supplied-ca   yes
//	true        unset             true (default)              webpki-roots  yes
//	true        unset             false                       accept-any    no
//
// "Verified" means the chain ends in a trusted root and the certificate
// names the host connected to (each host of a PG_HOST list under its own
// name). webpki-roots is the Mozilla set compiled into the binary
// (package roots), never the operating system's store. A supplied CA
// replaces that set rather than joining it: the database is signed by that
// CA, so a publicly trusted certificate for the host would be an
// impersonation, not a fallback; and it outranks
// PG_SSL_REJECT_UNAUTHORIZED=false, which only ever existed because there
// was no way to name a CA. accept-any still encrypts and still checks the
// handshake signature, but anyone on the path can present a certificate.
//
// With TLS on there is no fallback to plaintext: a handshake failure is a
// connection error. A PG_HOST that is a Unix socket directory is not
// encrypted (as with libpq): the socket never leaves the machine.
package pgtls

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/queenforgo/queen/cmd/queen/roots"
)

// Settings are the PostgreSQL TLS variables.
type Settings struct {
	UseSSL             bool   // PG_USE_SSL
	RejectUnauthorized bool   // PG_SSL_REJECT_UNAUTHORIZED
	RootCertPEM        string // PG_SSL_ROOT_CERT: PEM content; a literal `\n` stands for a line break
}

// Trust names what the link trusts, as the boot log shows it (PGT-4).
type Trust string

// The trust policies.
const (
	Plaintext   Trust = "plaintext"
	WebPKIRoots Trust = "webpki-roots"
	SuppliedCA  Trust = "supplied-ca"
	AcceptAny   Trust = "accept-any"
)

// Trust is the policy the settings select.
func (s Settings) Trust() Trust {
	switch {
	case !s.UseSSL:
		return Plaintext
	case strings.TrimSpace(s.RootCertPEM) != "":
		return SuppliedCA
	case s.RejectUnauthorized:
		return WebPKIRoots
	default:
		return AcceptAny
	}
}

// Verified reports whether the link is authenticated, not only encrypted.
func (s Settings) Verified() bool {
	t := s.Trust()
	return t == WebPKIRoots || t == SuppliedCA
}

// Advisory is the boot warning for a legal configuration that is probably
// not what the operator meant, or "" when there is none. It names variables,
// never their values.
func (s Settings) Advisory() string {
	hasCA := strings.TrimSpace(s.RootCertPEM) != ""
	switch {
	case hasCA && !s.UseSSL:
		return "PG_SSL_ROOT_CERT is set but PG_USE_SSL is false: the connection to PostgreSQL is plaintext and the CA is not used; set PG_USE_SSL=true"
	case !s.UseSSL:
		return ""
	case hasCA && !s.RejectUnauthorized:
		return "PG_SSL_REJECT_UNAUTHORIZED=false is ignored: PG_SSL_ROOT_CERT supplies a CA, so the server certificate is verified against it; unset the flag"
	case !s.RejectUnauthorized:
		return "PG_SSL_REJECT_UNAUTHORIZED=false: the connection to PostgreSQL is encrypted but not authenticated; any certificate is accepted, so whoever can intercept it can read and change it; put the server's CA in PG_SSL_ROOT_CERT instead"
	}
	return ""
}

// TLSConfig returns the client TLS configuration for a server reached as
// serverName (PG_HOST), or nil when PG_USE_SSL is off. Its error means
// PG_SSL_ROOT_CERT holds no usable certificate.
func (s Settings) TLSConfig(serverName string) (*tls.Config, error) {
	c := &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}
	switch s.Trust() {
	case Plaintext:
		return nil, nil
	case SuppliedCA:
		pool, err := parseRoots(s.RootCertPEM)
		if err != nil {
			return nil, fmt.Errorf("PG_SSL_ROOT_CERT: %w", err)
		}
		c.RootCAs = pool
	case WebPKIRoots:
		c.RootCAs = roots.Mozilla()
	case AcceptAny:
		c.InsecureSkipVerify = true
	}
	return c, nil
}

// Configure puts the TLS configuration on a parsed pgx connection config,
// replacing whatever pgx built from sslmode and the PG* environment, for
// the first host and every fallback. Unix socket hosts, which pgx never
// encrypts, are left alone. With PG_USE_SSL off it removes TLS everywhere,
// so nothing (PGSSLMODE=prefer, say) can make the link opportunistic.
func Configure(cfg *pgconn.Config, s Settings) error {
	if err := configureOne(&cfg.TLSConfig, cfg.Host, s); err != nil {
		return err
	}
	for _, fb := range cfg.Fallbacks {
		if err := configureOne(&fb.TLSConfig, fb.Host, s); err != nil {
			return err
		}
	}
	return nil
}

func configureOne(dst **tls.Config, host string, s Settings) error {
	if network, _ := pgconn.NetworkAddress(host, 5432); network == "unix" {
		*dst = nil
		return nil
	}
	c, err := s.TLSConfig(host)
	if err != nil {
		return err
	}
	*dst = c
	return nil
}

// parseRoots reads every CERTIFICATE block. The config loader has already
// refused malformed content at boot; this is the same check, kept here so
// that the package never silently trusts nothing.
func parseRoots(raw string) (*x509.CertPool, error) {
	rest := []byte(strings.ReplaceAll(strings.TrimSpace(raw), `\n`, "\n"))
	pool := x509.NewCertPool()
	n := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		n++
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("PEM block %d is not a CERTIFICATE", n)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d is not a valid X.509 certificate", n)
		}
		pool.AddCert(cert)
	}
	if n == 0 {
		return nil, errors.New("holds no PEM certificate")
	}
	return pool, nil
}
