// Package e2e drives the dashboard in a real browser (headless chromium)
// against a real broker and PostgreSQL, and checks what is on screen.
package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
)

// TestDashboard runs the scenarios in tabs of one chromium, each against a
// broker and database of its own.
func TestDashboard(t *testing.T) {
	t.Parallel()
	br := startBrowser(t)
	t.Run("walkthrough", func(t *testing.T) { t.Parallel(); walkthrough(t, br) })
	t.Run("jwt", func(t *testing.T) { t.Parallel(); withJWT(t, br) })
	t.Run("empty and down", func(t *testing.T) { t.Parallel(); emptyAndDown(t, br) })
	t.Run("search", func(t *testing.T) { t.Parallel(); headerSearch(t, br) })
	t.Run("seek and migration", func(t *testing.T) { t.Parallel(); seekAndMigrate(t, br) })
	t.Run("tenants", func(t *testing.T) { t.Parallel(); tenants(t, br) })
	t.Run("lagging", func(t *testing.T) { t.Parallel(); laggingList(t, br) })
}

// laggingList: the consumer groups page lists the 100 pairs that lag
// longest and says that there are more, asking the broker for no more than
// that (a deep backlog has a pair per partition and group).
func laggingList(t *testing.T, br *browser) {
	b := startBroker(t, nil)
	var items []client.PushItem
	for i := range 150 {
		part, tx := fmt.Sprintf("p%03d", i), fmt.Sprintf("t%03d", i)
		items = append(items, client.PushItem{Queue: "wide", Partition: &part, TransactionId: &tx, Payload: b.jsonOf(i)})
	}
	b.pushItems(items...)
	b.popPartition("wide", "p000", client.PopPartitionParams{}) // the queue-mode group reads wide
	// Stored two hours ago, as pushes then would have stamped them: every
	// other partition lags over the page's default threshold (an hour).
	_, err := b.pool.Exec(t.Context(), `UPDATE queen.partitions SET created_at = created_at - interval '2 hours'`)
	require.NoError(t, err)
	_, err = b.pool.Exec(t.Context(), `UPDATE queen.messages SET created_at = created_at - interval '2 hours'`)
	require.NoError(t, err)
	p := br.newPage(t, b.url)
	p.open("/consumers", "consumers")
	p.waitJS(`document.querySelector('[data-panel="Lagging partitions"] [data-more]') !== null`)
	require.Equal(t, "100", p.eval(`String(document.querySelectorAll('[data-panel="Lagging partitions"] tbody tr').length)`))
	require.Equal(t, "true", p.eval(`String(performance.getEntriesByType('resource').some((e) => e.name.includes('/consumer-groups/lagging?') && e.name.includes('limit=101')))`))
}

