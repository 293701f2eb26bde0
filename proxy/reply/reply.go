// Package reply writes the proxy's refusals: every one is the JSON envelope
// {"error": "<human text>", "code": "<machine code>"} (PROXY.md §7.5). The
// official clients branch on code, so codes are constants here and never
// change meaning.
package reply

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// The codes of PROXY.md §7.5 that the proxy answers with.
const (
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeRateLimited      = "rate_limited"
	CodeClusterSuspended = "cluster_suspended"
	CodePushBlocked      = "push_blocked"
	CodeFeatureGated     = "feature_gated"
	CodeRouteBlocked     = "route_blocked"
	CodeClusterUnknown   = "cluster_unknown"
	CodePayloadTooLarge  = "payload_too_large"
	CodeBadGateway       = "bad_gateway"
	CodeUpstreamTimeout  = "upstream_timeout"
	CodeNotConfigured    = "not_configured"
	CodeInvalidRequest   = "invalid_request"
	CodeNotFound         = "not_found"
	CodeQuotaExceeded    = "quota_exceeded"
	// CodeStorageQuotaExceeded refuses pushes while the cluster stores more
	// than its plan's max_retained_bytes.
	CodeStorageQuotaExceeded = "storage_quota_exceeded"
	// CodeCSRFRejected refuses a state-changing request that carries the
	// session cookie but does not come from the proxy's own origin.
	CodeCSRFRejected = "csrf_rejected"
	// CodeUnavailable is ours: pxdb did not answer and nothing cached may
	// stand in for it. Clients retry a 503.
	CodeUnavailable = "unavailable"
)

// envelope is the body of every refusal.
type envelope struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// Error writes status with the envelope. It never fails: the body is two
// strings.
func Error(w http.ResponseWriter, status int, code, text string) {
	body, _ := json.Marshal(envelope{Error: text, Code: code})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// RouteBlocked is the one answer for every path the proxy does not forward:
// unknown, blocked, operator-only or ambiguous. It is the same for all of
// them so that nothing can be learned by probing.
func RouteBlocked(w http.ResponseWriter) {
	Error(w, http.StatusNotFound, CodeRouteBlocked, "not available")
}

// TooMany answers 429 with Retry-After, in whole seconds between 1 and 60.
func TooMany(w http.ResponseWriter, code, text string, retry time.Duration) {
	w.Header().Set("Retry-After", RetrySeconds(retry))
	Error(w, http.StatusTooManyRequests, code, text)
}

// RetrySeconds renders a wait as Retry-After: whole seconds, rounded up,
// between 1 and 60.
func RetrySeconds(retry time.Duration) string {
	secs := int((retry + time.Second - 1) / time.Second)
	return strconv.Itoa(max(1, min(60, secs)))
}
