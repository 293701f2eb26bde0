package handlers

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/api"
)

// Tests of the admin read routes: resources, messages, consumer groups and
// traces. Every request goes through b.do, so every answer is also checked
// against openapi.yaml.

type wireCounts struct {
	Total      int `json:"total"`
	Pending    int `json:"pending"`
	Processing int `json:"processing"`
	DeadLetter int `json:"deadLetter"`
}

type wireQueue struct {
	Name       string     `json:"name"`
	Namespace  string     `json:"namespace"`
	Task       string     `json:"task"`
	Partitions int        `json:"partitions"`
	Messages   wireCounts `json:"messages"`
}

type wirePartition struct {
	Queue      string  `json:"queue"`
	Partition  string  `json:"partition"`
	Total      int     `json:"total"`
	Pending    int     `json:"pending"`
	Processing int     `json:"processing"`
	DeadLetter int     `json:"deadLetter"`
	LagSeconds int     `json:"lagSeconds"`
	LastMsgAt  *string `json:"lastMessageAt"`
}

// configureTagged creates a queue with a namespace and a task.
func (b *testBundle) configureTagged(queue, namespace, task string) {
	b.t.Helper()
	b.doJSON("POST", "/api/v1/configure", map[string]any{"queue": queue, "namespace": namespace, "task": task}, http.StatusOK, nil)
}

// exec runs SQL on the test's database, to inject time (age messages).
func (b *testBundle) exec(sql string, args ...any) {
	b.t.Helper()
	_, err := b.pool.Exec(b.t.Context(), sql, args...)
	require.NoError(b.t, err)
}

// resourcesWorkload leaves two queues in namespace "shop":
//
//	orders (task billing): Default (empty); p1 with 5 messages, 3 of them
//	popped by the queue-mode group and 1 of those acked; p2 with 3 messages
//	(and a repeated transactionId), 1 popped and dead-lettered.
//	inv (task stock): Default with 2 messages, never consumed.
func resourcesWorkload(b *testBundle) {
	b.t.Helper()
	b.configureTagged("orders", "shop", "billing")
	for i := range 5 {
		b.push(item("orders", "p1", fmt.Sprintf("p1-%d", i), i))
	}
	for i := range 3 {
		b.push(item("orders", "p2", fmt.Sprintf("p2-%d", i), i))
	}
	require.Equal(b.t, "duplicate", b.push(item("orders", "p2", "p2-0", 0))[0].Status)
	p := b.pop("/api/v1/pop/queue/orders/partition/p1?batch=3")
	require.Len(b.t, p.Messages, 3)
	require.True(b.t, b.ack("p1-0", p.PartitionID, "completed", "", p.LeaseID).Success)
	p = b.pop("/api/v1/pop/queue/orders/partition/p2?batch=1")
	require.True(b.t, b.ack("p2-0", p.PartitionID, "dlq", "", p.LeaseID).DLQ)
	b.configureTagged("inv", "shop", "stock")
	b.push(item("inv", "", "i0", 0), item("inv", "", "i1", 1))
}

func TestResourcesQueuesCountsFiltersAndPaging(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resourcesWorkload(b)

	var list struct {
		Queues     []wireQueue `json:"queues"`
		Total      int         `json:"total"`
		Pagination struct {
			Limit  *int `json:"limit"`
			Offset int  `json:"offset"`
		} `json:"pagination"`
	}
	b.doJSON("GET", "/api/v1/resources/queues", nil, http.StatusOK, &list)
	require.Equal(t, 2, list.Total)
	require.Nil(t, list.Pagination.Limit)
	require.Len(t, list.Queues, 2)
	require.Equal(t, "inv", list.Queues[0].Name, "newest first")
	orders := list.Queues[1]
	require.Equal(t, wireQueue{Name: "orders", Namespace: "shop", Task: "billing", Partitions: 3,
		// pending: 4 past the cursor on p1 and 2 on p2, less the 2 in flight.
		Messages: wireCounts{Total: 8, Pending: 4, Processing: 2, DeadLetter: 1}}, orders)
	require.Equal(t, wireCounts{Total: 2, Pending: 2}, list.Queues[0].Messages)

	b.doJSON("GET", "/api/v1/resources/queues?task=stock", nil, http.StatusOK, &list)
	require.Equal(t, 1, list.Total)
	require.Equal(t, "inv", list.Queues[0].Name)
	b.doJSON("GET", "/api/v1/resources/queues?namespace=shop&limit=1&offset=1", nil, http.StatusOK, &list)
	require.Equal(t, 2, list.Total)
	require.Len(t, list.Queues, 1)
	require.Equal(t, "orders", list.Queues[0].Name)
	require.Equal(t, 1, *list.Pagination.Limit)
	b.doJSON("GET", "/api/v1/resources/queues?namespace=nope", nil, http.StatusOK, &list)
	require.Zero(t, list.Total)
	require.Empty(t, list.Queues)

	for _, bad := range []string{"limit=0", "limit=x", "offset=-1"} {
		status, _ := b.do("GET", "/api/v1/resources/queues?"+bad, nil)
		require.Equal(t, http.StatusBadRequest, status, bad)
	}
}

