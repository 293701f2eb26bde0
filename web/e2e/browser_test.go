package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The browser side of the end-to-end tests: Debian's chromium, headless,
// driven over the DevTools protocol by chromedp.

// EnvChromium overrides the browser binary.
const EnvChromium = "QUEEN_CHROMIUM"

// EnvScreenshots, when set to a folder, makes the tests save a PNG of each
// main view there (docs/screenshots is made that way: see docs/dashboard.md).
const EnvScreenshots = "QUEEN_SCREENSHOTS"

// stepTimeout bounds one wait for something to appear on screen.
const stepTimeout = 20 * time.Second

// chromiumPath finds the browser. Without one the test fails: `make test`
// installs it first (scripts/ensure-chromium).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(EnvChromium); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium not found: `make test` installs it (scripts/ensure-chromium), or set " + EnvChromium)
	return ""
}

// browser is one chromium process; each test gets a tab of its own.
type browser struct {
	ctx context.Context
}

// startBrowser starts a fresh headless chromium with its own profile; it
// stops when t ends. Tabs of one browser share localStorage per origin, and
// every broker of a test has an origin (port) of its own.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1360, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first action starts the browser, which lives as long as the
	// context of that call: so no timeout on this one.
	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Logf("chromium started in %v", time.Since(start).Round(time.Millisecond))
	return &browser{ctx: ctx}
}

// page is one browser tab on the dashboard at base.
type page struct {
	t    *testing.T
	ctx  context.Context
	base string
	nav  atomic.Int64
}

// newPage opens a tab; it closes when t ends.
func (br *browser) newPage(t *testing.T, base string) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(br.ctx)
	t.Cleanup(cancel)
	// The first action on a context opens its tab, which lives as long as
	// the context of that call: no timeout here either.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1360, 900)); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	return &page{t: t, ctx: ctx, base: base}
}

// run performs actions, failing the test with the page's text on error.
func (p *page) run(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("browser: %v\n--- page text ---\n%s", err, p.text())
	}
}

// eval evaluates a JavaScript expression and returns its string value.
func (p *page) eval(expr string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v\n--- page text ---\n%s", expr, err, p.text())
	}
	return s
}

// evalAsync evaluates an expression whose value is a promise of a string.
func (p *page) evalAsync(expr string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("evaluate: %v", err)
	}
	return s
}

// text is what the page shows, for failure messages.
func (p *page) text() string {
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	return s
}

// open loads the dashboard document afresh at a hash route ("/queues") and
// waits until the view's first refresh is on screen. Each call is a new
// document, so nothing of the previous view lingers.
func (p *page) open(route, view string) {
	p.t.Helper()
	n := p.nav.Add(1)
	p.run(chromedp.Navigate(fmt.Sprintf("%s/?n=%d#%s", p.base, n, route)))
	p.waitJS(fmt.Sprintf(`(() => { const v = document.getElementById('view'); return v.dataset.view === %q && v.dataset.ready === '1'; })()`, view))
}

// waitJS polls a JavaScript expression until it is truthy.
func (p *page) waitJS(expr string) {
	p.t.Helper()
	t0 := time.Now()
	defer func() {
		if d := time.Since(t0); d > 700*time.Millisecond {
			p.t.Logf("slow wait %v: %.80s", d.Round(time.Millisecond), expr)
		}
	}()
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout+time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
	if err != nil {
		p.t.Fatalf("waiting for %s: %v\n--- page text ---\n%s", expr, err, p.text())
	}
}

// waitText waits until the first element matching sel contains want.
func (p *page) waitText(sel, want string) {
	p.t.Helper()
	p.waitJS(fmt.Sprintf(`(() => { const el = document.querySelector(%q); return !!el && el.innerText.includes(%q); })()`, sel, want))
}

// waitToast waits for a result toast (kind "ok" or "error") containing want.
func (p *page) waitToast(kind, want string) {
	p.t.Helper()
	p.waitJS(fmt.Sprintf(`[...document.querySelectorAll('.toast-%s')].some((el) => el.innerText.includes(%q))`, kind, want))
}

// waitGone waits until no element matches sel.
func (p *page) waitGone(sel string) {
	p.t.Helper()
	p.waitJS(fmt.Sprintf(`document.querySelector(%q) === null`, sel))
}

// textOf returns the innerText of the first element matching sel.
func (p *page) textOf(sel string) string {
	p.t.Helper()
	p.waitJS(fmt.Sprintf(`document.querySelector(%q) !== null`, sel))
	return strings.TrimSpace(p.eval(fmt.Sprintf(`document.querySelector(%q).innerText`, sel)))
}

// click clicks the first element matching sel as soon as one exists. The
// element is found and clicked in one step inside the page: the refresh
// loop re-renders panels, so a node found by one protocol call may be gone
// by the next.
func (p *page) click(sel string) {
	p.t.Helper()
	p.waitJS(fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el || el.disabled) return false; el.click(); return true; })()`, sel))
}

// typeInto types text into the first element matching sel.
func (p *page) typeInto(sel, text string) {
	p.t.Helper()
	p.run(chromedp.SendKeys(chromedp.CSS(sel), text))
}

// confirmDialog accepts the open confirmation dialog, typing typed first
// when the dialog asks for it.
func (p *page) confirmDialog(typed string) {
	p.t.Helper()
	p.waitJS(`document.getElementById('confirm').open`)
	if typed != "" {
		p.typeInto(`#confirm-extra input`, typed)
	}
	p.click(`#confirm-ok`)
	p.waitJS(`!document.getElementById('confirm').open`)
}

// screenshot saves the viewport as name.png when EnvScreenshots is set.
func (p *page) screenshot(name string) {
	p.t.Helper()
	dir := os.Getenv(EnvScreenshots)
	if dir == "" {
		return
	}
	// Only for the pictures, never to synchronise: let charts lay out and
	// the highlight of new rows fade.
	p.run(chromedp.Sleep(2600 * time.Millisecond))
	ctx, cancel := context.WithTimeout(p.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}
