package inventory

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/proxy/limit"
)

// read gives an inventory the state a pass would have left: queues with
// their partitions.
func read(i *Inventory, cluster uuid.UUID, queues map[string][]string) {
	s := i.state(cluster)
	s.read = true
	for q, parts := range queues {
		qs := &queueState{parts: map[string]uint64{}}
		for _, p := range parts {
			qs.parts[p] = 0
		}
		s.queues[q] = qs
	}
}

func TestAdmit(t *testing.T) {
	t.Parallel()
	lim := limit.Limits{MaxQueues: 2, MaxPartitionsPerQueue: 2}
	existing := map[string][]string{"a": {"Default", "x"}}
	tests := []struct {
		name    string
		pairs   []Pair
		refusal string
	}{
		{"known pairs", []Pair{{"a", "x"}, {"a", "Default"}}, ""},
		{"a new queue", []Pair{{"b", "Default"}, {"b", "y"}}, ""},
		{"a third partition", []Pair{{"a", "y"}}, `partition "y" would be partition 3 of queue "a", over the limit of 2`},
		{"a third queue", []Pair{{"b", "Default"}, {"c", "Default"}}, `queue "c" would be queue 3 of this cluster, over the limit of 2`},
		{"three partitions of a new queue", []Pair{{"b", "1"}, {"b", "2"}, {"b", "3"}}, `partition "3" would be partition 3 of queue "b", over the limit of 2`},
		{"a pair twice counts once", []Pair{{"b", "1"}, {"b", "1"}, {"b", "2"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			i := New(Config{})
			cluster := uuid.New()
			read(i, cluster, existing)
			refusal, _ := i.Admit(cluster, lim, tt.pairs, false)
			require.Equal(t, tt.refusal, refusal)
		})
	}
}

func TestAdmitRecordsAndUndoes(t *testing.T) {
	t.Parallel()
	i := New(Config{})
	cluster := uuid.New()
	lim := limit.Limits{MaxQueues: 1}

	refusal, _ := i.Admit(cluster, lim, []Pair{{"a", "Default"}, {"b", "Default"}}, false)
	require.Empty(t, refusal, "nothing is checked before a pass has read the cluster")
	read(i, cluster, nil)
	refusal, _ = i.Admit(cluster, lim, []Pair{{"c", "Default"}}, false)
	require.NotEmpty(t, refusal, "what was admitted unchecked counts once the cluster is read")

	i.clusters[cluster].queues = map[string]*queueState{}
	_, undo := i.Admit(cluster, lim, []Pair{{"a", "Default"}}, false)
	refusal, _ = i.Admit(cluster, lim, []Pair{{"b", "Default"}}, false)
	require.NotEmpty(t, refusal, "an admitted queue counts at once")
	undo()
	refusal, _ = i.Admit(cluster, lim, []Pair{{"b", "Default"}}, false)
	require.Empty(t, refusal, "an undone admission frees its place")

	refusal, _ = i.Admit(cluster, lim, []Pair{{"c", "Default"}}, true)
	require.NotEmpty(t, refusal, "forced: still reported")
	refusal, _ = i.Admit(cluster, lim, []Pair{{"c", "Default"}}, false)
	require.Empty(t, refusal, "a forced admission is recorded")

	refusal, _ = i.Admit(cluster, limit.Limits{}, []Pair{{"d", "Default"}}, false)
	require.Empty(t, refusal, "no caps, nothing to check")
	var none *Inventory
	refusal, undo = none.Admit(cluster, lim, []Pair{{"d", "Default"}}, false)
	require.Empty(t, refusal)
	undo()
	require.False(t, none.StorageBlocked(cluster))

	i.Stop()
	i.Stop()
}

// A cluster the last complete pass did not list was created since: it is
// checked from an empty inventory. One the pass listed but could not read
// is not checked.
func TestAdmitNewCluster(t *testing.T) {
	t.Parallel()
	i := New(Config{})
	unread, created := uuid.New(), uuid.New()
	i.listed = map[uuid.UUID]bool{unread: true}
	lim := limit.Limits{MaxQueues: 1}
	pairs := []Pair{{"a", "Default"}, {"b", "Default"}}
	refusal, _ := i.Admit(unread, lim, pairs, false)
	require.Empty(t, refusal)
	refusal, _ = i.Admit(created, lim, pairs, false)
	require.Equal(t, `queue "b" would be queue 2 of this cluster, over the limit of 1`, refusal)
}

// A slow storage read spaces the next one out, so the pump's cost stays a
// fixed share of a backend; a fast one leaves the pump's own interval.
func TestStorageReadSpacing(t *testing.T) {
	t.Parallel()
	i := New(Config{})
	cluster := uuid.New()
	start := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	require.True(t, i.storageDue(cluster, start), "never read: due")

	i.state(cluster).storageNext = nextStorageRead(start, 300*time.Millisecond)
	require.False(t, i.storageDue(cluster, start.Add(5*time.Second)), "a 0.3 s read is not repeated within 6 s")
	require.True(t, i.storageDue(cluster, start.Add(6*time.Second)))
	require.True(t, i.storageDue(uuid.New(), start.Add(time.Second)), "another cluster is its own")

	require.Equal(t, start.Add(20*time.Millisecond), nextStorageRead(start, time.Millisecond), "a fast read: the pump's interval decides")
	require.Equal(t, start.Add(5*time.Minute), nextStorageRead(start, 35*time.Second), "a timed-out read is tried again within 5 minutes")
}
