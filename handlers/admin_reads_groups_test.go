package handlers

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

type wireGroup struct {
	Name                  string   `json:"name"`
	Topics                []string `json:"topics"`
	QueueName             string   `json:"queueName"`
	Members               int      `json:"members"`
	PartitionsWithLag     int      `json:"partitionsWithLag"`
	TotalLag              int      `json:"totalLag"`
	MaxTimeLag            int      `json:"maxTimeLag"`
	State                 string   `json:"state"`
	SubscriptionMode      *string  `json:"subscriptionMode"`
	SubscriptionTimestamp *string  `json:"subscriptionTimestamp"`
}

type wireGroupPartition struct {
	Partition      string  `json:"partition"`
	LastConsumedAt *string `json:"lastConsumedAt"`
	TotalConsumed  int     `json:"totalConsumed"`
	OffsetLag      int     `json:"offsetLag"`
	TimeLagSeconds int     `json:"timeLagSeconds"`
	LeaseActive    bool    `json:"leaseActive"`
}

type wireLagging struct {
	ConsumerGroup  string  `json:"consumer_group"`
	QueueName      string  `json:"queue_name"`
	PartitionName  string  `json:"partition_name"`
	PartitionID    string  `json:"partition_id"`
	OffsetLag      int     `json:"offset_lag"`
	TimeLagSeconds int     `json:"time_lag_seconds"`
	LagHours       float64 `json:"lag_hours"`
	Oldest         *string `json:"oldest_unconsumed_at"`
}

// groupsWorkload: queue cg with partitions a (a0..a2) and b (b0, b1).
//
//	__QUEUE_MODE__ popped a0 and a1 from a and acked both; it never read b.
//	g1 read b to the end with autoAck and never read a.
//	late subscribed with mode new after every message: nothing to read.
//	lease holds a live lease on b without acking.
func groupsWorkload(b *testBundle) {
	b.t.Helper()
	b.push(item("cg", "a", "a0", 0), item("cg", "a", "a1", 1), item("cg", "a", "a2", 2))
	b.push(item("cg", "b", "b0", 0), item("cg", "b", "b1", 1))
	p := b.pop("/api/v1/pop/queue/cg/partition/a?batch=2")
	require.Len(b.t, p.Messages, 2)
	require.True(b.t, b.ack("a0", p.PartitionID, "completed", "", p.LeaseID).Success)
	require.True(b.t, b.ack("a1", p.PartitionID, "completed", "", p.LeaseID).Success)
	require.Len(b.t, b.pop("/api/v1/pop/queue/cg/partition/b?consumerGroup=g1&autoAck=true&batch=10").Messages, 2)
	require.Nil(b.t, b.pop("/api/v1/pop/queue/cg?consumerGroup=late&subscriptionMode=new"))
	require.Len(b.t, b.pop("/api/v1/pop/queue/cg/partition/b?consumerGroup=lease&subscriptionMode=all").Messages, 1)
}

func TestConsumerGroupsListAndDetail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var list []wireGroup
	b.doJSON("GET", "/api/v1/consumer-groups", nil, http.StatusOK, &list)
	require.Empty(t, list)

	groupsWorkload(b)
	b.doJSON("GET", "/api/v1/consumer-groups", nil, http.StatusOK, &list)
	byName := map[string]wireGroup{}
	var names []string
	for _, g := range list {
		byName[g.Name] = g
		names = append(names, g.Name)
		require.Equal(t, []string{"cg"}, g.Topics)
		require.Equal(t, "cg", g.QueueName)
	}
	require.Equal(t, []string{"__QUEUE_MODE__", "g1", "late", "lease"}, names, "by group name")

	qm := byName["__QUEUE_MODE__"]
	require.Equal(t, 1, qm.Members, "a cursor on a only")
	require.Equal(t, 2, qm.PartitionsWithLag, "a2, and all of b (read from the beginning)")
	require.Equal(t, 3, qm.TotalLag)
	require.Equal(t, "Stable", qm.State)
	require.Nil(t, qm.SubscriptionMode)

	g1 := byName["g1"]
	require.Equal(t, 1, g1.Members)
	require.Equal(t, 1, g1.PartitionsWithLag, "a, never read")
	require.Equal(t, 3, g1.TotalLag)
	require.Equal(t, "Stable", g1.State)

	late := byName["late"]
	require.Zero(t, late.TotalLag, "everything predates the subscription")
	require.Zero(t, late.PartitionsWithLag)
	require.Equal(t, "Dead", late.State, "never consumed")
	require.Equal(t, "new", *late.SubscriptionMode)
	require.NotNil(t, late.SubscriptionTimestamp)

	lease := byName["lease"]
	require.Equal(t, 5, lease.TotalLag, "in-flight is still lag")
	require.Equal(t, "Dead", lease.State)

	// Detail: keyed by queue, one entry per partition.
	var detail map[string]struct {
		Partitions []wireGroupPartition `json:"partitions"`
	}
	b.doJSON("GET", "/api/v1/consumer-groups/g1", nil, http.StatusOK, &detail)
	require.Len(t, detail, 1)
	parts := detail["cg"].Partitions
	require.Len(t, parts, 2)
	require.Equal(t, "a", parts[0].Partition)
	require.Equal(t, 3, parts[0].OffsetLag, "never read: from the beginning")
	require.Nil(t, parts[0].LastConsumedAt)
	require.False(t, parts[0].LeaseActive)
	require.Equal(t, "b", parts[1].Partition)
	require.Zero(t, parts[1].OffsetLag)
	require.Equal(t, 2, parts[1].TotalConsumed)
	require.NotNil(t, parts[1].LastConsumedAt)

	b.doJSON("GET", "/api/v1/consumer-groups/lease", nil, http.StatusOK, &detail)
	require.True(t, detail["cg"].Partitions[1].LeaseActive)

	status, raw := b.do("GET", "/api/v1/consumer-groups/nobody", nil)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `{}`, string(raw), "an unknown group is empty, as in the reference")
	status, _ = b.do("GET", "/api/v1/consumer-groups/bad%20name", nil)
	require.Equal(t, http.StatusBadRequest, status)

	// Deleting a queue removes its rows.
	b.doJSON("DELETE", "/api/v1/resources/queues/cg", nil, http.StatusOK, nil)
	b.doJSON("GET", "/api/v1/consumer-groups", nil, http.StatusOK, &list)
	require.Empty(t, list)
}

