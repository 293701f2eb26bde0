package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/migration"
)

// migrationTarget maps the request's target to an endpoint; port may be a
// string or a number.
func migrationTarget(host, database, user string, password *string, port *json.RawMessage, ssl *bool) (migration.Endpoint, error) {
	e := migration.Endpoint{Host: host, Database: database, User: user, Password: deref(password, ""), Port: 5432, SSLMode: "disable"}
	if deref(ssl, false) {
		e.SSLMode = "require"
	}
	if port != nil && len(*port) > 0 && string(*port) != "null" {
		raw := strings.Trim(string(*port), `"`)
		if raw != "" {
			n, err := strconv.Atoi(raw)
			if err != nil || n < 1 || n > 65535 {
				return e, invalidf("port must be a number between 1 and 65535")
			}
			e.Port = n
		}
	}
	return e, nil
}

func (s *Server) migrationRunner() (*migration.Runner, error) {
	if s.cfg.Migration == nil {
		return nil, migration.ErrToolsMissing
	}
	return s.cfg.Migration, s.cfg.Migration.Available()
}

// MigrationTestConnection tries to connect to the target.
func (s *Server) MigrationTestConnection(ctx context.Context, req api.MigrationTestConnectionRequestObject) (api.MigrationTestConnectionResponseObject, error) {
	b := req.Body
	target, err := migrationTarget(b.Host, b.Database, b.User, b.Password, b.Port, b.Ssl)
	if err != nil {
		return badRequest[api.MigrationTestConnection400JSONResponse](err.Error()), nil
	}
	version, err := migration.TestConnection(ctx, target)
	if err != nil {
		return api.MigrationTestConnection200JSONResponse{Success: false, Message: "Connection failed", Error: ptr(err.Error())}, nil
	}
	return api.MigrationTestConnection200JSONResponse{Success: true, Message: "Connection successful", Version: ptr(version)}, nil
}

// MigrationStart starts a migration in the background.
func (s *Server) MigrationStart(ctx context.Context, req api.MigrationStartRequestObject) (api.MigrationStartResponseObject, error) {
	b := req.Body
	r, err := s.migrationRunner()
	if err != nil {
		return api.MigrationStart501JSONResponse{Error: err.Error()}, nil
	}
	target, err := migrationTarget(b.Host, b.Database, b.User, b.Password, b.Port, b.Ssl)
	if err != nil {
		return badRequest[api.MigrationStart400JSONResponse](err.Error()), nil
	}
	opts := migration.Options{Schema: deref(b.Schema, "")}
	if b.ExcludeTableData != nil {
		opts.ExcludeTableData = *b.ExcludeTableData
	}
	switch err := r.Start(target, opts); {
	case errors.Is(err, migration.ErrRunning):
		return api.MigrationStart409JSONResponse{Error: "Migration already in progress"}, nil
	case errors.Is(err, migration.ErrSameDatabase):
		return badRequest[api.MigrationStart400JSONResponse]("the target is this broker's own database"), nil
	case errors.Is(err, migration.ErrToolsMissing):
		return api.MigrationStart501JSONResponse{Error: err.Error()}, nil
	case err != nil:
		return nil, err
	}
	s.log.Info("migration started", "target_host", target.Host, "target_db", target.Database)
	return api.MigrationStart202JSONResponse{Status: "started", Message: "Migration started. Poll /api/v1/migration/status for progress."}, nil
}

// MigrationStatus answers the progress of this broker's migration.
func (s *Server) MigrationStatus(ctx context.Context, _ api.MigrationStatusRequestObject) (api.MigrationStatusResponseObject, error) {
	st := migration.Status{Status: migration.StatusIdle}
	if s.cfg.Migration != nil {
		st = s.cfg.Migration.Status()
	}
	resp := api.MigrationStatus200JSONResponse{
		Status: api.MigrationStatusStatus(st.Status), CurrentStep: st.CurrentStep,
		ElapsedSeconds: float64(st.Elapsed.Milliseconds()/100) / 10,
	}
	if st.Error != "" {
		resp.Error = ptr(st.Error)
	}
	if st.DumpOutput != "" {
		resp.DumpOutput = ptr(st.DumpOutput)
	}
	if st.RestoreOutput != "" {
		resp.RestoreOutput = ptr(st.RestoreOutput)
	}
	return resp, nil
}

// MigrationValidate compares the row counts of the source and the target.
func (s *Server) MigrationValidate(ctx context.Context, req api.MigrationValidateRequestObject) (api.MigrationValidateResponseObject, error) {
	b := req.Body
	target, err := migrationTarget(b.Host, b.Database, b.User, b.Password, b.Port, b.Ssl)
	if err != nil {
		return badRequest[api.MigrationValidate400JSONResponse](err.Error()), nil
	}
	if s.cfg.Migration == nil {
		return api.MigrationValidate500JSONResponse{Success: false, Error: ptr("migrations are not configured on this broker")}, nil
	}
	counts, err := s.cfg.Migration.Validate(ctx, target, "")
	if err != nil {
		return api.MigrationValidate500JSONResponse{Success: false, Error: ptr(err.Error())}, nil
	}
	resp := api.MigrationValidate200JSONResponse{Success: true, AllMatch: ptr(true)}
	tables := make([]struct {
		Match       bool   `json:"match"`
		SourceCount int    `json:"sourceCount"`
		Table       string `json:"table"`
		TargetCount int    `json:"targetCount"`
	}, len(counts))
	for i, c := range counts {
		t := &tables[i]
		t.Table, t.SourceCount, t.TargetCount = c.Table, int(c.Source), int(c.Target)
		t.Match = c.Source == c.Target && c.Source >= 0
		if !t.Match {
			resp.AllMatch = ptr(false)
		}
	}
	resp.Tables = &tables
	return resp, nil
}

// MigrationReset forgets the last migration's outcome.
func (s *Server) MigrationReset(ctx context.Context, _ api.MigrationResetRequestObject) (api.MigrationResetResponseObject, error) {
	if s.cfg.Migration != nil {
		if err := s.cfg.Migration.Reset(); errors.Is(err, migration.ErrRunning) {
			return api.MigrationReset409JSONResponse{Error: "Cannot reset while migration is in progress"}, nil
		}
	}
	return api.MigrationReset200JSONResponse{Status: "idle", Message: "Migration state reset"}, nil
}
