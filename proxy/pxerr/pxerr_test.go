package pxerr_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/proxy/pxerr"
)

func TestTranslate(t *testing.T) {
	t.Parallel()
	require.NoError(t, pxerr.Translate(nil))
	pg := func(code, msg string) error {
		return fmt.Errorf("query: %w", &pgconn.PgError{Code: code, Message: msg})
	}
	tests := []struct {
		err  error
		want []error
		text string
	}{
		{pgx.ErrNoRows, []error{pxerr.ErrNotFound}, "not found"},
		{pg("P0002", "no live key x on this cluster"), []error{pxerr.ErrNotFound}, "no live key x on this cluster"},
		{pg("22023", "role must be one of"), []error{pxerr.ErrInvalid, pxerr.ErrPermanent}, "role must be one of"},
		{pg("55000", "the last admin"), []error{pxerr.ErrInvalid}, "the last admin"},
		{pg("23514", "check"), []error{pxerr.ErrInvalid, pxerr.ErrPermanent}, "check"},
		{pg("23505", "duplicate key"), []error{pxerr.ErrConflict, pxerr.ErrPermanent}, "duplicate key"},
		{pg("42883", "no function"), []error{pxerr.ErrPermanent}, "no function"},
	}
	for _, tt := range tests {
		got := pxerr.Translate(tt.err)
		for _, s := range tt.want {
			require.ErrorIs(t, got, s, tt.text)
		}
		require.Equal(t, tt.text, got.Error())
		require.ErrorIs(t, got, tt.err, "the original stays in the chain")
	}
	for _, err := range []error{pg("08006", "connection failure"), pg("57P01", "shutdown"), errors.New("dial tcp: refused")} {
		got := pxerr.Translate(err)
		for _, s := range []error{pxerr.ErrNotFound, pxerr.ErrInvalid, pxerr.ErrConflict, pxerr.ErrPermanent} {
			require.NotErrorIs(t, got, s, err.Error())
		}
	}
}
