package main

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/cmd/queen/config"
)

// TEN-2: tenancy without the trusted-proxy statement stops the boot
// before anything listens.
func TestRunExitsOnTenancyWithoutTrustedProxy(t *testing.T) {
	t.Setenv("QUEEN_TENANCY_HEADER", "true")
	require.Equal(t, 2, run())
}

// The boot log says when tenancy is on, in the reference's words, and
// nothing when it is off.
func TestLogTenancy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		t    config.Tenancy
		want []string
	}{
		{config.Tenancy{}, nil},
		{config.Tenancy{Header: true, TrustedProxy: true}, []string{"QUEEN_TENANCY_HEADER on — native tenant scoping ENABLED", "trusted from the proxy"}},
		{config.Tenancy{Header: true, TrustedProxy: true, Claim: "tid"}, []string{"native tenant scoping ENABLED", "tenant_claim=tid"}},
	} {
		var buf bytes.Buffer
		logTenancy(tc.t, slog.New(slog.NewTextHandler(&buf, nil)))
		if tc.want == nil {
			require.Empty(t, buf.String())
			continue
		}
		for _, w := range tc.want {
			require.Contains(t, buf.String(), w)
		}
	}
}
