package proxy_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/proxy"
	"github.com/queenforgo/queen/proxy/usage"
)

// Usage through the pipeline: what a cluster pushes, pops, reads and
// configures is metered under its class (refusals by the broker bill no
// messages), shown by the console, and a monthly quota reached blocks its
// pushes (push_blocked) until the quota is raised.
func TestMeteringThroughThePipeline(t *testing.T) {
	t.Parallel()
	broker := startBroker(t)
	p := newPXDB(t)
	p.cell("cell-1", broker, nil)
	tn := p.bootstrap("acme")
	m, err := usage.New(usage.Config{Pool: p.pool, SpoolDir: t.TempDir(), WarnPercent: 50})
	require.NoError(t, err)
	base := startProxy(t, p, withPeople(t, p), func(c *proxy.Config) { c.Meter = m })

	require.Equal(t, http.StatusCreated, call(t, base, tn.Host, "POST", "/api/v1/push", tn.Key, push("q", 3)).status)
	require.Equal(t, http.StatusOK, call(t, base, tn.Host, "GET", "/api/v1/pop/queue/q?batch=10", tn.Key, nil).status)
	require.Equal(t, http.StatusNoContent, call(t, base, tn.Host, "GET", "/api/v1/pop/queue/q?batch=10", tn.Key, nil).status)
	require.Equal(t, http.StatusOK, call(t, base, tn.Host, "GET", "/api/v1/resources/queues", tn.Key, nil).status)
	require.Equal(t, http.StatusBadRequest, call(t, base, tn.Host, "POST", "/api/v1/push", tn.Key, map[string]any{"items": "no"}).status)

	sum := func(class string) (msgs, reqs, in, out int64) {
		t.Helper()
		require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT coalesce(sum(msgs), 0), coalesce(sum(reqs), 0), coalesce(sum(bytes_in), 0),
		    coalesce(sum(bytes_out), 0) FROM queen_proxy.usage_minutes WHERE cluster_id = $1 AND op_class = $2`, tn.Cluster, class).
			Scan(&msgs, &reqs, &in, &out))
		return
	}
	// The proxy meters a request after its answer went out: flush until
	// the last one is in.
	require.Eventually(t, func() bool {
		require.NoError(t, m.Flush(t.Context()))
		_, push, _, _ := sum(usage.ClassPush)
		_, delivery, _, _ := sum(usage.ClassDelivery)
		_, read, _, _ := sum(usage.ClassRead)
		return push == 2 && delivery == 2 && read == 1
	}, test5s, test10ms)
	msgs, reqs, in, out := sum(usage.ClassPush)
	require.EqualValues(t, 3, msgs, "the refused push bills no message")
	require.EqualValues(t, 2, reqs)
	require.Positive(t, in)
	require.Positive(t, out)
	msgs, reqs, _, out = sum(usage.ClassDelivery)
	require.EqualValues(t, 3, msgs, "the messages the pop handed out")
	require.EqualValues(t, 2, reqs)
	require.Positive(t, out)
	_, reqs, _, _ = sum(usage.ClassRead)
	require.EqualValues(t, 1, reqs)

	admin := login(t, base, tn.Host, "admin@acme.test", "pw-acme")
	u := send(t, base, tn.Host, "GET", "/api/console/usage?hours=1", nil, withCookie(admin))
	require.Equal(t, http.StatusOK, u.status, string(u.body))
	require.EqualValues(t, 60, u.json(t)["bucket_seconds"])
	require.NotEmpty(t, u.json(t)["series"])
	ov := send(t, base, tn.Host, "GET", "/api/console/overview", nil, withCookie(admin)).json(t)
	require.EqualValues(t, 6, ov["month"].(map[string]any)["msgs"], "messages pushed and delivered")

	// The monthly quota: 7 messages. One more push reaches it.
	p.exec(`SELECT queen_proxy.set_limit_override($1, '{"monthly_msgs_quota": 7}')`, tn.Cluster)
	require.Equal(t, http.StatusCreated, call(t, base, tn.Host, "POST", "/api/v1/push", tn.Key, push("q", 1)).status)
	require.Eventually(t, func() bool {
		require.NoError(t, m.Flush(t.Context()))
		msgs, _, _, _ := sum(usage.ClassPush)
		return msgs == 4
	}, test5s, test10ms)
	var warnings, blocks int
	require.NoError(t, p.pool.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE kind = 'cluster_monthly_quota_warning'),
	    count(*) FILTER (WHERE kind = 'cluster_monthly_quota_blocked') FROM queen_proxy.outbox`).Scan(&warnings, &blocks))
	require.Equal(t, 1, warnings)
	require.Equal(t, 1, blocks)
	require.Eventually(t, func() bool {
		return call(t, base, tn.Host, "POST", "/api/v1/push", tn.Key, push("q", 1)).status == http.StatusForbidden
	}, test5s, test10ms)
	refused(t, call(t, base, tn.Host, "POST", "/api/v1/push", tn.Key, push("q", 1)), http.StatusForbidden, "push_blocked")
	require.Equal(t, http.StatusNoContent, call(t, base, tn.Host, "GET", "/api/v1/pop/queue/empty?batch=1", tn.Key, nil).status,
		"pops go on")

	p.exec(`SELECT queen_proxy.set_limit_override($1, '{}')`, tn.Cluster)
	m.Maintain(t.Context())
	require.Eventually(t, func() bool {
		return call(t, base, tn.Host, "POST", "/api/v1/push", tn.Key, push("q", 1)).status == http.StatusCreated
	}, test5s, test10ms, "the block is lifted once the quota no longer applies")
}