// walkthrough visits every view of a broker with JWT off and a scripted
// workload: it watches messages arrive, inspects a payload, retries a dead
// letter, toggles both maintenance switches and deletes a queue.
func walkthrough(t *testing.T, br *browser) {
	b := startBroker(t, nil)
	start := time.Now()
	b.workload()
	t.Logf("workload in %v", time.Since(start).Round(time.Millisecond))
	p := br.newPage(t, b.url)

	// Overview, and the identity of a broker with auth off.
	p.open("/", "overview")
	p.waitText(`[data-stat="Queues"] .stat-value`, "3")
	p.waitText(`#identity-text`, "standalone · admin · auth off")
	p.waitText(`#health`, "connected")
	p.waitText(`[data-panel="Top queues by pending"]`, "orders")
	p.waitJS(`document.querySelector('[data-chart="Messages per second"] canvas') !== null`)
	p.screenshot("overview")
	// Refresh every 2 s from here on (remembered by the browser).
	p.eval(`localStorage.setItem('queen.refresh', '2000') || 'ok'`)

	// Queues.
	p.open("/queues", "queues")
	for _, q := range []string{"orders", "invoices", "emails"} {
		p.waitJS(`document.querySelector('tr[data-queue="` + q + `"]') !== null`)
	}
	require.Contains(t, p.textOf(`tr[data-queue="orders"]`), "shop")
	p.screenshot("queues")

	// Queue detail: partitions and the groups reading it.
	p.open("/queues/orders", "queues")
	p.waitText(`[data-panel="Partitions"]`, "eu")
	p.waitText(`[data-panel="Partitions"]`, "us")
	p.waitText(`[data-panel="Consumer groups"]`, "__QUEUE_MODE__")
	p.waitText(`[data-panel="Consumer groups"]`, "analytics")
	p.waitText(`[data-panel="Summary"]`, "checkout")
	p.screenshot("queue")

	// Messages flow in: a push shows up through the refresh loop alone.
	p.open("/messages?queue=orders", "messages")
	p.waitJS(`document.querySelector('tr[data-tx="o-6"]') !== null`)
	require.Contains(t, p.textOf(`tr[data-tx="o-1"]`), "dead_letter")
	require.Contains(t, p.textOf(`tr[data-tx="o-2"]`), "processing")
	b.push("orders", "eu", "o-new", map[string]any{"order": 99, "customer": "new"})
	p.waitJS(`document.querySelector('tr[data-tx="o-new"]') !== null`)
	// The refresh can be paused and resumed.
	p.click(`#refresh-pause`)
	p.waitText(`#refresh-pause`, "Resume")
	p.waitJS(`document.body.classList.contains('paused')`)
	p.click(`#refresh-pause`)
	p.waitText(`#refresh-pause`, "Pause")

	// Inspect a message: its payload and consumers.
	p.click(`tr[data-tx="o-3"] a.mono`)
	p.waitText(`.drawer [data-payload]`, `"customer": "ada"`)
	p.waitText(`.drawer`, "pending")
	p.waitText(`.drawer`, "__QUEUE_MODE__")
	p.screenshot("messages")

	// Dead letters: the reason, the payload, then a retry.
	p.open("/dlq", "dlq")
	p.waitText(`tr[data-tx="o-1"]`, "card declined")
	p.click(`tr[data-tx="o-1"] td`)
	p.waitText(`[data-payload="o-1"]`, `"order": 1`)
	p.screenshot("dlq")
	p.click(`tr[data-tx="o-1"] button.primary`)
	p.waitToast("ok", "Retried o-1: replayed into orders/eu as dlq:")
	p.waitGone(`tr[data-tx="o-1"]`)
	p.waitText(`[data-panel="Dead letters"]`, "No dead letters")
	var dlq struct {
		Total int `json:"total"`
	}
	b.call("GET", "/api/v1/dlq", nil, http.StatusOK, &dlq)
	require.Zero(t, dlq.Total)
	var msgs struct {
		Messages []struct {
			TransactionID string `json:"transactionId"`
		} `json:"messages"`
	}
	b.call("GET", "/api/v1/messages?queue=orders&partition=eu", nil, http.StatusOK, &msgs)
	replayed := false
	for _, m := range msgs.Messages {
		replayed = replayed || strings.HasPrefix(m.TransactionID, "dlq:")
	}
	require.True(t, replayed, "the retried message is back in orders/eu")

	// Consumer groups with their lag.
	p.open("/consumers", "consumers")
	p.waitJS(`document.querySelector('tr[data-group="analytics"][data-queue="orders"]') !== null`)
	p.waitJS(`document.querySelector('tr[data-group="__QUEUE_MODE__"][data-queue="orders"]') !== null`)
	p.screenshot("consumers")

	// A trace timeline.
	p.open("/traces?name=checkout-42", "traces")
	p.waitText(`.timeline`, "charged card")
	p.waitText(`.timeline`, "card declined")
	p.waitText(`[data-stat="Events"] .stat-value`, "2")
	p.screenshot("traces")

	// Analytics over a range.
	p.open("/analytics?range=60", "analytics")
	p.waitJS(`document.querySelector('[data-panel="Throughput"] [data-chart="Messages per second"] canvas') !== null`)
	p.waitText(`[data-panel="Per queue"]`, "emails")
	p.waitText(`[data-stat="Brokers reporting"] .stat-value`, "1")
	p.screenshot("analytics")
	p.click(`.segmented button:nth-child(4)`) // 24 hours
	p.waitJS(`location.hash.includes('range=1440') && document.getElementById('view').dataset.ready === '1'`)
	p.waitJS(`document.querySelector('[data-panel="Throughput"] [data-chart="Messages per second"] canvas') !== null`)

	// System: PostgreSQL statistics and the maintenance switches.
	p.open("/system", "system")
	p.waitText(`[data-panel="PostgreSQL"]`, "Cache hit ratio")
	p.waitText(`[data-panel="Disk buffer"]`, "Pending records")
	p.click(`input[data-maintenance="push"]`)
	p.confirmDialog("")
	p.waitToast("ok", "Maintenance mode ENABLED")
	p.waitText(`#banners`, "Push maintenance is ON")
	var m struct {
		Push bool `json:"maintenanceMode"`
		Pop  bool `json:"popMaintenanceMode"`
	}
	b.call("GET", "/api/v1/system/maintenance", nil, http.StatusOK, &m)
	require.True(t, m.Push)
	p.screenshot("system")
	p.click(`input[data-maintenance="push"]`) // off: no confirmation needed
	p.waitToast("ok", "Maintenance mode DISABLED")
	p.waitGone(`#banners .banner`)
	p.click(`input[data-maintenance="pop"]`)
	p.confirmDialog("")
	p.waitText(`#banners`, "Pop maintenance is ON")
	b.call("GET", "/api/v1/system/maintenance", nil, http.StatusOK, &m)
	require.True(t, m.Pop)
	require.False(t, m.Push)
	p.click(`input[data-maintenance="pop"]`)
	p.waitGone(`#banners .banner`)

	// Deleting a queue asks for its name first.
	p.open("/queues", "queues")
	p.click(`tr[data-queue="invoices"] button.danger`)
	p.confirmDialog("invoices")
	p.waitToast("ok", "Queue invoices deleted.")
	p.waitGone(`tr[data-queue="invoices"]`)
	b.call("GET", "/api/v1/resources/queues/invoices", nil, http.StatusNotFound, nil)

	// A deep link of the reference dashboard lands on its view.
	p.run(chromedp.Navigate(b.url + "/dlq"))
	p.waitJS(`location.pathname === '/' && location.hash === '#/dlq' && document.getElementById('view').dataset.ready === '1'`)
}

