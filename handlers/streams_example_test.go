package handlers

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
)

// The worked example of docs/streams.md: a per-customer sum of order
// amounts over one-minute tumbling windows (event time), driven through the
// HTTP routes exactly as a streams runner drives them. sumWindows is the
// client side, what the SDK's windowTumbling(60) + reduce does.
func TestStreamWorkedExampleWindowedSum(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const group = "streams.orders-per-minute"
	t0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC).UnixMilli()
	order := func(tx, customer string, amount float64, offset time.Duration) client.PushItem {
		return item("orders", "eu", tx, map[string]any{"customer": customer, "amount": amount, "ts": t0 + offset.Milliseconds()})
	}

	// 1. Register.
	var reg streamQueryResp
	b.doJSON("POST", "/streams/v1/queries", map[string]any{
		"name": "orders-per-minute", "source_queue": "orders", "sink_queue": "order-totals", "config_hash": "sha256:example",
	}, http.StatusOK, &reg)
	require.True(t, reg.Fresh)
	qid := reg.QueryID

	// 2. Three orders in the 10:00 window.
	b.push(order("o1", "alice", 10, 5*time.Second), order("o2", "bob", 7, 20*time.Second), order("o3", "alice", 5, 50*time.Second))

	// 3. A cycle: pop, read the state, fold, commit state + ack.
	runCycle := func() cycleResp {
		p := b.pop("/api/v1/pop/queue/orders?batch=200&consumerGroup=" + group)
		require.NotNil(t, p)
		state := b.state(qid, p.PartitionID, map[string]any{"keys": []string{}})
		ops, emits := sumWindows(t, state, p)
		last := p.Messages[len(p.Messages)-1]
		return b.cycle(map[string]any{
			"query_id": qid, "partition_id": p.PartitionID, "consumer_group": group,
			"state_ops": ops, "push_items": emits,
			"ack": map[string]any{"transactionId": last.TransactionID, "leaseId": p.LeaseID, "status": "completed", "count": len(p.Messages)},
		})
	}
	r := runCycle()
	require.True(t, r.Success, r.Error)
	require.Equal(t, 3, r.StateOpsApplied, "two open windows and the watermark")
	require.Empty(t, r.PushResults, "the 10:00 window is still open")
	pid := r.PartitionID
	require.Equal(t, map[string]string{
		"__wm__": `{"eventTimeMs":1767261650000}`,
		"tumb:60\u001f2026-01-01T10:00:00.000Z\u001falice": `{"acc":15,"windowEnd":1767261660000,"windowStart":1767261600000}`,
		"tumb:60\u001f2026-01-01T10:00:00.000Z\u001fbob":   `{"acc":7,"windowEnd":1767261660000,"windowStart":1767261600000}`,
	}, b.state(qid, pid, nil))

	// 4. An order at 10:01:05 moves the watermark past 10:01: the 10:00
	// windows close, their sums go to the sink and their state is deleted,
	// in the same transaction as the ack.
	b.push(order("o4", "alice", 1, 65*time.Second))
	r = runCycle()
	require.True(t, r.Success, r.Error)
	require.Len(t, r.PushResults, 2)
	totals := b.pop("/api/v1/pop/queue/order-totals?batch=10&autoAck=true")
	require.Len(t, totals.Messages, 2)
	require.JSONEq(t, `{"customer":"alice","windowStart":"2026-01-01T10:00:00.000Z","total":15}`, string(totals.Messages[0].Data))
	require.JSONEq(t, `{"customer":"bob","windowStart":"2026-01-01T10:00:00.000Z","total":7}`, string(totals.Messages[1].Data))
	require.Equal(t, "eu", totals.Messages[0].Partition)
	require.Equal(t, map[string]string{
		"__wm__": `{"eventTimeMs":1767261665000}`,
		"tumb:60\u001f2026-01-01T10:01:00.000Z\u001falice": `{"acc":1,"windowEnd":1767261720000,"windowStart":1767261660000}`,
	}, b.state(qid, pid, nil))

	// 5. The partition goes quiet. The idle flush finds the ripe windows
	// (windowEnd at or before its clock, here 10:02) and closes them with a
	// cycle that has no ack.
	ripe := b.state(qid, pid, map[string]any{"key_prefix": "tumb:60\u001f", "ripe_at_or_before": t0 + 2*time.Minute.Milliseconds()})
	require.Len(t, ripe, 1)
	var ops, emits []any
	for _, k := range slices.Sorted(maps.Keys(ripe)) {
		ops = append(ops, map[string]any{"type": "delete", "key": k})
		emits = append(emits, windowEmit(t, k, ripe[k]))
	}
	r = b.cycle(map[string]any{"query_id": qid, "partition_id": pid, "consumer_group": group,
		"state_ops": ops, "push_items": emits, "ack": nil})
	require.True(t, r.Success, r.Error)
	totals = b.pop("/api/v1/pop/queue/order-totals?batch=10&autoAck=true")
	require.Len(t, totals.Messages, 1)
	require.JSONEq(t, `{"customer":"alice","windowStart":"2026-01-01T10:01:00.000Z","total":1}`, string(totals.Messages[0].Data))
	require.Equal(t, []string{"__wm__"}, slices.Collect(maps.Keys(b.state(qid, pid, nil))))
}

