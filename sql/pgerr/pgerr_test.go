package pgerr

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

func TestTranslate(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return fmt.Errorf("insert: %w", &pgconn.PgError{Code: code, Message: "m"}) }
	for _, c := range []struct {
		name string
		err  error
		want error // nil: no sentinel
	}{
		{"no rows", pgx.ErrNoRows, ErrNotFound},
		{"foreign key", pg("23503"), ErrForeignKey},
		{"nowait lock", pg("55P03"), ErrLockNotAvailable},
		{"data exception", pg("22P05"), ErrInvalidInput},
		{"connection exception", pg("08006"), ErrUnavailable},
		{"admin shutdown", pg("57P01"), ErrUnavailable},
		{"demoted primary", pg("25006"), ErrUnavailable},
		{"socket died mid-statement", fmt.Errorf("claim partition: %w", io.ErrUnexpectedEOF), ErrUnavailable},
		{"socket closed", io.EOF, ErrUnavailable},
		{"closed transaction", pgx.ErrTxClosed, ErrUnavailable},
		{"unique violation stays unexpected", pg("23505"), nil},
		{"plain error stays unexpected", errors.New("boom"), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := Translate(c.err)
			require.ErrorIs(t, got, c.err, "the original error stays in the chain")
			for _, s := range []error{ErrUnavailable, ErrNotFound, ErrForeignKey, ErrLockNotAvailable, ErrInvalidInput} {
				require.Equal(t, s == c.want, errors.Is(got, s), "sentinel %v", s)
			}
			require.Equal(t, got, Translate(got), "translating twice changes nothing")
		})
	}
	require.NoError(t, Translate(nil))
}
