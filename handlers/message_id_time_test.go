package handlers

import (
	"encoding/binary"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// The time-filtered message queries walk the primary key between these
// bounds (migration 0013): they must hold every id the broker makes at a
// time, and the open ends must cover every id.
func TestMessageIDTimeBounds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := uuid.Must(uuid.NewV7())
	var ms [8]byte
	copy(ms[2:], id[:6])
	unixMS := binary.BigEndian.Uint64(ms[:])

	var exactLow, exactHigh, inWindow, openEnds, clamped bool
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT
		queen.uuid_v7_from_ms($2) <= $1 AND $1 < queen.uuid_v7_from_ms($2 + 1),
		queen.uuid_v7_from_ms($2) > '00000000-0000-0000-0000-000000000000' AND queen.uuid_v7_from_ms(NULL) IS NULL,
		queen.message_id_floor(to_timestamp($2 / 1000.0) + interval '50 seconds') <= $1
			AND $1 < queen.message_id_ceiling(to_timestamp($2 / 1000.0) - interval '50 seconds'),
		queen.message_id_floor(NULL) = '00000000-0000-0000-0000-000000000000'
			AND queen.message_id_ceiling(NULL) = 'ffffffff-ffff-ffff-ffff-ffffffffffff',
		queen.message_id_floor('-infinity') = '00000000-0000-0000-0000-000000000000'
			AND queen.message_id_ceiling('infinity') > $1`,
		id, int64(unixMS)).Scan(&exactLow, &exactHigh, &inWindow, &openEnds, &clamped))
	require.True(t, exactLow, "the id lies in its millisecond")
	require.True(t, exactHigh, "a millisecond's floor is above zero, and NULL stays NULL")
	require.True(t, inWindow, "the bounds leave a minute's margin for clock skew")
	require.True(t, openEnds, "no time means no bound")
	require.True(t, clamped, "infinite times clamp")
}
