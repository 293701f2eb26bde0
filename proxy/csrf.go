package proxy

import (
	"net/http"
	"strings"

	"github.com/queenforgo/queen/proxy/reply"
)

// sameOrigin is the CSRF rule: a state-changing request authenticated by
// the session cookie (it has the cookie and no Authorization header, which
// would win over it) must come from the proxy's own origin, as the browser
// says in Sec-Fetch-Site, or else in Origin. Without either it is refused:
// every browser that holds the cookie sends one of them. The cookie's
// SameSite=Lax already keeps it off cross-site subrequests; this also
// covers same-site attackers (a sibling subdomain) and old browsers. A
// refusal is written when it returns false.
func (p *Proxy) sameOrigin(w http.ResponseWriter, r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	if r.Header.Get("Authorization") != "" || !hasCookie(r, p.cfg.Identity.CookieName()) {
		return true
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		if site == "same-origin" {
			return true
		}
	} else if origin := r.Header.Get("Origin"); origin != "" && strings.EqualFold(origin, p.cfg.Identity.Trusted().Origin(r)) {
		return true
	}
	p.deny(w, http.StatusForbidden, reply.CodeCSRFRejected, "cross-origin request with the session cookie refused", false)
	return false
}

func hasCookie(r *http.Request, name string) bool {
	return len(r.CookiesNamed(name)) > 0
}
