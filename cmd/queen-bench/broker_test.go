package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/sdk/brokertest"
	"github.com/queenforgo/queen/sql/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestScenariosAgainstABroker runs small push, consume and wakeup runs
// against the real broker binary: the requests the bench builds through
// the generated client are the ones the broker accepts, and every pushed
// message is consumed and acked.
func TestScenariosAgainstABroker(t *testing.T) {
	b := brokertest.Start(t, pgtest.NewDB(t))
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"push", "-max-messages", "500"}, []string{"| push |", "5 pushes of 100"}},
		{[]string{"consume", "-max-messages", "500"}, []string{"| consume |", "from 500 prefilled"}},
		{[]string{"wakeup", "-wakeups", "3"}, []string{"| wakeup |", "3 wake-ups"}},
		{
			[]string{"backlog", "-backlog-messages", "2500", "-backlog-partitions", "250", "-pop-samples", "3", "-admin-samples", "1", "-admin-interval", "0s"},
			[]string{"| backlog fill |", "3 pushes of up to 1000 items over 250 partitions", "| backlog pop group b10, backlog |", "3 pops of batch 10",
				"| GET /api/v1/resources/overview (overview) |", "| GET /api/v1/consumer-groups/lagging?minLagSeconds=3600&limit=101 (consumers) |"},
		},
	} {
		var out, errOut bytes.Buffer
		args := append(tc.args, "-url", b.URL, "-duration", "5s", "-producers", "2", "-consumers", "2", "-stats-settle", "0")
		require.Zero(t, run(args, &out, &errOut), "%s\n%s", out.String(), errOut.String())
		for _, w := range tc.want {
			require.Contains(t, out.String(), w)
		}
		require.NotContains(t, out.String(), "errors (first:")
	}
}
