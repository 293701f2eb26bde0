package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
	"github.com/queenforgo/queen/sql/pgtest"
)

// search types text into the header search box, which is emptied first.
func (p *page) search(text string) {
	p.t.Helper()
	p.eval(`(() => { const i = document.getElementById('search'); i.value = ''; i.focus(); return 'ok'; })()`)
	p.typeInto(`#search`, text)
}

// searchChoose types text and picks the result of kind with label (the
// first of that kind when label is "") with the mouse.
func (p *page) searchChoose(text, kind, label string) {
	p.t.Helper()
	p.search(text)
	sel := fmt.Sprintf(`#search-results .search-item[data-kind=%q]`, kind)
	if label != "" {
		sel = fmt.Sprintf(`#search-results .search-item[data-kind=%q][data-label=%q]`, kind, label)
	}
	p.waitJS(fmt.Sprintf(`document.querySelector(%q) !== null`, sel))
	p.waitJS(fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el) return false; el.dispatchEvent(new MouseEvent('mousedown', {bubbles: true})); return true; })()`, sel))
}

// waitRoute waits until the hash route starts with prefix and its view is on screen.
func (p *page) waitRoute(prefix, view string) {
	p.t.Helper()
	p.waitJS(fmt.Sprintf(`location.hash.startsWith(%q) && document.getElementById('view').dataset.view === %q && document.getElementById('view').dataset.ready === '1'`, prefix, view))
}

// fill sets a form field's value as typing would, with an input event.
func (p *page) fill(sel, value string) {
	p.t.Helper()
	p.waitJS(fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el) return false; el.value = %q; el.dispatchEvent(new Event('input', {bubbles: true})); return true; })()`, sel, value))
}

