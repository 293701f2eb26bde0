package hatest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A fault that disrupted no push recovers with the first push sent after
// the fault was injected and answered queued; a push sent before it ended
// does not count, and a disrupted push still needs a queued one after it.
// (CI once saw a failover disrupt nothing, and the run waited for a
// disrupted push that never came.)
func TestRecoveryOfAFaultThatDisruptedNothing(t *testing.T) {
	t.Parallel()
	fault := time.Date(2026, 12, 3, 20, 45, 0, 0, time.UTC)
	done := fault.Add(2 * time.Second)
	at := func(s float64) time.Time { return fault.Add(time.Duration(s * float64(time.Second))) }

	l := &load{answers: []pushAnswer{{sent: at(0.5), at: at(1), kind: "queued"}}}
	_, _, ok := l.recovery(fault, done, "")
	require.False(t, ok, "a push sent before the fault was injected proves nothing")

	l.answers = append(l.answers, pushAnswer{sent: at(2.5), at: at(3), kind: "queued"})
	disrupted, recovered, ok := l.recovery(fault, done, "")
	require.True(t, ok)
	require.Zero(t, disrupted)
	require.Equal(t, 3*time.Second, recovered)

	l.answers = append(l.answers, pushAnswer{sent: at(3), at: at(4), kind: "failed"})
	disrupted, _, ok = l.recovery(fault, done, "")
	require.False(t, ok, "a disrupted push needs a queued one sent after it")
	require.Equal(t, 1, disrupted)
}
