package e2e

import (
	"net/http"
	"testing"

	"github.com/queenforgo/queen/handlers"
)

// tenants: with native tenancy the header shows a tenant picker; the views
// show the picked tenant's queues only, and any UUID can be typed in.
func tenants(t *testing.T, br *browser) {
	const acme = "0a0a0a0a-0000-4000-8000-00000000000a"
	b := startBroker(t, nil, func(c *handlers.Config) { c.Tenancy = true })
	b.call("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "invoices", "payload": 1}}}, http.StatusCreated, nil)
	b.tenant = acme
	b.call("POST", "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "orders", "payload": 1}}}, http.StatusCreated, nil)
	p := br.newPage(t, b.url)

	// The default tenant first: its queue, not acme's.
	p.open("/queues", "queues")
	p.waitJS(`!document.getElementById('tenant').hidden`)
	p.waitJS(`document.querySelector('tr[data-queue="invoices"]') !== null`)
	p.waitJS(`document.querySelector('#tenant-select option[value="` + acme + `"]') !== null`)
	p.waitJS(`document.querySelector('tr[data-queue="orders"]') === null`)

	// Pick acme: its queue replaces the default tenant's, and the choice
	// is remembered by the browser.
	p.eval(`(() => { const s = document.getElementById('tenant-select'); s.value = '` + acme + `';
		s.dispatchEvent(new Event('change')); return 'ok'; })()`)
	p.waitJS(`document.querySelector('tr[data-queue="orders"]') !== null`)
	p.waitJS(`document.querySelector('tr[data-queue="invoices"]') === null`)
	p.waitJS(`localStorage.getItem('queen.tenant') === '` + acme + `'`)
	p.screenshot("tenants")

	// Other…: a malformed tenant is refused in place; a new one (owning
	// nothing yet) shows an empty broker.
	p.eval(`(() => { const s = document.getElementById('tenant-select'); s.value = 'other';
		s.dispatchEvent(new Event('change')); return 'ok'; })()`)
	p.waitJS(`!document.getElementById('tenant-input').hidden`)
	p.typeInto(`#tenant-input`, "acme\n")
	p.waitJS(`document.getElementById('tenant-input').classList.contains('invalid')`)
	p.eval(`(document.getElementById('tenant-input').value = '', 'ok')`)
	p.typeInto(`#tenant-input`, "0B0B0B0B-0000-4000-8000-00000000000B\n")
	p.waitJS(`localStorage.getItem('queen.tenant') === '0b0b0b0b-0000-4000-8000-00000000000b'`)
	p.waitJS(`document.querySelector('tr[data-queue="orders"]') === null && document.getElementById('view').dataset.ready === '1'`)
	p.waitText(`#view`, "No queues yet")
}
