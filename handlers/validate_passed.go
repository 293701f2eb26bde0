package handlers

import (
	"net/http"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
)

// passedCache remembers requests of body-less operations that passed the
// spec's validation, by everything that validation reads: the route, the
// request target as sent (path and query) and the operation's header
// parameters. The same input passes again, so a hit skips kin-openapi's
// ValidateRequest: a consumer long-polls the same pop URL over and over,
// and the generic validation of its query was 3 % of the broker's CPU in
// the fan-out run (docs/benchmarks.md, "Round 8: the broker's CPU per
// delivery"). A request that fails is not remembered: it is validated
// every time, and answers what it answered.
type passedCache struct {
	// headers maps the pattern of each body-less operation without cookie
	// parameters to the names of its header parameters; other operations
	// are not cached. Set once, before any request.
	headers map[string][]string

	mu   sync.RWMutex
	seen map[string]struct{}
}

// passedCacheMax bounds the remembered requests; a full cache starts over.
// Keys are a few hundred bytes at most (passedKeyMax).
const (
	passedCacheMax = 1024
	passedKeyMax   = 512
)

// bodylessInputs returns the header parameters of op (with those of its
// path item) when its validation reads only the path, the query and those
// headers: no request body, no cookie parameter.
func bodylessInputs(item *openapi3.PathItem, op *openapi3.Operation) ([]string, bool) {
	if op.RequestBody != nil {
		return nil, false
	}
	var headers []string
	for _, ps := range []openapi3.Parameters{item.Parameters, op.Parameters} {
		for _, p := range ps {
			if p.Value == nil {
				return nil, false
			}
			switch p.Value.In {
			case openapi3.ParameterInCookie:
				return nil, false
			case openapi3.ParameterInHeader:
				headers = append(headers, http.CanonicalHeaderKey(p.Value.Name))
			}
		}
	}
	return headers, true
}

// key appends r's key to buf; false when r's operation is not cached or
// the key would be too long.
func (c *passedCache) key(buf []byte, r *http.Request) ([]byte, bool) {
	headers, ok := c.headers[r.Pattern]
	if !ok || r.RequestURI == "" {
		return nil, false
	}
	buf = append(buf, r.Pattern...)
	buf = append(buf, 0)
	buf = append(buf, r.RequestURI...)
	for _, h := range headers {
		for _, v := range r.Header[h] {
			buf = append(buf, 0)
			buf = append(buf, v...)
		}
		buf = append(buf, 1) // ends h's values: ["a", ""] is not ["a"] then [""]
	}
	return buf, len(buf) <= passedKeyMax
}

func (c *passedCache) has(key []byte) bool {
	c.mu.RLock()
	_, ok := c.seen[string(key)]
	c.mu.RUnlock()
	return ok
}

func (c *passedCache) add(key []byte) {
	c.mu.Lock()
	if c.seen == nil || len(c.seen) >= passedCacheMax {
		c.seen = make(map[string]struct{}, passedCacheMax)
	}
	c.seen[string(key)] = struct{}{}
	c.mu.Unlock()
}
