package handlers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseTimestamp(t *testing.T) {
	t.Parallel()
	want := time.Date(2026, 3, 4, 5, 6, 7, 890000000, time.UTC)
	for in, exp := range map[string]time.Time{
		"2026-03-04T05:06:07.89Z":      want,
		"2026-03-04T05:06:07.89+00:00": want,
		"2026-03-04T07:06:07.89+02:00": want,
		"2026-03-04T05:06:07.890000":   want, // Python naive isoformat(): UTC
		"2026-03-04 05:06:07.89":       want,
		"2026-03-04":                   time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC),
	} {
		got, err := parseTimestamp(in)
		require.NoError(t, err, in)
		require.True(t, exp.Equal(got), "%s: got %s", in, got)
	}
	for _, bad := range []string{"", "yesterday", "2026-13-01", "1700000000"} {
		_, err := parseTimestamp(bad)
		require.Error(t, err, bad)
	}
}
