package handlers

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// requireRuleAgrees fails if a push field's quick rule passes a value its
// schema in openapi.yaml refuses; it reports whether the rule passed it.
func requireRuleAgrees(t *testing.T, p pushItemProp, v string) bool {
	t.Helper()
	if !p.rule.passes(v) {
		return false
	}
	require.NoError(t, p.schema.VisitJSON(v), "%s: the rule passes %q", p.name, v)
	return true
}

// Every push field's schema compiles into a rule; the rule passes the usual
// values and never one the schema refuses.
func TestStringRuleAgreesWithSchema(t *testing.T) {
	t.Parallel()
	v, err := newRequestValidator()
	require.NoError(t, err)
	require.Len(t, v.pushItemProps, 4)
	values := []string{
		"", "q", "orders.eu-1_x", ".", "..", ".a", "..a", "...", "a/b", "a b", "é", "q\x00", "\xff",
		strings.Repeat("a", 255), strings.Repeat("a", 256), strings.Repeat("é", 255), strings.Repeat("é", 128),
		strings.Repeat("😀", 255), strings.Repeat("😀", 256),
		"0195a8c6-0000-7000-8000-000000000000", "0195A8C6-0000-7000-8000-00000000000F", "0195a8c6-0000-7000-8000-00000000000",
		"0195a8c6-0000-7000-8000-000000000000\n", "order-1001", "p\"\\",
	}
	for _, p := range v.pushItemProps {
		require.NotNil(t, p.rule, "%s: its schema does not compile into a rule", p.name)
		for _, val := range values {
			// On these values the rule decides as the schema does, so
			// the usual ones never need the schema walk.
			passed := requireRuleAgrees(t, p, val)
			require.Equal(t, p.schema.VisitJSON(val) == nil, passed, "%s: %q", p.name, val)
		}
	}
}

func FuzzStringRule(f *testing.F) {
	for _, seed := range []string{"", "q", "..", ".a", "a b", "0195a8c6-0000-7000-8000-000000000000", strings.Repeat("é", 200)} {
		f.Add(seed)
	}
	v, err := newRequestValidator()
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, val string) {
		for _, p := range v.pushItemProps {
			requireRuleAgrees(t, p, val)
		}
	})
}
