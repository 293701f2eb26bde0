package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// adminRoute is a GET the dashboard (web/static/assets) sends on its
// refresh timer: path may hold {queue}, the backlog queue (the queue
// page's routes); minutes > 0 adds the from/to window the page asks for.
type adminRoute struct {
	path    string
	minutes int
}

// dashboardPage is one page of the dashboard and the routes its panels
// fetch on every refresh (the views' panel loaders).
type dashboardPage struct {
	name   string
	routes []adminRoute
}

// shellRoutes are fetched on every refresh of every page (app.js).
var shellRoutes = []adminRoute{
	{"/health", 0}, {"/auth/me", 0}, {"/api/v1/tenants", 0}, {"/api/v1/system/maintenance", 0},
}

var dashboardPages = []dashboardPage{
	{"overview", []adminRoute{
		{"/api/v1/resources/overview", 0}, {"/api/v1/status", 60}, {"/api/v1/resources/queues", 0}, {"/api/v1/consumer-groups", 0},
	}},
	{"queues", []adminRoute{{"/api/v1/resources/queues", 0}, {"/api/v1/analytics/queue-ops", 15}}},
	{"queue", []adminRoute{
		{"/api/v1/resources/queues/{queue}?limit=0", 0}, {"/api/v1/resources/partitions?queue={queue}&limit=1000", 0},
		{"/api/v1/consumer-groups", 0}, {"/api/v1/analytics/queue-ops?queue={queue}", 60},
	}},
	// minLagSeconds: the page's default threshold; it lists 100 pairs and
	// asks for one more to tell whether there are others (a broker before
	// the limit answers every pair, as its dashboard asked for).
	{"consumers", []adminRoute{{"/api/v1/consumer-groups", 0}, {"/api/v1/consumer-groups/lagging?minLagSeconds=3600&limit=101", 0}}},
	{"analytics", []adminRoute{
		{"/api/v1/status", 60}, {"/api/v1/analytics/queue-ops", 60},
		{"/api/v1/analytics/worker-metrics", 60}, {"/api/v1/analytics/retention", 60},
	}},
	{"messages", []adminRoute{{"/api/v1/messages?limit=100&offset=0", 60}}},
	{"dead letters", []adminRoute{{"/api/v1/dlq?limit=100&offset=0", 0}, {"/api/v1/status", 0}}},
	{"traces", []adminRoute{{"/api/v1/traces/names?limit=50", 0}}},
	{"system", []adminRoute{
		{"/api/v1/status/buffers", 0}, {"/metrics", 0}, {"/api/v1/analytics/system-metrics", 60}, {"/api/v1/analytics/postgres-stats", 0},
	}},
}

// backlogPageSettle is the pause before each page, in -admin-interval: the
// recomputations the previous page's polls started in the broker end
// before this page is timed, as when a user stays on a page for a while.
const backlogPageSettle = 5

// routeTimes are the samples of one route on one page (or of a shell route
// on every page).
type routeTimes struct {
	page  string
	route adminRoute
	rec   recorder
	first []time.Duration // the first refresh of each page
	idle  []time.Duration // the refresh after -admin-idle
	size  int64
	fails tally
}

