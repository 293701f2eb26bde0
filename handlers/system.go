package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/gen/db"
)

// The queen.system_state rows of the two switches; the reference brokers
// (C++ and Rust) use the same keys and values, so mixed clusters agree.
const (
	stateKeyPushMaintenance = "maintenance_mode"
	stateKeyPopMaintenance  = "pop_maintenance_mode"
)

// maintenanceRefreshDefault is how often every broker re-reads the
// switches, so that a flip made through one broker reaches all of them.
const maintenanceRefreshDefault = 5 * time.Second

// maintenance holds the two switches (SECURITY-REQUIREMENTS §7). The
// in-process flags are what the push and pop paths read; the rows in
// queen.system_state are the truth every broker converges to.
type maintenance struct {
	push atomic.Bool // pushes go to the spool, the drain is held
	pop  atomic.Bool // pops answer 204 without reading

	mu sync.Mutex
	// unsaved holds a switch this broker set while the database could not
	// be written; the reconcile writes it before reading, so the operator's
	// last word is not undone by the old row.
	unsaved map[string]bool
	// gen counts local sets, so that a reconcile whose read started before
	// a set does not apply the older rows over it.
	gen uint64

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// startReliability seeds the switches from the database (bounded, best
// effort: a database down at boot leaves them off until the reconcile
// reaches it), starts the reconcile loop and the spool's drain. Called by New.
func (s *Server) startReliability() {
	s.maint = &maintenance{unsaved: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if err := s.reconcileMaintenance(ctx); err != nil {
		s.log.Warn("read maintenance switches at boot; both stay off until the database answers", "err", err)
	}
	cancel()
	if s.spool != nil {
		s.spool.StartDrain(s.spoolReplayer())
	}
	every := s.cfg.MaintenanceRefresh
	if every <= 0 {
		every = maintenanceRefreshDefault
	}
	go s.maintenanceLoop(every)
}

// stopReliability stops the reconcile loop and the drain (between two
// replay transactions), before the pool closes. Idempotent.
func (s *Server) stopReliability() {
	s.maint.once.Do(func() { close(s.maint.stop) })
	<-s.maint.done
	if s.spool != nil {
		s.spool.StopDrain()
	}
}

func (s *Server) maintenanceLoop(every time.Duration) {
	defer close(s.maint.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.maint.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		if err := s.reconcileMaintenance(ctx); err != nil {
			s.log.Debug("reconcile maintenance switches", "err", err)
		}
		cancel()
	}
}

// reconcileMaintenance writes switches set while the database was down,
// then adopts what the rows say.
func (s *Server) reconcileMaintenance(ctx context.Context) error {
	if s.pool == nil {
		return fmt.Errorf("no database pool")
	}
	s.maint.mu.Lock()
	gen := s.maint.gen
	unsaved := make(map[string]bool, len(s.maint.unsaved))
	for k, v := range s.maint.unsaved {
		unsaved[k] = v
	}
	s.maint.mu.Unlock()
	for key, on := range unsaved {
		if err := s.saveSwitch(ctx, key, on); err != nil {
			return err
		}
		s.maint.mu.Lock()
		if v, ok := s.maint.unsaved[key]; ok && v == on {
			delete(s.maint.unsaved, key)
		}
		s.maint.mu.Unlock()
	}
	rows, err := s.q.SystemStateListByKeys(ctx, []string{stateKeyPushMaintenance, stateKeyPopMaintenance})
	if err != nil {
		return classifyDB(err)
	}
	found := map[string]bool{}
	for _, r := range rows {
		var v struct {
			Enabled bool `json:"enabled"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			s.log.Warn("unreadable maintenance switch in queen.system_state; read as off", "key", r.Key, "err", err)
		}
		found[r.Key] = v.Enabled
	}
	s.maint.mu.Lock()
	defer s.maint.mu.Unlock()
	if s.maint.gen != gen {
		return nil // a switch was set here meanwhile; the next reconcile reads it back
	}
	if _, pending := s.maint.unsaved[stateKeyPushMaintenance]; !pending {
		s.applyPushMaintenance(found[stateKeyPushMaintenance])
	}
	if _, pending := s.maint.unsaved[stateKeyPopMaintenance]; !pending {
		s.applyPopMaintenance(found[stateKeyPopMaintenance])
	}
	return nil
}

// applyPushMaintenance sets the flag and holds or releases the drain.
func (s *Server) applyPushMaintenance(on bool) {
	if s.maint.push.Swap(on) == on {
		return
	}
	s.log.Info("push maintenance switched", "enabled", on)
	if s.spool == nil {
		return
	}
	if on {
		s.spool.Pause()
	} else {
		s.spool.Resume()
	}
}

func (s *Server) applyPopMaintenance(on bool) {
	if s.maint.pop.Swap(on) != on {
		s.log.Info("pop maintenance switched", "enabled", on)
	}
}

// setSwitch applies a switch here at once, then persists it; when the
// database cannot be written the reconcile writes it later.
func (s *Server) setSwitch(ctx context.Context, key string, on bool) {
	s.maint.mu.Lock()
	if key == stateKeyPushMaintenance {
		s.applyPushMaintenance(on)
	} else {
		s.applyPopMaintenance(on)
	}
	s.maint.unsaved[key] = on
	s.maint.gen++
	s.maint.mu.Unlock()
	saveCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	err := s.saveSwitch(saveCtx, key, on)
	s.maint.mu.Lock()
	defer s.maint.mu.Unlock()
	if err != nil {
		s.log.Warn("maintenance switch applied on this broker but not persisted yet; retried by the reconcile",
			"key", key, "enabled", on, "err", err)
		return
	}
	if v, ok := s.maint.unsaved[key]; ok && v == on {
		delete(s.maint.unsaved, key)
	}
}

func (s *Server) saveSwitch(ctx context.Context, key string, on bool) error {
	value := json.RawMessage(fmt.Sprintf(`{"enabled":%t}`, on))
	if err := s.q.SystemStateUpsert(ctx, db.SystemStateUpsertParams{Key: key, Value: value}); err != nil {
		return fmt.Errorf("write %s: %w", key, err)
	}
	return nil
}

// switchValue reads `enabled` of a switch request: a JSON boolean only.
func switchValue(body *api.MaintenanceRequest) (bool, error) {
	const msg = "enabled (boolean) is required"
	if body == nil || body.Enabled == nil {
		return false, badRequest(msg)
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
	return false, badRequest(msg)
}

// GetMaintenance reads the switches fresh (adopting them) and the spool.
func (s *Server) GetMaintenance(ctx context.Context, _ api.GetMaintenanceRequestObject) (api.GetMaintenanceResponseObject, error) {
	readCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := s.reconcileMaintenance(readCtx); err != nil {
		s.log.Warn("read maintenance switches; answering from memory", "err", err)
	}
	st := s.spoolStats()
	return api.GetMaintenance200JSONResponse{
		MaintenanceMode:    s.maint.push.Load(),
		PopMaintenanceMode: s.maint.pop.Load(),
		BufferedMessages:   st.PendingCount,
		BufferHealthy:      st.DbHealthy,
		BufferStats:        st,
	}, nil
}

// SetMaintenance turns push maintenance on or off.
func (s *Server) SetMaintenance(ctx context.Context, req api.SetMaintenanceRequestObject) (api.SetMaintenanceResponseObject, error) {
	on, err := switchValue(req.Body)
	if err != nil {
		return nil, err
	}
	s.setSwitch(ctx, stateKeyPushMaintenance, on)
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
	on := s.maint.pop.Load()
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
		return nil, err
	}
	s.setSwitch(ctx, stateKeyPopMaintenance, on)
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
	if s.spool == nil {
		out.Note = ptr("File buffer not configured: set FILE_BUFFER_DIR")
	}
	return out, nil
}

// spoolStats is the spool's state in the shape of the maintenance routes.
func (s *Server) spoolStats() api.SpoolStats {
	if s.spool == nil {
		return api.SpoolStats{Enabled: ptr(false), DbHealthy: true, Writable: ptr(false), DrainPaused: ptr(false)}
	}
	st := s.spool.Stats()
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