func TestResourcesNamespacesTasksOverview(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// An empty broker answers zeros, not errors.
	var ov struct {
		Queues, Partitions, Namespaces, Tasks int
		Messages                              struct {
			Total, Pending, Processing, Completed, Failed, DeadLetter int
		}
		Lag struct {
			Offset struct{ Avg, Median, Min, Max float64 }
		}
		Throughput struct{ IngestedPerSecond float64 }
		Timestamp  string
	}
	b.doJSON("GET", "/api/v1/resources/overview", nil, http.StatusOK, &ov)
	require.Zero(t, ov.Queues)
	require.Zero(t, ov.Messages.Total)

	resourcesWorkload(b)
	var ns struct {
		Namespaces []struct {
			Namespace  string     `json:"namespace"`
			Queues     int        `json:"queues"`
			Partitions int        `json:"partitions"`
			Messages   wireCounts `json:"messages"`
		} `json:"namespaces"`
	}
	b.doJSON("GET", "/api/v1/resources/namespaces", nil, http.StatusOK, &ns)
	require.Len(t, ns.Namespaces, 1)
	require.Equal(t, "shop", ns.Namespaces[0].Namespace)
	require.Equal(t, 2, ns.Namespaces[0].Queues)
	require.Equal(t, 4, ns.Namespaces[0].Partitions)
	require.Equal(t, wireCounts{Total: 10, Pending: 6, Processing: 2, DeadLetter: 1}, ns.Namespaces[0].Messages)

	var tasks struct {
		Tasks []struct {
			Task       string     `json:"task"`
			Queues     int        `json:"queues"`
			Partitions int        `json:"partitions"`
			Messages   wireCounts `json:"messages"`
		} `json:"tasks"`
	}
	b.doJSON("GET", "/api/v1/resources/tasks", nil, http.StatusOK, &tasks)
	require.Len(t, tasks.Tasks, 2)
	require.Equal(t, "billing", tasks.Tasks[0].Task)
	require.Equal(t, 3, tasks.Tasks[0].Partitions)
	require.Equal(t, wireCounts{Total: 8, Pending: 4, Processing: 2, DeadLetter: 1}, tasks.Tasks[0].Messages)
	require.Equal(t, "stock", tasks.Tasks[1].Task)
	require.Equal(t, wireCounts{Total: 2, Pending: 2}, tasks.Tasks[1].Messages)

	b.doJSON("GET", "/api/v1/resources/overview", nil, http.StatusOK, &ov)
	require.Equal(t, 2, ov.Queues)
	require.Equal(t, 4, ov.Partitions)
	require.Equal(t, 1, ov.Namespaces)
	require.Equal(t, 2, ov.Tasks)
	m := ov.Messages
	require.Equal(t, 10, m.Total)
	require.Equal(t, 6, m.Pending)
	require.Equal(t, 2, m.Processing)
	require.Equal(t, 1, m.DeadLetter)
	require.Equal(t, 1, m.Completed, "p1-0 was acked")
	require.Zero(t, m.Failed)
	// Offset lag over the queue-mode cursors of orders: Default 0, p1 4
	// (cursor at 1 of 5), p2 2 (cursor at 1 of 3; the repeated transactionId
	// is not lag). inv was never consumed: no rows.
	require.Equal(t, struct{ Avg, Median, Min, Max float64 }{Avg: 2, Median: 2, Min: 0, Max: 4}, ov.Lag.Offset)
	require.InDelta(t, 10.0/300, ov.Throughput.IngestedPerSecond, 1e-9)
	require.Regexp(t, `Z$`, ov.Timestamp)
}

