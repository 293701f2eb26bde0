package handlers

import (
	"net/http"
	"strings"
)

// fallback answers the paths no operation matches: a JSON 404 under /api/
// and /streams/ (notFound), and the dashboard everywhere else when one is
// configured. Auth runs before it, so with JWT on only the public dashboard
// shell ("/", "/assets/*", "/favicon*") is served without a token (JWT-9).
func (s *Server) fallback() http.Handler {
	if s.cfg.Dashboard == nil {
		return http.HandlerFunc(s.notFound)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") || strings.HasPrefix(r.URL.Path, "/streams/") {
			s.notFound(w, r)
			return
		}
		s.cfg.Dashboard.ServeHTTP(w, r)
	})
}
