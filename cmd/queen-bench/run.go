package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// runAll runs the chosen scenario, or every one for `all`, and returns the
// rows finished so far even when a run fails or a signal arrives.
func (b *bench) runAll(ctx context.Context) ([]result, error) {
	list := []string{b.cfg.Scenario}
	if b.cfg.Scenario == "all" {
		list = scenarios
	}
	defer b.cleanup()
	var results []result
	pushed := "" // the push run's queue: consume drains it instead of prefilling
	for _, name := range list {
		if ctx.Err() != nil {
			break
		}
		if (name == "ceiling" || name == "ceiling-min") && b.pg == nil {
			fmt.Fprintln(b.log, "queen-bench: skipping "+name+": no -pg and no PG_HOST")
			continue
		}
		if name == "backlog" {
			// Several rows, and no -duration: it ends when its samples are in.
			fmt.Fprintln(b.log, "queen-bench: backlog: running")
			rows, err := b.backlogScenario(ctx)
			for _, r := range rows {
				fmt.Fprintln(b.log, "queen-bench: "+r.summaryLine())
			}
			results = append(results, rows...)
			if err != nil {
				return results, fmt.Errorf("%s: %w", name, err)
			}
			continue
		}
		fmt.Fprintf(b.log, "queen-bench: %s: running for up to %s\n", name, b.cfg.Duration)
		var fn func(context.Context) (result, error)
		switch name {
		case "push":
			fn = b.pushScenario
		case "consume":
			fn = func(ctx context.Context) (result, error) { return b.consumeScenario(ctx, pushed) }
		case "mixed":
			fn = b.mixedScenario
		case "fanout":
			fn = b.fanoutScenario
		case "wakeup":
			fn = b.wakeupScenario
		case "ceiling":
			fn = func(ctx context.Context) (result, error) { return b.ceilingScenario(ctx, false) }
		case "ceiling-min":
			fn = func(ctx context.Context) (result, error) { return b.ceilingScenario(ctx, true) }
		case "parked":
			fn = b.parkedScenario
		}
		res, err := fn(ctx)
		if err != nil {
			return results, fmt.Errorf("%s: %w", name, err)
		}
		if name == "push" {
			pushed = b.queue("push")
		}
		fmt.Fprintln(b.log, "queen-bench: "+res.summaryLine())
		results = append(results, res)
	}
	applyCeiling(results)
	return results, nil
}

// cleanup deletes the bench queues with their messages, unless -keep.
func (b *bench) cleanup() {
	if b.cfg.Keep {
		return
	}
	for _, q := range b.queues {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		resp, err := b.api.DeleteQueueWithResponse(ctx, q, nil)
		if err == nil && resp.StatusCode() != http.StatusOK {
			err = errors.New(resp.HTTPResponse.Status)
		}
		cancel()
		if err != nil {
			fmt.Fprintf(b.log, "queen-bench: delete queue %s: %v\n", q, err)
		}
	}
}