func TestResourcesPartitions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resourcesWorkload(b)
	var page struct {
		Partitions []wirePartition `json:"partitions"`
		Total      int             `json:"total"`
		Truncated  bool            `json:"truncated"`
	}
	b.doJSON("GET", "/api/v1/resources/partitions?queue=orders", nil, http.StatusOK, &page)
	require.Equal(t, 3, page.Total)
	require.False(t, page.Truncated)
	require.Len(t, page.Partitions, 3)
	def, p1, p2 := page.Partitions[0], page.Partitions[1], page.Partitions[2]
	require.Equal(t, "Default", def.Partition)
	require.Nil(t, def.LastMsgAt)
	require.Zero(t, def.Total)
	require.Equal(t, "p1", p1.Partition)
	require.Equal(t, 5, p1.Total)
	require.Equal(t, 4, p1.Pending, "in-flight messages are pending here")
	require.Equal(t, 2, p1.Processing)
	require.Equal(t, "p2", p2.Partition)
	require.Equal(t, 3, p2.Total, "a repeated transactionId is not counted")
	require.Equal(t, 2, p2.Pending)
	require.Equal(t, 1, p2.DeadLetter)

	// Age the oldest pending message of p1: its lag shows.
	b.exec(`UPDATE queen.messages SET created_at = now() - interval '90 seconds' WHERE transaction_id = 'p1-1'`)
	b.doJSON("GET", "/api/v1/resources/partitions?queue=orders&limit=2&offset=1", nil, http.StatusOK, &page)
	require.Equal(t, 3, page.Total)
	require.False(t, page.Truncated)
	require.Len(t, page.Partitions, 2)
	require.Equal(t, "p1", page.Partitions[0].Partition)
	require.GreaterOrEqual(t, page.Partitions[0].LagSeconds, 90)

	b.doJSON("GET", "/api/v1/resources/partitions?limit=2", nil, http.StatusOK, &page)
	require.Equal(t, 4, page.Total, "every queue")
	require.True(t, page.Truncated)
	require.Equal(t, "inv", page.Partitions[0].Queue, "by queue name")

	status, raw := b.do("GET", "/api/v1/resources/partitions?queue=missing", nil)
	require.Equal(t, http.StatusNotFound, status)
	require.JSONEq(t, `{"error":"Queue not found"}`, string(raw))
}

func TestLagStats(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    []float64
		zeros int
		want  api.LagStats
	}{
		{nil, 0, api.LagStats{}},
		{[]float64{3}, 0, api.LagStats{Avg: 3, Median: 3, Min: 3, Max: 3}},
		{[]float64{4, 0, 2}, 0, api.LagStats{Avg: 2, Median: 2, Min: 0, Max: 4}},
		{[]float64{4, 0, 1, 3}, 0, api.LagStats{Avg: 2, Median: 2, Min: 0, Max: 4}},
		{[]float64{4, 2}, 1, api.LagStats{Avg: 2, Median: 2, Min: 0, Max: 4}},
		{[]float64{6, 2}, 2, api.LagStats{Avg: 2, Median: 1, Min: 0, Max: 6}},
		{nil, 3, api.LagStats{}},
		{[]float64{5, 5, 5, 1}, 0, api.LagStats{Avg: 4, Median: 5, Min: 1, Max: 5}},
		{[]float64{7, 7, 1}, 1, api.LagStats{Avg: 3.75, Median: 4, Min: 0, Max: 7}},
	} {
		// The same lags as a histogram, one bar per distinct lag, in no
		// particular order.
		bars := map[int64]int64{}
		for _, v := range tc.in {
			bars[int64(v)]++
		}
		bars[0] += int64(tc.zeros)
		var h []lagCount
		for lag, pairs := range bars {
			h = append(h, lagCount{lag: lag, pairs: pairs})
		}
		require.Equal(t, tc.want, lagStats(h), "%v + %d zeros", tc.in, tc.zeros)
	}
	// A bar of no pairs (or fewer: a histogram never has them) counts for
	// nothing.
	require.Equal(t, api.LagStats{Avg: 2, Median: 2, Min: 2, Max: 2}, lagStats([]lagCount{{9, 0}, {2, 3}, {1, -1}}))
}

