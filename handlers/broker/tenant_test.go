package broker

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestNormalizeTenant(t *testing.T) {
	t.Parallel()
	const canon = "0a0a0a0a-0000-4000-8000-00000000abcd"
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{canon, canon, true},
		{strings.ToUpper(canon), canon, true},
		{" \t" + canon + "\r\n", canon, true},
		{DefaultTenant, DefaultTenant, true},
		{"", "", false},
		{"   ", "", false},
		{strings.ReplaceAll(canon, "-", ""), "", false},
		{canon + "0", "", false},
		{canon[:35], "", false},
		{"0a0a0a0a00000-4000-8000-00000000abcd", "", false},
		{"0a0a0a0a-0000-4000-8000-00000000abcg", "", false},
		{"0a0a0a0a-0000-4000-8000-0000000abcdé", "", false},
		{"{" + canon[1:35] + "}", "", false},
		{"urn:uuid:" + canon, "", false},
		{"0a0a0a0a-0000-4000-8000-00000000abc\x00", "", false},
	} {
		got, ok := NormalizeTenant(tc.in)
		require.Equal(t, tc.ok, ok, "%q", tc.in)
		require.Equal(t, tc.want, got, "%q", tc.in)
	}
}

// The header is read at a trust boundary: whatever NormalizeTenant accepts
// is a canonical UUID, stable under a second pass, spelled like the input.
func FuzzNormalizeTenant(f *testing.F) {
	for _, s := range []string{DefaultTenant, "0A0A0A0A-0000-4000-8000-00000000ABCD", " x ", "", "{}", strings.Repeat("-", 36)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, ok := NormalizeTenant(in)
		if !ok {
			require.Empty(t, got)
			return
		}
		id, err := uuid.Parse(got)
		require.NoError(t, err)
		require.Equal(t, id.String(), got)
		again, ok := NormalizeTenant(got)
		require.True(t, ok)
		require.Equal(t, got, again)
		require.True(t, strings.EqualFold(strings.Trim(in, " \t\n\r\v\f"), got))
		_, err = tenantOf(got)
		require.NoError(t, err)
	})
}

func TestTenantOfWantsTheCanonicalForm(t *testing.T) {
	t.Parallel()
	got, err := tenantOf("")
	require.NoError(t, err)
	require.Equal(t, DefaultTenant, got)
	_, err = tenantOf(strings.ToUpper("0a0a0a0a-0000-4000-8000-00000000abcd"))
	require.ErrorIs(t, err, ErrInvalid, "the adapter normalises; the broker refuses a second spelling")
	_, err = tenantOf("acme")
	require.ErrorIs(t, err, ErrInvalid)
	require.Equal(t, defaultTenantID, tenantUUID(DefaultTenant))
}