// headerSearch: names jump to their views as you type; message, transaction
// and trace ids are looked up and open the message.
func headerSearch(t *testing.T, br *browser) {
	b := startBroker(t, nil)
	b.workload()
	const traceID = "5f0c3a2e-9b1d-4c7e-8a6f-2d4b1e0c9a77"
	b.pushItems(client.PushItem{Queue: "orders", Partition: ptr("us"), TransactionId: ptr("o-traced"), TraceId: ptr(traceID),
		Payload: b.jsonOf(map[string]any{"order": 7})})
	var page struct {
		Messages []struct {
			ID            string `json:"id"`
			TransactionID string `json:"transactionId"`
		} `json:"messages"`
	}
	b.call("GET", "/api/v1/messages?queue=orders&partition=eu", nil, http.StatusOK, &page)
	messageID := ""
	for _, m := range page.Messages {
		if m.TransactionID == "o-4" {
			messageID = m.ID
		}
	}
	require.NotEmpty(t, messageID)
	p := br.newPage(t, b.url)
	p.open("/", "overview")

	// Every kind of name in one list.
	p.search("o")
	for _, kind := range []string{"queue", "group", "trace", "id"} {
		p.waitJS(fmt.Sprintf(`document.querySelector('#search-results .search-item[data-kind=%q]') !== null`, kind))
	}
	p.waitJS(`document.querySelector('#search-results .search-item[data-label="orders"]') !== null`)
	p.screenshot("search")
	// Keyboard: Escape closes, Enter takes the first result (a name match
	// comes before the id lookup).
	p.run(chromedp.SendKeys(`#search`, kb.Escape))
	p.waitJS(`document.getElementById('search-results').hidden`)
	p.search("ord")
	p.waitJS(`document.querySelector('#search-results .search-item.active[data-kind="queue"][data-label="orders"]') !== null`)
	p.run(chromedp.SendKeys(`#search`, kb.Enter))
	p.waitRoute("#/queues/orders", "queues")
	p.waitText(`[data-panel="Partitions"]`, "eu")

	p.searchChoose("analyt", "group", "analytics")
	p.waitRoute("#/consumers?group=analytics", "consumers")
	p.waitJS(`document.querySelector('tr[data-group="analytics"][data-queue="orders"]') !== null`)
	p.waitGone(`tr[data-group="__QUEUE_MODE__"]`)

	p.searchChoose("checkout", "trace", "checkout-42")
	p.waitRoute("#/traces?name=checkout-42", "traces")
	p.waitText(`.timeline`, "charged card")

	// Ids: a transaction id, a message id, a trace id; each opens the message.
	for _, c := range []struct{ text, tx, payload string }{
		{"o-3", "o-3", `"order": 3`},
		{messageID, "o-4", `"order": 4`},
		{traceID, "o-traced", `"order": 7`},
	} {
		p.search(c.text)
		p.waitJS(`document.querySelector('#search-results .search-item.active[data-kind="id"]') !== null`)
		p.run(chromedp.SendKeys(`#search`, kb.Enter))
		p.waitRoute("#/messages?", "messages")
		p.waitJS(fmt.Sprintf(`location.hash.includes('tid=' + encodeURIComponent(%q))`, c.tx))
		p.waitText(`.drawer`, c.tx)
		p.waitText(`.drawer [data-payload]`, c.payload)
	}
	p.waitText(`.drawer`, traceID)

	p.search("no-such-id")
	p.run(chromedp.SendKeys(`#search`, kb.Enter))
	p.waitToast("error", "No message of the last 7 days has the id “no-such-id”")

	// Ctrl-K focuses the box from anywhere.
	p.eval(`document.getElementById('search').blur() || 'ok'`)
	p.run(chromedp.KeyEvent("k", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	p.waitJS(`document.activeElement === document.getElementById('search')`)
}

// seekAndMigrate: a consumer group is moved back to a time and forward to
// another; the schema is copied to another database and compared.
func seekAndMigrate(t *testing.T, br *browser) {
	b := startBroker(t, nil)
	b.workload()
	p := br.newPage(t, b.url)

	// analytics completed o-5 on orders/us. Seeking to an hour ago (the
	// dialog's default, before the workload) makes it deliverable again.
	p.open("/consumers", "consumers")
	p.click(`tr[data-group="analytics"][data-queue="orders"] button[data-action="seek"]`)
	p.waitJS(`document.getElementById('confirm').open && document.querySelector('#confirm-extra input[data-seek]').value !== ''`)
	p.screenshot("consumers-seek")
	p.click(`#confirm-ok`)
	p.waitJS(`!document.getElementById('confirm').open`)
	p.waitToast("ok", "partition cursor(s) of analytics moved to")
	again := b.popPartition("orders", "us", client.PopPartitionParams{Batch: ptr(10), ConsumerGroup: ptr("analytics")})
	require.NotEmpty(t, again.Messages)
	require.Equal(t, "o-5", again.Messages[0].TransactionId, "the seek moved the cursor back")

	// Forward: a time after every message leaves nothing to deliver. The
	// first seek's toast goes first, so that the wait below sees the second.
	p.eval(`document.getElementById('toasts').replaceChildren() || 'ok'`)
	p.click(`tr[data-group="analytics"][data-queue="orders"] button[data-action="seek"]`)
	p.waitJS(`document.getElementById('confirm').open`)
	p.eval(`(() => { const d = new Date(Date.now() + 120000); const z = (n) => String(n).padStart(2, '0');
		const i = document.querySelector('#confirm-extra input[data-seek]');
		i.value = d.getFullYear() + '-' + z(d.getMonth() + 1) + '-' + z(d.getDate()) + 'T' + z(d.getHours()) + ':' + z(d.getMinutes()) + ':' + z(d.getSeconds());
		i.dispatchEvent(new Event('input', {bubbles: true})); return 'ok'; })()`)
	p.click(`#confirm-ok`)
	p.waitJS(`!document.getElementById('confirm').open`)
	p.waitToast("ok", "partition cursor(s) of analytics moved to")
	status, _ := b.rawCall("GET", "/api/v1/pop/queue/orders?batch=10&consumerGroup=analytics")
	require.Equal(t, http.StatusNoContent, status, "the seek to the future skipped every message")

	// Migration to an empty database of the same server.
	target, err := url.Parse(pgtest.NewEmptyDB(t))
	require.NoError(t, err)
	password, _ := target.User.Password()
	p.open("/migration", "migration")
	p.waitText(`[data-panel="Before you start"]`, "Push maintenance")
	p.waitText(`[data-panel="Progress"]`, "No migration has run")
	p.waitJS(`document.querySelector('button[data-action="start"]').disabled`)
	p.fill(`input[name="host"]`, target.Hostname())
	p.fill(`input[name="port"]`, target.Port())
	p.fill(`input[name="database"]`, target.Path[1:])
	p.fill(`input[name="user"]`, target.User.Username())
	p.fill(`input[name="password"]`, password)
	p.click(`button[data-action="test"]`)
	p.waitText(`[data-result]`, "connected")
	p.waitText(`[data-result]`, "PostgreSQL")
	// Trace rows stay behind; their tables are still created.
	p.click(`input[data-group="traces"]`)
	p.click(`button[data-action="start"]`)
	p.confirmDialog("")
	p.waitToast("ok", "Migration started")
	p.waitJS(`document.querySelector('[data-panel="Progress"] [data-status="complete"]') !== null`)
	p.waitText(`[data-panel="Progress"]`, "Migration complete")
	p.click(`button[data-action="validate"]`)
	p.waitText(`[data-validation]`, "some tables differ")
	p.waitJS(`document.querySelector('[data-validation] tr[data-table="message_traces"][data-match="false"]') !== null`)
	p.waitJS(`document.querySelector('[data-validation] tr[data-table="messages"][data-match="true"]') !== null`)
	p.waitJS(`document.querySelector('[data-validation] tr[data-table="queues"][data-match="true"]') !== null`)
	p.eval(`document.getElementById('toasts').replaceChildren() || 'ok'`)
	p.screenshot("migration")

	// Changing the target asks for a new connection test.
	p.fill(`input[name="database"]`, "elsewhere")
	p.waitJS(`document.querySelector('button[data-action="start"]').disabled && document.querySelector('[data-result]').innerText === ''`)

	p.click(`[data-panel="Progress"] .actions button`)
	p.waitToast("ok", "Migration state reset")
	p.waitText(`[data-panel="Progress"]`, "No migration has run")
	var st struct {
		Status string `json:"status"`
	}
	b.call("GET", "/api/v1/migration/status", nil, http.StatusOK, &st)
	require.Equal(t, "idle", st.Status)
}

// rawCall sends a request without a body and returns the status and body.
func (b *broker) rawCall(method, path string) (int, []byte) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.url+path, nil)
	require.NoError(b.t, err)
	res, err := http.DefaultClient.Do(req)
	require.NoError(b.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(b.t, err)
	return res.StatusCode, raw
}