// The queue detail lists a page of partitions with their counts and the
// times of their oldest and newest messages (what queenctl's `queue
// describe` shows) and totals over every partition.
func TestResourcesQueueDetailPartitions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	resourcesWorkload(b)
	type stats struct{ Total, Pending, Processing, Completed, Failed, DeadLetter int }
	type partition struct {
		ID, Name, CreatedAt          string
		Stats                        stats
		OldestMessage, NewestMessage *string
	}
	type detail struct {
		Name       string
		Partitions []partition
		Totals     struct{ Partitions, Total, Pending, Processing, Completed, Failed, DeadLetter int }
		Pagination struct {
			Limit, Offset int
			Truncated     bool
		}
	}
	var d detail
	b.doJSON("GET", "/api/v1/resources/queues/orders", nil, http.StatusOK, &d)
	require.Equal(t, "orders", d.Name)
	// Pending counts what the queue-mode group has not consumed, in flight
	// included: p1's cursor is at 1 of 5 with 2 in flight, p2's at 1 of 3
	// (its first message dead-lettered).
	require.Equal(t, struct{ Partitions, Total, Pending, Processing, Completed, Failed, DeadLetter int }{
		Partitions: 3, Total: 8, Pending: 6, Processing: 2, Completed: 1, DeadLetter: 1}, d.Totals)
	require.Equal(t, 1000, d.Pagination.Limit)
	require.False(t, d.Pagination.Truncated)
	require.Len(t, d.Partitions, 3)
	want := map[string]stats{
		"Default": {},
		"p1":      {Total: 5, Pending: 4, Processing: 2, Completed: 1},
		"p2":      {Total: 3, Pending: 2, DeadLetter: 1},
	}
	for i, p := range d.Partitions {
		require.Equal(t, []string{"Default", "p1", "p2"}[i], p.Name, "by name")
		require.Equal(t, want[p.Name], p.Stats, p.Name)
		_, err := uuid.Parse(p.ID)
		require.NoError(t, err)
		require.Regexp(t, `Z$`, p.CreatedAt)
		if p.Name == "Default" {
			require.Nil(t, p.OldestMessage)
			require.Nil(t, p.NewestMessage)
			continue
		}
		require.Regexp(t, `Z$`, *p.OldestMessage)
		require.LessOrEqual(t, *p.OldestMessage, *p.NewestMessage)
	}
	var ids []string
	b.exec(`UPDATE queen.messages SET created_at = created_at - interval '1 hour' WHERE transaction_id = 'p1-0'`)
	b.doJSON("GET", "/api/v1/resources/queues/orders", nil, http.StatusOK, &d)
	require.Less(t, *d.Partitions[1].OldestMessage, *d.Partitions[1].NewestMessage)

	// Paging: by name, `limit` at a time; the totals always cover all.
	b.doJSON("GET", "/api/v1/resources/queues/orders?limit=2", nil, http.StatusOK, &d)
	require.Len(t, d.Partitions, 2)
	require.True(t, d.Pagination.Truncated)
	for _, p := range d.Partitions {
		ids = append(ids, p.Name)
	}
	b.doJSON("GET", "/api/v1/resources/queues/orders?limit=2&offset=2", nil, http.StatusOK, &d)
	require.Len(t, d.Partitions, 1)
	require.False(t, d.Pagination.Truncated)
	require.Equal(t, []string{"Default", "p1", "p2"}, append(ids, d.Partitions[0].Name))
	require.Equal(t, 8, d.Totals.Total)
	b.doJSON("GET", "/api/v1/resources/queues/orders?limit=0", nil, http.StatusOK, &d)
	require.Empty(t, d.Partitions)
	require.Equal(t, 3, d.Totals.Partitions)

	for _, bad := range []string{"limit=10001", "limit=-1", "offset=-1", "limit=x"} {
		status, _ := b.do("GET", "/api/v1/resources/queues/orders?"+bad, nil)
		require.Equal(t, http.StatusBadRequest, status, bad)
	}
}