func TestConsumerGroupsLagging(t *testing.T) {
	t.Parallel()
	b := setup(t)
	groupsWorkload(b)

	var lagging []wireLagging
	b.doJSON("GET", "/api/v1/consumer-groups/lagging", nil, http.StatusOK, &lagging)
	require.Empty(t, lagging, "nothing is an hour old")

	// Inject time as pushes would have stamped it: partition a and its
	// messages were stored two hours ago (a0 first), partition b and b0 ten
	// minutes ago. A partition's creation is its first message's time
	// (migration 0021 counts on it for groups without a cursor there).
	b.exec(`UPDATE queen.messages m SET created_at = now() - interval '2 hours' - make_interval(secs => 3 - m.seq)
		FROM queen.partitions p WHERE p.id = m.partition_id AND p.name = 'a'`)
	b.exec(`UPDATE queen.partitions SET created_at = now() - interval '2 hours' - interval '2 seconds' WHERE name = 'a'`)
	b.exec(`UPDATE queen.messages SET created_at = now() - interval '10 minutes' WHERE transaction_id = 'b0'`)
	b.exec(`UPDATE queen.partitions SET created_at = now() - interval '10 minutes' WHERE name = 'b'`)
	b.doJSON("GET", "/api/v1/consumer-groups/lagging", nil, http.StatusOK, &lagging)
	type key struct {
		group, partition string
		offset           int
	}
	keys := func() []key {
		var got []key
		for i, l := range lagging {
			got = append(got, key{l.ConsumerGroup, l.PartitionName, l.OffsetLag})
			require.NotEmpty(t, l.PartitionID)
			require.NotNil(t, l.Oldest)
			require.InDelta(t, float64(l.TimeLagSeconds)/3600, l.LagHours, 0.01)
			if i > 0 {
				require.LessOrEqual(t, l.TimeLagSeconds, lagging[i-1].TimeLagSeconds, "worst first")
			}
		}
		return got
	}
	// The queue-mode group has a2 left (two hours), g1 and lease never read
	// a: all of it is left for them, from a0 (two hours and two seconds);
	// late subscribed after every push.
	require.ElementsMatch(t, []key{{"__QUEUE_MODE__", "a", 1}, {"g1", "a", 3}, {"lease", "a", 3}}, keys())
	for _, l := range lagging {
		require.GreaterOrEqual(t, l.TimeLagSeconds, 7200)
		require.Equal(t, "cg", l.QueueName)
	}
	require.Equal(t, "__QUEUE_MODE__", lagging[2].ConsumerGroup, "a2 is a0's two seconds younger")

	// A lower threshold adds b0's ten minutes, for the queue-mode group (which
	// never read b) and for lease (which holds b0 unacked).
	b.doJSON("GET", "/api/v1/consumer-groups/lagging?minLagSeconds=300", nil, http.StatusOK, &lagging)
	require.ElementsMatch(t, []key{{"__QUEUE_MODE__", "a", 1}, {"g1", "a", 3}, {"lease", "a", 3},
		{"__QUEUE_MODE__", "b", 2}, {"lease", "b", 2}}, keys())

	var list []wireGroup
	b.doJSON("GET", "/api/v1/consumer-groups", nil, http.StatusOK, &list)
	for _, g := range list {
		if g.Name == "__QUEUE_MODE__" {
			require.Equal(t, "Lagging", g.State)
			require.GreaterOrEqual(t, g.MaxTimeLag, 7200)
		}
	}

	for _, bad := range []string{"abc", "-1"} {
		status, _ := b.do("GET", "/api/v1/consumer-groups/lagging?minLagSeconds="+bad, nil)
		require.Equal(t, http.StatusBadRequest, status, bad)
	}
}