// windowValue is the state of one open window, as the SDK stores it.
type windowValue struct {
	Acc         float64 `json:"acc"`
	WindowStart int64   `json:"windowStart"`
	WindowEnd   int64   `json:"windowEnd"`
}

// sumWindows folds a popped batch into the loaded windows. Windows that end
// at or before the watermark (the newest event time seen) close: they are
// emitted to the sink and deleted. The others are upserted with the
// watermark. Output is sorted by key, so the sink order is deterministic.
func sumWindows(t *testing.T, state map[string]string, p *popped) (ops, emits []any) {
	t.Helper()
	const tag, size = "tumb:60", int64(60_000)
	windows := map[string]*windowValue{}
	loaded := map[string]bool{}
	var wm int64
	for k, v := range state {
		if k == "__wm__" {
			var w struct {
				EventTimeMs int64 `json:"eventTimeMs"`
			}
			require.NoError(t, json.Unmarshal([]byte(v), &w))
			wm = w.EventTimeMs
			continue
		}
		var w windowValue
		require.NoError(t, json.Unmarshal([]byte(v), &w))
		windows[k], loaded[k] = &w, true
	}
	touched := map[string]bool{}
	for _, m := range p.Messages {
		var o struct {
			Customer string  `json:"customer"`
			Amount   float64 `json:"amount"`
			TS       int64   `json:"ts"`
		}
		require.NoError(t, json.Unmarshal(m.Data, &o))
		start := o.TS / size * size
		key := tag + "\u001f" + time.UnixMilli(start).UTC().Format(timeMillis) + "\u001f" + o.Customer
		if windows[key] == nil {
			windows[key] = &windowValue{WindowStart: start, WindowEnd: start + size}
		}
		windows[key].Acc += o.Amount
		touched[key] = true
		wm = max(wm, o.TS)
	}
	for _, k := range slices.Sorted(maps.Keys(windows)) {
		w := windows[k]
		switch {
		case w.WindowEnd <= wm:
			raw, err := json.Marshal(w)
			require.NoError(t, err)
			emits = append(emits, windowEmit(t, k, string(raw)))
			if loaded[k] {
				ops = append(ops, map[string]any{"type": "delete", "key": k})
			}
		case touched[k]:
			ops = append(ops, map[string]any{"type": "upsert", "key": k, "value": w})
		}
	}
	ops = append(ops, map[string]any{"type": "upsert", "key": "__wm__", "value": map[string]any{"eventTimeMs": wm}})
	return ops, emits
}

// windowEmit is the sink message of a closed window.
func windowEmit(t *testing.T, key, value string) client.PushItem {
	t.Helper()
	parts := strings.Split(key, "\u001f")
	require.Len(t, parts, 3)
	var w windowValue
	require.NoError(t, json.Unmarshal([]byte(value), &w))
	return item("order-totals", "eu", "", map[string]any{"customer": parts[2], "windowStart": parts[1], "total": w.Acc})
}
