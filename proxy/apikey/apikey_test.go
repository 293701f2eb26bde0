package apikey_test

import (
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/routes"
	"github.com/queenforgo/queen/proxy/apikey"
)

func TestGenerate(t *testing.T) {
	t.Parallel()
	format := regexp.MustCompile(`^qk_live_[A-Za-z0-9_-]{43}$`)
	hashFormat := regexp.MustCompile(`^[0-9a-f]{64}$`)
	seen := map[string]bool{}
	for range 1000 {
		key, hash, err := apikey.Generate("live")
		require.NoError(t, err)
		require.Regexp(t, format, key)
		require.Regexp(t, hashFormat, hash)
		require.Equal(t, apikey.Hash(key), hash)
		require.True(t, apikey.IsKey(key))
		require.False(t, seen[key])
		seen[key] = true
	}
	_, _, err := apikey.Generate("Live")
	require.Error(t, err)
	require.Equal(t, "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", apikey.Hash("test"))
}

func TestPermits(t *testing.T) {
	t.Parallel()
	all := []string{"produce", "consume", "admin", "read"}
	classes := []routes.ProxyClass{
		routes.ProxyProduce, routes.ProxyConsume, routes.ProxyQueueAdmin, routes.ProxyRead,
		routes.ProxyGatedRead, routes.ProxyGatedGrow, routes.ProxyGatedOpen, routes.ProxyGatedMixed,
		routes.ProxyOperator, routes.ProxyBlocked, routes.Unclassified,
	}
	want := map[string][]routes.ProxyClass{
		"produce": {routes.ProxyProduce, routes.ProxyGatedRead, routes.ProxyGatedGrow, routes.ProxyGatedOpen, routes.ProxyGatedMixed},
		"consume": {routes.ProxyConsume, routes.ProxyGatedRead, routes.ProxyGatedGrow, routes.ProxyGatedOpen, routes.ProxyGatedMixed},
		"admin":   {routes.ProxyQueueAdmin, routes.ProxyRead, routes.ProxyGatedRead},
		"read":    {routes.ProxyRead, routes.ProxyGatedRead},
	}
	for _, scope := range all {
		for _, c := range classes {
			require.Equal(t, slices.Contains(want[scope], c), apikey.Permits([]string{scope}, c), "%s on %s", scope, c)
		}
	}
	for _, c := range []routes.ProxyClass{routes.ProxyOperator, routes.ProxyBlocked, routes.Unclassified} {
		require.False(t, apikey.Permits(all, c), "no key reaches %q", c)
	}
	require.False(t, apikey.Permits(nil, routes.ProxyGatedRead))
}
