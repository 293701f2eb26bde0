package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TEN-2: the boot matrix of QUEEN_TENANCY_HEADER and the trusted-proxy
// statement (under either name), and the claim's interlocks.
func TestTenancyBootMatrix(t *testing.T) {
	t.Parallel()
	const jwt = "JWT_ENABLED"
	for _, tc := range []struct {
		name string
		env  map[string]string
		want Tenancy
		fail string // the one problem's prefix; "" means it boots
	}{
		{"all unset", map[string]string{}, Tenancy{}, ""},
		{"header off, proxy false", map[string]string{"QUEEN_TENANCY_HEADER": "false", "QUEEN_TENANCY_TRUSTED_PROXY": "false"}, Tenancy{}, ""},
		{"header off, proxy true", map[string]string{"QUEEN_TENANCY_HEADER": "off", "QUEEN_TENANCY_TRUSTED_PROXY": "true"},
			Tenancy{TrustedProxy: true}, ""},
		{"header on, proxy unset", map[string]string{"QUEEN_TENANCY_HEADER": "true"}, Tenancy{},
			"QUEEN_TENANCY_HEADER: is on but QUEEN_TENANCY_TRUSTED_PROXY is not true"},
		{"header on, proxy false", map[string]string{"QUEEN_TENANCY_HEADER": "1", "QUEEN_TENANCY_TRUSTED_PROXY": "no"}, Tenancy{},
			"QUEEN_TENANCY_HEADER: is on but"},
		{"header on, proxy true", map[string]string{"QUEEN_TENANCY_HEADER": "yes", "QUEEN_TENANCY_TRUSTED_PROXY": "TRUE"},
			Tenancy{Header: true, TrustedProxy: true}, ""},
		{"header on, reference name true", map[string]string{"QUEEN_TENANCY_HEADER": "true", "QUEEN_KV_TRUSTED_PROXY": "true"},
			Tenancy{Header: true, TrustedProxy: true}, ""},
		{"header on, reference name false", map[string]string{"QUEEN_TENANCY_HEADER": "true", "QUEEN_KV_TRUSTED_PROXY": "false"}, Tenancy{},
			"QUEEN_TENANCY_HEADER: is on but"},
		{"both names agree", map[string]string{"QUEEN_TENANCY_HEADER": "on", "QUEEN_KV_TRUSTED_PROXY": "1", "QUEEN_TENANCY_TRUSTED_PROXY": "true"},
			Tenancy{Header: true, TrustedProxy: true}, ""},
		{"both names disagree", map[string]string{"QUEEN_KV_TRUSTED_PROXY": "true", "QUEEN_TENANCY_TRUSTED_PROXY": "false"}, Tenancy{},
			"QUEEN_KV_TRUSTED_PROXY: is the reference's name of QUEEN_TENANCY_TRUSTED_PROXY and disagrees"},
		{"header not a boolean", map[string]string{"QUEEN_TENANCY_HEADER": "maybe"}, Tenancy{},
			`QUEEN_TENANCY_HEADER: "maybe" is not a boolean`},
		{"claim with tenancy and JWT", map[string]string{"QUEEN_TENANCY_HEADER": "true", "QUEEN_TENANCY_TRUSTED_PROXY": "true",
			jwt: "true", "JWT_SECRET": "s", "QUEEN_TENANT_CLAIM": " tenant "},
			Tenancy{Header: true, TrustedProxy: true, Claim: "tenant"}, ""},
		{"claim without JWT", map[string]string{"QUEEN_TENANCY_HEADER": "true", "QUEEN_TENANCY_TRUSTED_PROXY": "true",
			"QUEEN_TENANT_CLAIM": "tenant"}, Tenancy{}, "QUEEN_TENANT_CLAIM: is set but JWT_ENABLED is off"},
		{"claim with tenancy off", map[string]string{jwt: "true", "JWT_SECRET": "s", "QUEEN_TENANT_CLAIM": "tenant"}, Tenancy{},
			"QUEEN_TENANT_CLAIM: is set but QUEEN_TENANCY_HEADER is off"},
		{"blank claim is unset", map[string]string{"QUEEN_TENANT_CLAIM": "  "}, Tenancy{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(env(tc.env))
			if tc.fail != "" {
				p := problems(err)
				require.Len(t, p, 1, "one line naming the variable: %v", p)
				require.True(t, strings.HasPrefix(p[0], tc.fail), p[0])
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, c.Tenancy)
		})
	}
}
