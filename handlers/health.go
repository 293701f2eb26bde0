package handlers

import (
	"context"
	"time"

	"github.com/queenforgo/queen/gen/api"
)

// GetHealth answers 200 while PostgreSQL answers and the broker is not
// shutting down, else 503 so load balancers stop sending work here.
func (s *Server) GetHealth(ctx context.Context, _ api.GetHealthRequestObject) (api.GetHealthResponseObject, error) {
	h := api.Health{Status: api.Healthy, Database: api.Connected, Server: ptr("Queen for Go"), Version: ptr(s.cfg.Version), WorkerId: ptr(0)}
	pingCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.pool.Ping(pingCtx); err != nil {
		h.Status, h.Database = api.Unhealthy, api.Disconnected
		return api.GetHealth503JSONResponse(h), nil
	}
	if s.b.Draining() {
		h.Status = api.Draining
		return api.GetHealth503JSONResponse(h), nil
	}
	return api.GetHealth200JSONResponse(h), nil
}