// withJWT: with JWT on the shell loads, says who is (not) signed in, takes a
// pasted token, and shows what the token's role may not read.
func withJWT(t *testing.T, br *browser) {
	b := startBroker(t, newAuth(t))
	b.token = signed(t, "ops", "admin")
	b.push("orders", "eu", "o-0", map[string]any{"order": 0})
	p := br.newPage(t, b.url)

	p.open("/", "overview")
	p.waitText(`#identity-text`, "signed out")
	p.waitJS(`!document.getElementById('token-panel').hidden`)
	p.waitText(`[data-panel="Cluster"]`, "Authentication required")
	p.screenshot("signed-out")

	p.typeInto(`#token-input`, "Bearer "+signed(t, "alice", "read-only"))
	p.click(`#token-panel button[type="submit"]`)
	p.waitText(`#identity-text`, "alice · read-only")
	p.waitText(`[data-stat="Queues"] .stat-value`, "1")
	p.waitJS(`document.getElementById('token-panel').hidden`)

	// The token survives a reload (session storage) and is sent on every call.
	p.open("/system", "system")
	p.waitText(`#identity-text`, "alice · read-only")
	p.waitText(`[data-panel="Maintenance"]`, "Not permitted")
	p.waitText(`[data-panel="PostgreSQL"]`, "Cache hit ratio")
	p.waitGone(`input[data-maintenance]`)

	p.open("/dlq", "dlq")
	p.click(`#token-toggle`)
	p.click(`#token-forget`)
	p.waitText(`#identity-text`, "signed out")
	p.waitText(`[data-panel="Dead letters"]`, "Authentication required")
}

// emptyAndDown: an empty database says so in each view; a broker that stops
// answering is reported, not crashed on.
func emptyAndDown(t *testing.T, br *browser) {
	b := startBroker(t, nil)
	p := br.newPage(t, b.url)

	p.open("/", "overview")
	p.waitText(`[data-panel="Cluster"]`, "The database is empty")
	p.waitText(`[data-panel="Top queues by pending"]`, "No queues yet")
	p.open("/queues", "queues")
	p.waitText(`[data-panel="Queues"]`, "No queues yet")
	p.open("/messages", "messages")
	p.waitText(`[data-panel="Messages"]`, "No message matches")
	p.open("/consumers", "consumers")
	p.waitText(`[data-panel="Groups"]`, "No consumer group yet")
	p.open("/traces", "traces")
	p.waitText(`[data-panel="Trace names"]`, "No trace recorded yet")
	p.open("/queues/nope", "queues")
	p.waitText(`[data-panel="Summary"]`, "Not found")
	p.open("/nowhere", "none")
	p.waitText(`#view`, "No view at /nowhere")
	p.open("/dlq", "dlq")
	p.waitText(`[data-panel="Dead letters"]`, "No dead letters")

	// How API answers map to what the views say, including the "not
	// available" state of a route this broker does not serve.
	require.Equal(t, "ok", p.evalAsync(`(async () => {
		const base = document.querySelector('script[type=module]').src.replace(/app\.js$/, '');
		const { kindOf } = await import(base + 'api.js');
		const { errorState } = await import(base + 'ui.js');
		const cases = [[404, 'no route for GET /api/v1/x', 'unavailable'], [405, '', 'unavailable'], [501, '', 'unavailable'],
			[404, 'Queue not found', 'not-found'], [401, '', 'auth'], [403, '', 'forbidden'], [400, '', 'bad'], [503, '', 'server']];
		const wrong = cases.filter(([s, m, k]) => kindOf(s, m) !== k);
		if (wrong.length) return JSON.stringify(wrong);
		return errorState({ kind: 'unavailable', message: '' }).textContent.includes('Not available') ? 'ok' : 'no not-available text';
	})()`))

	b.hs.CloseClientConnections()
	b.hs.Close()
	p.click(`#refresh-now`)
	p.waitText(`#health`, "broker unreachable")
	p.waitText(`[data-panel="Dead letters"]`, "Broker unreachable")
}