// backlogAdmin polls the dashboard page by page, as a browser left on each
// page does: -admin-samples+1 refreshes per page, -admin-interval apart,
// each refresh sending the shell's and the page's routes at once (the
// dashboard's Promise.all) and timing each answer. The first refresh of a
// page is reported apart ("first"): it is what opening the page costs when
// nothing was asked before. Each page starts after backlogPageSettle intervals. One row per page and route, one per shell route
// over all pages.
func (b *bench) backlogAdmin(ctx context.Context, queue string) ([]result, error) {
	var all []*routeTimes
	shell := make([]*routeTimes, len(shellRoutes))
	for i, r := range shellRoutes {
		shell[i] = &routeTimes{page: "every page", route: r}
		all = append(all, shell[i])
	}
	if b.cfg.AdminDelay > 0 {
		fmt.Fprintf(b.log, "queen-bench: backlog: asking nothing for %s before the first page\n", b.cfg.AdminDelay)
		sleepUntil(ctx, time.Now().Add(b.cfg.AdminDelay))
	}
	var pages [][]*routeTimes
	for _, page := range dashboardPages {
		sleepUntil(ctx, time.Now().Add(backlogPageSettle*b.cfg.AdminInterval))
		fmt.Fprintf(b.log, "queen-bench: backlog: polling the %s page\n", page.name)
		times := slices.Clone(shell)
		for _, r := range page.routes {
			rt := &routeTimes{page: page.name, route: r}
			times = append(times, rt)
			all = append(all, rt)
		}
		pages = append(pages, times)
		for round := range b.cfg.AdminSamples + 1 {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			next := time.Now().Add(b.cfg.AdminInterval)
			b.refreshPage(ctx, times, queue, func(rt *routeTimes, d time.Duration) {
				if round == 0 {
					rt.first = append(rt.first, d)
				} else {
					rt.rec.add(d)
				}
			})
			sleepUntil(ctx, next)
		}
	}
	// Opening the pages after a pause: each page once, one after the
	// other, as a user coming back clicks through them.
	if b.cfg.AdminIdle > 0 {
		fmt.Fprintf(b.log, "queen-bench: backlog: asking nothing for %s\n", b.cfg.AdminIdle)
		sleepUntil(ctx, time.Now().Add(b.cfg.AdminIdle))
		for _, times := range pages {
			b.refreshPage(ctx, times, queue, func(rt *routeTimes, d time.Duration) { rt.idle = append(rt.idle, d) })
		}
	}
	results := make([]result, len(all))
	for i, rt := range all {
		res := result{
			Scenario: "GET " + strings.ReplaceAll(rt.route.path, "{queue}", "<backlog>") + " (" + rt.page + ")",
			Command:  b.command("backlog", "admin-samples", "admin-interval"),
			Latency:  rt.rec.summary(),
			NoRate:   true,
			Commits:  -1, PeakRSS: -1,
		}
		met := "met"
		if res.Latency.P99 >= 100*time.Millisecond {
			met = "missed"
		}
		window := ""
		if rt.route.minutes > 0 {
			window = fmt.Sprintf("last %d min; ", rt.route.minutes)
		}
		firsts := make([]string, len(rt.first))
		for j, d := range rt.first {
			firsts[j] = fmtLatency(d)
		}
		res.note(fmt.Sprintf("%s%d samples, max %s, first refresh %s; %d bytes; < 100 ms: %s",
			window, res.Latency.N, fmtLatency(res.Latency.Max), strings.Join(firsts, "/"), rt.size, met))
		if len(rt.idle) > 0 {
			idle := make([]string, len(rt.idle))
			for j, d := range rt.idle {
				idle[j] = fmtLatency(d)
			}
			res.note(fmt.Sprintf("after %s asking nothing %s", b.cfg.AdminIdle, strings.Join(idle, "/")))
		}
		res.note(rt.fails.errorNote())
		results[i] = res
	}
	return results, nil
}

// refreshPage sends the routes of one refresh of a page at once (the
// dashboard's Promise.all) and hands each answer's time to record.
func (b *bench) refreshPage(ctx context.Context, times []*routeTimes, queue string, record func(*routeTimes, time.Duration)) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, rt := range times {
		wg.Go(func() {
			d, size, err := b.getRoute(ctx, rt.route, queue)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				rt.fails.fail(err)
				return
			}
			rt.size = size
			record(rt, d)
		})
	}
	wg.Wait()
}

// getRoute sends one GET and reads the whole answer. It goes through the
// bench's HTTP client rather than the generated one: the answer is only
// measured, never decoded.
func (b *bench) getRoute(ctx context.Context, r adminRoute, queue string) (time.Duration, int64, error) {
	target := b.base + strings.ReplaceAll(r.path, "{queue}", url.PathEscape(queue))
	if r.minutes > 0 {
		to := time.Now().UTC()
		from := to.Add(-time.Duration(r.minutes) * time.Minute)
		sep := "?"
		if strings.Contains(target, "?") {
			sep = "&"
		}
		target += sep + "from=" + from.Format(time.RFC3339Nano) + "&to=" + to.Format(time.RFC3339Nano)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	size, err := io.Copy(io.Discard, resp.Body)
	d := time.Since(start)
	resp.Body.Close()
	if err != nil {
		return 0, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("GET %s: status %d", r.path, resp.StatusCode)
	}
	return d, size, nil
}
