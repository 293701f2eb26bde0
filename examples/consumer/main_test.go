package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sdk/brokertest"
	"github.com/queenforgo/queen/sql/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestExample runs the example against the real broker, as its doc says.
func TestExample(t *testing.T) {
	b := brokertest.Start(t, pgtest.NewDB(t))
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"-url", b.URL, "-n", "3", "-queue", "example"}, &out))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 6, out.String())
	for i, want := range []string{": queued", ": queued", ": queued",
		"order 0, total 10.00 (partition customer-42)", "order 1, total 20.00", "order 2, total 30.00"} {
		require.Contains(t, lines[i], want)
	}
}
