package main

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The broker's soft memory limit, applied when GOMEMLIMIT is unset
// (config.Server.SoftMemoryLimit). At GOGC 200 the heap grows to three
// times what survives a collection, and it keeps that size until two
// collections after the load that made it: a burst of 10,000 long-polls
// (docs/benchmarks.md, "Round 4: memory of a parked long-poll") left
// 250-290 MB of RSS behind for a live heap of about 35 MB. Under the limit
// the collector starts earlier and the scavenger gives pages back.
//
// The limit never binds below twice the live heap plus the runtime's own
// memory: the collector then runs at most as often as Go's default GOGC
// 100 would make it, never back to back (which a fixed limit under the
// live heap would do, up to half the CPU).
//
// The base, 44 MiB of the runtime's memory, is what keeps the flat-out
// fan-out run (live heap 10-13 MB, 7 MB of stacks and metadata) under the
// RSS target of 64 MB with the binary's 18-19 MB of mapped pages: there it
// binds, and the heap grows to about 2.5 times what is live instead of 3
// (docs/benchmarks.md, "Round 6: memory of the fan-out run"; the fan-out
// run's allocations per delivery were cut first, so that it collects no
// more often than before). Push and consume stay under it (34 MB of the
// runtime's memory at their peaks), where it changes nothing.
const (
	softLimitBase  = 44 << 20
	softLimitFloor = 2 // times the live heap
	softLimitEvery = 250 * time.Millisecond
)

// softLimit is the limit for a live heap of live bytes and nonHeap bytes
// of the runtime's other memory (stacks, metadata).
func softLimit(live, nonHeap uint64) int64 {
	floor := nonHeap + softLimitFloor*live
	if floor > softLimitBase {
		return int64(floor)
	}
	return softLimitBase
}

// memorySamples are the runtime/metrics softLimit reads.
var memorySamples = []string{
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
}

// nextSoftLimit reads the runtime's memory and returns the limit for it.
func nextSoftLimit(s []metrics.Sample) int64 {
	metrics.Read(s)
	v := make([]uint64, len(s))
	for i := range s {
		if s[i].Value.Kind() == metrics.KindUint64 {
			v[i] = s[i].Value.Uint64()
		}
	}
	live, total := v[0], v[1]
	heap := v[2] + v[3] + v[4] + v[5]
	var nonHeap uint64
	if total > heap {
		nonHeap = total - heap
	}
	return softLimit(live, nonHeap)
}

// governMemory applies the soft limit, and moves it with the live heap,
// until ctx ends.
func governMemory(ctx context.Context) {
	s := make([]metrics.Sample, len(memorySamples))
	for i, name := range memorySamples {
		s[i].Name = name
	}
	last := nextSoftLimit(s)
	debug.SetMemoryLimit(last)
	tick := time.NewTicker(softLimitEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if n := nextSoftLimit(s); n != last {
			debug.SetMemoryLimit(n)
			last = n
		}
	}
}
