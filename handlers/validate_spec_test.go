package handlers

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/api"
)

// The validators' spec, decoded as JSON, is the document the generated
// loader builds: the same operations, parameters, schemas and resolved
// references.
func TestLoadSpecMatchesGenerated(t *testing.T) {
	t.Parallel()
	got, err := loadSpec()
	require.NoError(t, err)
	want, err := api.GetSpec()
	require.NoError(t, err)
	gotJSON, err := json.Marshal(got)
	require.NoError(t, err)
	wantJSON, err := json.Marshal(want)
	require.NoError(t, err)
	require.JSONEq(t, string(wantJSON), string(gotJSON))
	require.NotEmpty(t, got.Paths.Map())
	for path, item := range want.Paths.Map() {
		for method, op := range item.Operations() {
			gotItem := got.Paths.Value(path)
			require.NotNil(t, gotItem, path)
			gotOp := gotItem.GetOperation(method)
			require.NotNil(t, gotOp, "%s %s", method, path)
			require.Len(t, gotOp.Parameters, len(op.Parameters), "%s %s", method, path)
			for i, p := range op.Parameters {
				require.NotNil(t, gotOp.Parameters[i].Value, "%s %s parameter %d unresolved", method, path, i)
				require.Equal(t, p.Value.Name, gotOp.Parameters[i].Value.Name)
			}
			if op.RequestBody != nil {
				require.NotNil(t, gotOp.RequestBody.Value, "%s %s body unresolved", method, path)
			}
		}
	}
	for name, s := range got.Components.Schemas {
		require.NotNil(t, s.Value, "schema %s unresolved", name)
	}
}

// The broker's HTTP chain and its spool replay share one parsed spec.
func TestValidatorParsedOnce(t *testing.T) {
	t.Parallel()
	a, err := sharedValidator()
	require.NoError(t, err)
	b, err := sharedValidator()
	require.NoError(t, err)
	require.Same(t, a, b)
	require.Same(t, a.doc, b.doc)
}
