package main

import (
	"context"
	"fmt"
	"strconv"
)

// fanoutScenario: push one queue while -groups consumer groups, each with
// -consumers consumers, read every message. msg/s counts deliveries (each
// message once per group); messages per commit counts deliveries too.
func (b *bench) fanoutScenario(ctx context.Context) (result, error) {
	queue := b.queue("fanout")
	groups := make([]string, b.cfg.Groups)
	for i := range groups {
		groups[i] = queue + "-g" + strconv.Itoa(i)
	}
	m := b.startMeasure(ctx)
	f := b.flow(ctx, queue, groups)
	cmd := b.command("fanout", "duration", "producers", "consumers", "groups", "batch", "partitions", "payload-bytes", "rate", "auto-ack")
	res := b.flowResult("fanout", cmd, len(groups), f)
	res.note(fmt.Sprintf("%d groups x %d consumers", len(groups), b.cfg.Consumers))
	m.finish(ctx, &res)
	return res, nil
}