// TestConsumerGroupsLaggingLimit: with limit, /lagging answers the first
// limit pairs of the whole list, in its order, whichever way each pair's
// age is found: a cursor behind, no cursor on a partition nothing was
// deleted from (walked in creation order, ties included), no cursor on a
// partition whose first messages were deleted, and a group that
// subscribed at a time.
func TestConsumerGroupsLaggingLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	groupsWorkload(b)
	b.push(item("cg", "c", "c0", 0), item("cg", "c", "c1", 1))
	b.push(item("cg", "d", "d0", 0))
	b.push(item("cg", "e", "e0", 0), item("cg", "e", "e1", 1))
	out := b.push(item("cg", "f", "f0", 0), item("cg", "f", "f1", 1), item("cg", "f", "f2", 2))
	var r struct{ Success bool }
	b.doJSON("DELETE", "/api/v1/messages/"+out[0].PartitionID+"/f0", nil, http.StatusOK, &r)
	require.True(t, r.Success)

	// Ages as pushes would have stamped them, hours ago: each partition's
	// messages one second apart from its creation; c and d tie; f was
	// created six hours ago but its first message left is 2.5 hours old.
	hours := map[string]string{"a": "5", "b": "4", "c": "3", "d": "3", "e": "2", "f": "6"}
	for name, h := range hours {
		b.exec(`UPDATE queen.partitions SET created_at = now() - make_interval(hours => $2::int)
			WHERE name = $1`, name, h)
		b.exec(`UPDATE queen.messages m SET created_at = p.created_at + make_interval(secs => m.seq)
			FROM queen.partitions p WHERE p.id = m.partition_id AND p.name = $1`, name)
	}
	b.exec(`UPDATE queen.messages m SET created_at = now() - interval '150 minutes' + make_interval(secs => m.seq)
		FROM queen.partitions p WHERE p.id = m.partition_id AND p.name = 'f'`)
	// late subscribed three and a half hours ago: c, d, e and f are new to it.
	b.exec(`UPDATE queen.consumer_groups_metadata SET subscription_timestamp = now() - interval '210 minutes'
		WHERE consumer_group = 'late'`)

	type key struct {
		group, partition string
		offset           int
		oldest           string
	}
	keysOf := func(rows []wireLagging) []key {
		var got []key
		for _, l := range rows {
			require.NotNil(t, l.Oldest)
			got = append(got, key{l.ConsumerGroup, l.PartitionName, l.OffsetLag, *l.Oldest})
		}
		return got
	}
	var one, all []wireLagging
	b.doJSON("GET", "/api/v1/consumer-groups/lagging?limit=1", nil, http.StatusOK, &one)
	require.Len(t, one, 1, "a limit of its own in the answer cache's key")
	b.doJSON("GET", "/api/v1/consumer-groups/lagging", nil, http.StatusOK, &all)
	want := keysOf(all)
	seen := map[[2]string]bool{}
	for _, k := range want {
		seen[[2]string{k.group, k.partition}] = true
	}
	for _, pair := range [][2]string{{"__QUEUE_MODE__", "a"}, {"lease", "b"}, {"g1", "c"}, {"g1", "f"}, {"late", "f"}, {"late", "c"}} {
		require.True(t, seen[pair], "%v lags", pair)
	}
	require.False(t, seen[[2]string{"late", "b"}], "older than late's subscription")
	for n := 1; n <= len(want)+1; n++ {
		var got []wireLagging
		b.doJSON("GET", fmt.Sprintf("/api/v1/consumer-groups/lagging?limit=%d", n), nil, http.StatusOK, &got)
		require.Equal(t, want[:min(n, len(want))], keysOf(got), "limit %d", n)
	}
	for _, bad := range []string{"0", "-1", "10001", "x"} {
		status, _ := b.do("GET", "/api/v1/consumer-groups/lagging?limit="+bad, nil)
		require.Equal(t, http.StatusBadRequest, status, bad)
	}
}
