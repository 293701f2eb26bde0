package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/cmd/queen/config"
	"github.com/queenforgo/queen/handlers/migration"
)

// pg_dump reaches an HA pair whose nodes listen on different ports: every
// host keeps its own port.
func TestSourceEndpointHostList(t *testing.T) {
	t.Parallel()
	e := sourceEndpoint(config.Postgres{
		Hosts:    []config.Host{{Name: "pg-a", Port: 5432}, {Name: "pg-b", Port: 6543}},
		Database: "queen", User: "u",
	})
	require.Equal(t, "pg-a", e.Host)
	require.Equal(t, 5432, e.Port)
	require.Equal(t, []migration.Server{{Host: "pg-b", Port: 6543}}, e.Fallbacks)
	require.Equal(t, "disable", e.SSLMode)
}
