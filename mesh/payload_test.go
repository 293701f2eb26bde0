package mesh

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// event is one handler call, for the recorder.
type event struct {
	kind    string // ready, config, push, pop
	tenant  string
	queues  []string
	deleted bool
	enabled bool
}

// recorder is a Handler that keeps every call.
type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) add(e event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *recorder) QueuesReady(tenant string, queues []string) {
	r.add(event{kind: "ready", tenant: tenant, queues: append([]string(nil), queues...)})
}

func (r *recorder) QueueConfigChanged(tenant, queue string, deleted bool) {
	r.add(event{kind: "config", tenant: tenant, queues: []string{queue}, deleted: deleted})
}
func (r *recorder) PushMaintenanceChanged(enabled bool) { r.add(event{kind: "push", enabled: enabled}) }
func (r *recorder) PopMaintenanceChanged(enabled bool)  { r.add(event{kind: "pop", enabled: enabled}) }

func (r *recorder) all() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

// readyQueues is the set of queues announced ready for the tenant.
func (r *recorder) readyQueues(tenant string) map[string]bool {
	out := map[string]bool{}
	for _, e := range r.all() {
		if e.kind == "ready" && e.tenant == tenant {
			for _, q := range e.queues {
				out[q] = true
			}
		}
	}
	return out
}

func (r *recorder) has(want event) bool {
	for _, e := range r.all() {
		if e.kind == want.kind && e.tenant == want.tenant && e.deleted == want.deleted &&
			e.enabled == want.enabled && fmt.Sprint(e.queues) == fmt.Sprint(want.queues) {
			return true
		}
	}
	return false
}

func TestDispatch(t *testing.T) {
	t.Parallel()
	const tenant = "3f0e0f6e-8d2b-4d0c-9a43-6c1b8a9e2b10"
	tests := []struct {
		name    string
		typ     FrameType
		payload string
		want    []event
	}{
		{name: "ready", typ: FrameMessageAvailable, payload: `{"tenant":"` + tenant + `","queues":["a","","b"]}`,
			want: []event{{kind: "ready", tenant: tenant, queues: []string{"a", "b"}}}},
		{name: "ready upper-case tenant", typ: FrameMessageAvailable, payload: `{"tenant":"` + strings.ToUpper(tenant) + `","queues":["a"]}`,
			want: []event{{kind: "ready", tenant: tenant, queues: []string{"a"}}}},
		{name: "ready without tenant means every tenant, not the default", typ: FrameMessageAvailable, payload: `{"queues":["a"]}`,
			want: []event{{kind: "ready", queues: []string{"a"}}}},
		{name: "ready with a malformed tenant", typ: FrameMessageAvailable, payload: `{"tenant":"acme","queues":["a"]}`,
			want: []event{{kind: "ready", queues: []string{"a"}}}},
		{name: "ready with no queue", typ: FrameMessageAvailable, payload: `{"tenant":"` + tenant + `","queues":[""]}`},
		{name: "config set", typ: FrameQueueConfigSet, payload: `{"tenant":"` + tenant + `","queue":"q"}`,
			want: []event{{kind: "config", tenant: tenant, queues: []string{"q"}}}},
		{name: "config delete", typ: FrameQueueConfigDelete, payload: `{"tenant":"` + tenant + `","queue":"q"}`,
			want: []event{{kind: "config", tenant: tenant, queues: []string{"q"}, deleted: true}}},
		{name: "config without queue", typ: FrameQueueConfigSet, payload: `{"tenant":"` + tenant + `"}`},
		{name: "push maintenance", typ: FrameMaintenance, payload: `{"enabled":true}`, want: []event{{kind: "push", enabled: true}}},
		{name: "pop maintenance", typ: FramePopMaintenance, payload: `{"enabled":true}`, want: []event{{kind: "pop", enabled: true}}},
		{name: "maintenance without enabled is off", typ: FrameMaintenance, payload: `{}`, want: []event{{kind: "push"}}},
		{name: "not json", typ: FrameMaintenance, payload: `{"enabled":tru`},
		{name: "wrong json type", typ: FrameMessageAvailable, payload: `{"queues":"a"}`},
		{name: "heartbeat", typ: FrameHeartbeat, payload: `{"server_id":"x"}`},
		{name: "unknown", typ: FrameType(77), payload: `{"queue":"a"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &recorder{}
			dispatch(r, tt.typ, []byte(tt.payload))
			require.Equal(t, tt.want, r.all())
		})
	}
}

// FuzzDispatch: any payload of any type either reaches the handler with a
// non-empty queue and a tenant that is "" or a lower-case UUID, or not at
// all; nothing panics. Seeds in testdata/fuzz/FuzzDispatch.
func FuzzDispatch(f *testing.F) {
	f.Add(uint8(FrameMessageAvailable), []byte(`{"tenant":"00000000-0000-0000-0000-000000000001","queues":["a"]}`))
	f.Add(uint8(FrameQueueConfigDelete), []byte(`{"tenant":"x","queue":"q"}`))
	f.Add(uint8(FrameMaintenance), []byte(`{"enabled":1}`))
	f.Add(uint8(FrameMessageAvailable), []byte(`null`))
	f.Fuzz(func(t *testing.T, typ uint8, payload []byte) {
		r := &recorder{}
		dispatch(r, FrameType(typ), payload)
		for _, e := range r.all() {
			require.True(t, e.tenant == "" || isUUID(e.tenant) && e.tenant == strings.ToLower(e.tenant), e.tenant)
			if e.kind == "ready" || e.kind == "config" {
				require.NotEmpty(t, e.queues)
				for _, q := range e.queues {
					require.NotEmpty(t, q)
				}
			}
		}
	})
}

func TestReadyFramesSplit(t *testing.T) {
	t.Parallel()
	var queues []string
	for i := range 40000 {
		queues = append(queues, fmt.Sprintf("queue-%06d-\"quoted\"", i))
	}
	frames := readyFrames(DefaultTenant, queues)
	require.Greater(t, len(frames), 1)
	var got []string
	for _, f := range frames {
		require.LessOrEqual(t, len(f), 2*readyChunk, "far below MaxFrameLen")
		var m readyMsg
		require.NoError(t, json.Unmarshal(f, &m))
		require.Equal(t, DefaultTenant, m.Tenant)
		got = append(got, m.Queues...)
	}
	require.Equal(t, queues, got)
	require.Len(t, readyFrames(DefaultTenant, []string{"a"}), 1)
	require.Empty(t, readyFrames(DefaultTenant, nil))
}

func TestIsUUID(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		DefaultTenant:                          true,
		"3F0E0F6E-8D2B-4D0C-9A43-6C1B8A9E2B10": true,
		"3f0e0f6e8d2b4d0c9a436c1b8a9e2b10":     false,
		"3f0e0f6e-8d2b-4d0c-9a43-6c1b8a9e2b1g": false,
		"3f0e0f6e-8d2b-4d0c-9a43_6c1b8a9e2b10": false,
		"":                                     false,
	} {
		require.Equal(t, want, isUUID(s), s)
	}
}
