package hatest

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sql/pgtest/pgaf"
)

// TestFailoverSoak cycles faults under load for QUEEN_HA_SOAK (a duration,
// e.g. 10m): the primary node lost (keeper and postgres SIGKILLed, the
// monitor promotes the standby), perform failover, the primary's
// postmaster SIGKILLed, a broker SIGKILLed and restarted. The monitor's
// health checks are shortened (pgaf.Options.FastFailover). It asserts what
// the other failover tests assert and logs the figures docs/operations.md
// quotes. Without QUEEN_HA_SOAK it runs one fault, the node loss, which
// the shorter tests do not cover:
//
//	QUEEN_HA_SOAK=10m go test -run TestFailoverSoak -v -timeout 60m ./cmd/queen/hatest
func TestFailoverSoak(t *testing.T) {
	var duration time.Duration
	if raw := os.Getenv("QUEEN_HA_SOAK"); raw != "" {
		var err error
		duration, err = time.ParseDuration(raw)
		require.NoError(t, err, "QUEEN_HA_SOAK")
	}
	r := startHA(t, pgaf.Options{FastFailover: true})
	r.steady()
	began := time.Now()
	cycle := []fault{killPrimaryNode, performFailover, killPostmaster, killBroker}
	for i := 0; i == 0 || time.Since(began) < duration; i++ {
		r.inject(cycle[i%len(cycle)])
	}
	s := r.finish()

	byKind := map[string][]time.Duration{}
	for _, f := range r.faults {
		byKind[f.name] = append(byKind[f.name], f.recovery)
	}
	var parts []string
	for _, fl := range cycle {
		d := byKind[fl.name]
		if len(d) == 0 {
			continue
		}
		slices.Sort(d)
		parts = append(parts, fmt.Sprintf("%s ×%d: queued again after %s / %s / %s (min / median / max)",
			fl.name, len(d), d[0].Round(10*time.Millisecond), d[len(d)/2].Round(10*time.Millisecond), d[len(d)-1].Round(10*time.Millisecond)))
	}
	t.Logf("soak: %s under load, %d faults: %s", time.Since(began).Round(time.Second), len(r.faults), strings.Join(parts, "; "))
	t.Logf("soak: %s", s)
}
