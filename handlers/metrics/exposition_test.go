package metrics

import (
	"bytes"
	"math"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// Label values and help texts with the characters the format escapes come
// back intact through the Prometheus project's own parser.
func TestExpositionEscapesAndParses(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	e := NewExposition(&buf)
	e.Family("queen_test_gauge", "gauge", "Help with a backslash \\ and a\nnewline.")
	e.Sample("queen_test_gauge", 1.5, "queue", `we"ird\name`+"\n", "stat", "avg")
	e.Sample("queen_test_gauge", 42, "queue", "plain", "stat", "max")
	e.Family("queen_test_total", "counter", "A counter.")
	e.Sample("queen_test_total", 1e20)
	e.Family("queen_test_special", "gauge", "Specials.")
	e.Sample("queen_test_special", math.NaN(), "k", "nan")
	e.Sample("queen_test_special", math.Inf(1), "k", "inf")
	require.NoError(t, e.Flush())
	require.Contains(t, buf.String(), "queen_test_gauge{queue=\"plain\",stat=\"max\"} 42\n")

	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err, buf.String())
	g := fams["queen_test_gauge"]
	require.Equal(t, "Help with a backslash \\ and a\nnewline.", g.GetHelp())
	require.Equal(t, `we"ird\name`+"\n", g.GetMetric()[0].GetLabel()[0].GetValue())
	require.Equal(t, 1.5, g.GetMetric()[0].GetGauge().GetValue())
	require.Equal(t, 1e20, fams["queen_test_total"].GetMetric()[0].GetCounter().GetValue())
	require.True(t, math.IsNaN(fams["queen_test_special"].GetMetric()[0].GetGauge().GetValue()))
	require.True(t, math.IsInf(fams["queen_test_special"].GetMetric()[1].GetGauge().GetValue(), 1))
}

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
