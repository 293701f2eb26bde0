package forward

import (
	"context"
	"net/http"
	"strings"
)

// NewRequest builds a request of the proxy's own to the target's broker
// (the inventory and retained-bytes poll): the path under the cell's
// base_url prefix, with the cell's bearer and the cluster's tenant, as a
// forwarded request would carry them.
func NewRequest(ctx context.Context, t Target, method, pathAndQuery string) (*http.Request, error) {
	u := *t.BaseURL
	path, query, _ := strings.Cut(pathAndQuery, "?")
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawPath = ""
	u.RawQuery = query
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if t.Secret != nil {
		req.Header.Set("Authorization", "Bearer "+*t.Secret)
	}
	if t.Tenant != "" {
		req.Header.Set(HeaderTenant, t.Tenant)
	}
	return req, nil
}
