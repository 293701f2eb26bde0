package handlers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrUnavailable means PostgreSQL could not be reached; the answer is 503 so
// that clients retry and fail over.
var ErrUnavailable = errors.New("database unavailable")

// errBadRequest carries a 400 message out of a handler.
type errBadRequest struct{ msg string }

func (e errBadRequest) Error() string { return e.msg }

func badRequest(msg string) error { return errBadRequest{msg: msg} }

// classifyDB is the one translator of database errors: connection-level
// failures become ErrUnavailable, everything else stays an unexpected error.
// No handler inspects pgx errors itself.
func classifyDB(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "08", "57": // connection exception, operator intervention (shutdown)
			return errors.Join(ErrUnavailable, err)
		}
		return err
	}
	var netErr net.Error
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.Timeout(err) || errors.Is(err, pgx.ErrTxClosed) {
		return errors.Join(ErrUnavailable, err)
	}
	return err
}

// isForeignKeyViolation reports a row that points at a deleted parent, which
// happens when a cached queue was deleted by another broker.
func isForeignKeyViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23503"
}

// isLockNotAvailable reports a NOWAIT lock that another transaction holds.
func isLockNotAvailable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

func writeError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// requestError answers input the generated decoder rejected.
func (s *Server) requestError(w http.ResponseWriter, r *http.Request, err error) {
	var mbe *http.MaxBytesError
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, "Empty request body")
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		writeError(w, http.StatusBadRequest, "Invalid JSON: "+errors.Unwrap(err).Error())
	case errors.As(err, &typeErr):
		writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid request body at %s: expected %s, got %s",
			strings.ReplaceAll(typeErr.Field, ".", "/"), typeErr.Type, typeErr.Value))
	default:
		writeError(w, http.StatusBadRequest, err.Error())
	}
}

// responseError answers a handler's error: a 400 it raised on purpose, a 503
// when PostgreSQL is unreachable, or a 500 with an id that is also logged.
func (s *Server) responseError(w http.ResponseWriter, r *http.Request, err error) {
	var br errBadRequest
	var pgErr *pgconn.PgError
	var spoolErr errSpoolUnavailable
	switch {
	case errors.As(err, &br):
		writeError(w, http.StatusBadRequest, br.msg)
	case errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22"):
		// A data exception: PostgreSQL refused a value the client sent
		// (e.g. a JSON string with \u0000 or a lone surrogate). Nothing
		// was committed; the client must change the request.
		writeError(w, http.StatusBadRequest, "invalid value: "+pgErr.Message)
	case errors.As(err, &spoolErr):
		// Not logged per request: the spool logs why once per run of failures.
		writeError(w, http.StatusServiceUnavailable, spoolErr.msg)
	case errors.Is(classifyDB(err), ErrUnavailable):
		s.cfg.Metrics.DBError()
		s.log.Warn("database unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusServiceUnavailable, "database unavailable, retry later")
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
	default:
		s.cfg.Metrics.DBError()
		id := errorID()
		s.log.Error("request failed", "error_id", id, "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error (id "+id+")")
	}
}

func errorID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
