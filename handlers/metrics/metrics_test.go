package metrics

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRegistryParkAndUnknownOp(t *testing.T) {
	t.Parallel()
	r := New()
	unpark := r.Park("q")
	require.Equal(t, int64(1), r.Queues()[0].Parked)
	unpark()
	unpark() // idempotent
	require.Equal(t, int64(0), r.Queues()[0].Parked)
	r.Park("")() // namespace pops are not counted
	require.Len(t, r.Queues(), 1)
	r.Request(Op(99))
	require.Equal(t, ProcessCounters{}, r.Process())
}
