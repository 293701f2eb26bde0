package handlers

import (
	"context"
	"encoding/json"
	"time"

	"github.com/queenforgo/queen/gen/api"
)

// The system tag: the maintenance switches (SECURITY-REQUIREMENTS §7) and
// the disk spool's state, all held by the broker.

// switchValue reads `enabled` of a switch request: a JSON boolean only.
func switchValue(body *api.MaintenanceRequest) (bool, error) {
	const msg = "enabled (boolean) is required"
	if body == nil || body.Enabled == nil {
		return false, invalidf(msg)
	}
	switch string(*body.Enabled) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	var v any
	if err := json.Unmarshal(*body.Enabled, &v); err == nil {
		if b, ok := v.(bool); ok {
			return b, nil
		}
	}
	return false, invalidf(msg)
}

// GetMaintenance reads the switches fresh (adopting them) and the spool.
func (s *Server) GetMaintenance(ctx context.Context, _ api.GetMaintenanceRequestObject) (api.GetMaintenanceResponseObject, error) {
	readCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := s.b.RefreshMaintenance(readCtx); err != nil {
		s.log.Warn("read maintenance switches; answering from memory", "err", err)
	}
	push, pop := s.b.Maintenance()
	st := s.spoolStats()
	return api.GetMaintenance200JSONResponse{
		MaintenanceMode:    push,
		PopMaintenanceMode: pop,
		BufferedMessages:   st.PendingCount,
		BufferHealthy:      st.DbHealthy,
		BufferStats:        st,
	}, nil
}

// SetMaintenance turns push maintenance on or off.
func (s *Server) SetMaintenance(ctx context.Context, req api.SetMaintenanceRequestObject) (api.SetMaintenanceResponseObject, error) {
	on, err := switchValue(req.Body)
	if err != nil {
		return badRequest[api.SetMaintenance400JSONResponse](err.Error()), nil
	}
	s.b.SetPushMaintenance(ctx, on)
	msg := "Maintenance mode DISABLED. Background processor will drain buffer to DB."
	if on {
		msg = "Maintenance mode ENABLED. All PUSHes routing to file buffer."
	}
	st := s.spoolStats()
	return api.SetMaintenance200JSONResponse{
		MaintenanceMode: on, BufferedMessages: st.PendingCount, BufferHealthy: st.DbHealthy, Message: msg,
	}, nil
}

// GetPopMaintenance reports the pop switch.
func (s *Server) GetPopMaintenance(ctx context.Context, _ api.GetPopMaintenanceRequestObject) (api.GetPopMaintenanceResponseObject, error) {
	_, on := s.b.Maintenance()
	msg := "Pop maintenance mode is OFF. Normal operation."
	if on {
		msg = "Pop maintenance mode is ON. All POP operations return empty arrays."
	}
	return api.GetPopMaintenance200JSONResponse{PopMaintenanceMode: on, Message: msg}, nil
}

// SetPopMaintenance turns pop maintenance on or off.
func (s *Server) SetPopMaintenance(ctx context.Context, req api.SetPopMaintenanceRequestObject) (api.SetPopMaintenanceResponseObject, error) {
	on, err := switchValue(req.Body)
	if err != nil {
		return badRequest[api.SetPopMaintenance400JSONResponse](err.Error()), nil
	}
	s.b.SetPopMaintenance(ctx, on)
	msg := "Pop maintenance mode DISABLED. Normal operation resumed."
	if on {
		msg = "Pop maintenance mode ENABLED. All POP operations will return empty arrays."
	}
	return api.SetPopMaintenance200JSONResponse{PopMaintenanceMode: on, Message: msg}, nil
}

// GetBufferStatus reports this broker's spool.
func (s *Server) GetBufferStatus(ctx context.Context, _ api.GetBufferStatusRequestObject) (api.GetBufferStatusResponseObject, error) {
	st := s.spoolStats()
	out := api.GetBufferStatus200JSONResponse{
		Pending: st.PendingCount, Failed: st.FailedCount, DbHealthy: st.DbHealthy, Worker: 0,
		Writable: st.Writable, DrainPaused: st.DrainPaused,
	}
	if _, configured := s.b.SpoolStats(); !configured {
		out.Note = ptr("File buffer not configured: set FILE_BUFFER_DIR")
	}
	return out, nil
}

// spoolStats is the spool's state in the shape of the maintenance routes.
func (s *Server) spoolStats() api.SpoolStats {
	st, configured := s.b.SpoolStats()
	if !configured {
		return api.SpoolStats{Enabled: ptr(false), DbHealthy: true, Writable: ptr(false), DrainPaused: ptr(false)}
	}
	return api.SpoolStats{
		Enabled:      ptr(true),
		PendingCount: st.Pending,
		FailedCount:  st.FailedFiles,
		DbHealthy:    st.DBHealthy,
		Writable:     ptr(st.Writable),
		DrainPaused:  ptr(st.Paused),
		FailedFiles: api.SpoolFailedFiles{
			Count: st.FailedFiles, TotalBytes: st.FailedBytes, TotalMB: float64(st.FailedBytes) / (1 << 20),
			FailoverCount: st.FailedFiles,
		},
	}
}
