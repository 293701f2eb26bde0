package handlers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/broker"
	"github.com/queenforgo/queen/sql/pgerr"
)

// Expected outcomes are the typed responses openapi.yaml declares for each
// operation: the helpers below build them. A plain error returned by an
// operation is unexpected and answered by responseError: 503 when
// PostgreSQL is unreachable (clients retry and fail over), otherwise 500
// with an error id that is also logged.

// invalidInput is a 400 found while decoding, before any broker call.
type invalidInput struct{ msg string }

func (e invalidInput) Error() string { return e.msg }

// invalidf is an invalidInput with a formatted message.
func invalidf(format string, args ...any) error { return invalidInput{fmt.Sprintf(format, args...)} }

// invalidMessage reports whether err is invalid input, from the adapter's
// decoding or from the broker (broker.ErrInvalid: refused by its rules or
// by PostgreSQL), with the message for the client.
func invalidMessage(err error) (string, bool) {
	var in invalidInput
	if errors.As(err, &in) {
		return in.msg, true
	}
	if errors.Is(err, broker.ErrInvalid) {
		return err.Error(), true
	}
	return "", false
}

// badRequest is an operation's declared 400.
func badRequest[R ~struct{ api.BadRequestJSONResponse }](msg string) R {
	return R{api.BadRequestJSONResponse{Error: msg}}
}

// notFound is an operation's declared 404.
func notFound[R ~struct{ api.NotFoundJSONResponse }](msg string) R {
	return R{api.NotFoundJSONResponse{Error: msg}}
}

// unavailable is an operation's declared 503.
func unavailable[R ~struct{ api.UnavailableJSONResponse }](msg string) R {
	return R{api.UnavailableJSONResponse{Error: msg}}
}

// Refusals reported in 200 bodies (ack results, transactions, stream
// cycles): the wire texts of the broker's refusal sentinels.
const (
	errMessageNotFound = "Message not found"
	errInvalidLease    = "Invalid or expired lease"
	errBlockedByFailed = "Not applied: an earlier message of this partition failed in the same batch and will be redelivered"
	errStaleAck        = "Already applied: the consumer group's cursor is past this message " +
		"(a replayed or superseded cycle); nothing was committed"
	errNoCursor = "The consumer group holds no cursor on this partition: pop it before acking"
	// A stream cycle naming a partition of another tenant (or none).
	errPartitionNotFound = "Partition not found"
)

// refusalText is the wire text of a broker refusal.
func refusalText(err error) string {
	switch {
	case errors.Is(err, broker.ErrPartitionNotFound):
		return errPartitionNotFound
	case errors.Is(err, broker.ErrNotFound):
		return errMessageNotFound
	case errors.Is(err, broker.ErrLeaseLost):
		return errInvalidLease
	case errors.Is(err, broker.ErrBlocked):
		return errBlockedByFailed
	case errors.Is(err, broker.ErrStale):
		return errStaleAck
	case errors.Is(err, broker.ErrNoCursor):
		return errNoCursor
	}
	return err.Error()
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

// responseError answers an operation's unexpected error: a 503 when
// PostgreSQL is unreachable or the broker stops, or a 500 with an id that
// is also logged. Invalid input that reached it (a read route's value that
// PostgreSQL refused) still answers 400.
func (s *Server) responseError(w http.ResponseWriter, r *http.Request, err error) {
	err = pgerr.Translate(err) // the read routes' errors come straight from gen/db
	switch msg, invalid := invalidMessage(err); {
	case invalid:
		writeError(w, http.StatusBadRequest, msg)
	case errors.Is(err, broker.ErrUnavailable):
		s.metrics.DBError()
		s.log.Warn("database unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusServiceUnavailable, "database unavailable, retry later")
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
	default:
		s.metrics.DBError()
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
