package handlers

import (
	"context"

	"github.com/queenforgo/queen/gen/api"
)

// The shared-state tag: what brokers on one database tell each other. The
// transports (the mesh, PostgreSQL NOTIFY) are wired by cmd/queen, which
// reports them through Config.SharedState; handlers never imports the mesh.

// SharedState reports the broker-to-broker transports.
type SharedState interface {
	// SharedStateStats is a snapshot of the transports: every field of the
	// stats route's answer but the two maintenance switches, which are the
	// broker's and are filled in here. The Prometheus families of the mesh
	// and of NOTIFY are read from the same snapshot
	// (shared_state_metrics.go). Safe to call at any time.
	SharedStateStats() api.SharedStateStats
}

// GetSharedStateStats answers the transports' counters and the switches.
func (s *Server) GetSharedStateStats(context.Context, api.GetSharedStateStatsRequestObject) (api.GetSharedStateStatsResponseObject, error) {
	return api.GetSharedStateStats200JSONResponse(s.sharedState()), nil
}

// GetInterInstanceStats is the reference's older path of the same answer.
func (s *Server) GetInterInstanceStats(context.Context, api.GetInterInstanceStatsRequestObject) (api.GetInterInstanceStatsResponseObject, error) {
	return api.GetInterInstanceStats200JSONResponse(s.sharedState()), nil
}

// sharedState is the snapshot with the switches; without a SharedState
// (a broker wired without transports) the mesh is off for want of peers.
func (s *Server) sharedState() api.SharedStateStats {
	var st api.SharedStateStats
	if s.cfg.SharedState != nil {
		st = s.cfg.SharedState.SharedStateStats()
	} else {
		st = api.SharedStateStats{Reason: ptr(api.NoPeers), ServerId: s.cfg.ServerID}
	}
	st.MaintenanceMode, st.PopMaintenanceMode = s.b.Maintenance()
	return st
}
