package session

import (
	"net/http"
	"strings"
	"time"
)

// Cookie is the session cookie's settings (QUEEN_PROXY_COOKIE_NAME,
// QUEEN_PROXY_COOKIE_DOMAIN, QUEEN_PROXY_JWT_TTL_S).
type Cookie struct {
	Name   string
	Domain string // "" for a host-only cookie; set forces Secure
	TTL    time.Duration
}

// Set writes the session cookie: HttpOnly, SameSite=Lax, Path=/, Secure
// when the request came over TLS (secure) or a domain is configured.
func (c Cookie) Set(w http.ResponseWriter, token string, secure bool) {
	http.SetCookie(w, c.cookie(token, int(c.TTL/time.Second), secure))
}

// Clear writes an expired session cookie (logout).
func (c Cookie) Clear(w http.ResponseWriter, secure bool) {
	http.SetCookie(w, c.cookie("", -1, secure))
}

func (c Cookie) cookie(value string, maxAge int, secure bool) *http.Cookie {
	return &http.Cookie{
		Name: c.Name, Value: value, Path: "/", Domain: c.Domain, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: secure || c.Domain != "",
	}
}

// Read returns the value of the first cookie named exactly c.Name, or "".
func (c Cookie) Read(r *http.Request) string {
	for _, ck := range r.CookiesNamed(c.Name) {
		return strings.TrimSpace(ck.Value)
	}
	return ""
}
