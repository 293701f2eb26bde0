package pgevents

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const testTenant = "3f0e0f6e-8d2b-4d0c-9a43-6c1b8a9e2b10"

func TestPayloadShape(t *testing.T) {
	t.Parallel()
	push, pop := true, false
	require.JSONEq(t, `{"v":1,"from":"a","type":"ready","tenant":"`+testTenant+`","queues":["x","y"]}`,
		string(marshal(event{V: 1, From: "a", Type: TypeReady, Tenant: testTenant, Queues: []string{"x", "y"}})))
	require.JSONEq(t, `{"v":1,"from":"a","type":"maintenance","push":true,"pop":false}`,
		string(marshal(event{V: 1, From: "a", Type: TypeMaintenance, Push: &push, Pop: &pop})))
	require.JSONEq(t, `{"v":1,"type":"queue_config","tenant":"`+testTenant+`","queues":["q"],"deleted":true}`,
		string(marshal(event{V: 1, Type: TypeQueueConfig, Tenant: testTenant, Queues: []string{"q"}, Deleted: true})))
}

func TestSplit(t *testing.T) {
	t.Parallel()
	names := func(n int, f string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf(f, i)
		}
		return out
	}
	tests := []struct {
		name     string
		queues   []string
		payloads int // 0: more than one
		skipped  int
	}{
		{name: "one", queues: []string{"a"}, payloads: 1},
		{name: "empty names only", queues: []string{"", ""}, payloads: -1},
		{name: "many short", queues: names(3000, "queue-%05d")},
		{name: "escaping grows names", queues: names(2000, `q<%d>"&\`)},
		{name: "multi-byte", queues: names(1500, "очередь-%d-é")},
		{name: "a name too long alone", queues: []string{"a", strings.Repeat("x", MaxPayload), "b"}, payloads: 1, skipped: 1},
		{name: "a name that just fits", queues: []string{strings.Repeat("y", MaxPayload-150)}, payloads: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			base := event{V: 1, From: "broker-with-a-long-server-id", Type: TypeReady, Tenant: testTenant}
			payloads, skipped := split(base, tt.queues)
			require.Equal(t, tt.skipped, skipped)
			switch tt.payloads {
			case 0:
				require.Greater(t, len(payloads), 1)
			case -1:
				require.Empty(t, payloads)
			default:
				require.Len(t, payloads, tt.payloads)
			}
			var got []string
			for i, p := range payloads {
				require.LessOrEqual(t, len(p), MaxPayload)
				if i < len(payloads)-1 {
					require.Greater(t, len(p), MaxPayload-200, "payloads are filled, not cut early")
				}
				e, err := decode(string(p))
				require.NoError(t, err)
				require.Equal(t, base.From, e.From)
				require.Equal(t, testTenant, e.Tenant)
				got = append(got, e.Queues...)
			}
			var want []string
			for _, q := range tt.queues {
				if q != "" && len(q) < MaxPayload {
					want = append(want, q)
				}
			}
			require.Equal(t, want, got)
		})
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		payload string
		want    event
		wantErr bool
	}{
		{name: "ready", payload: `{"v":1,"from":"a","type":"ready","tenant":"` + strings.ToUpper(testTenant) + `","queues":["x","","y"]}`,
			want: event{V: 1, From: "a", Type: TypeReady, Tenant: testTenant, Queues: []string{"x", "y"}}},
		{name: "from the SQL API", payload: `{"v":1,"type":"ready","tenant":"` + testTenant + `","queues":["x"]}`,
			want: event{V: 1, Type: TypeReady, Tenant: testTenant, Queues: []string{"x"}}},
		{name: "no tenant", payload: `{"v":1,"type":"ready","queues":["x"]}`, want: event{V: 1, Type: TypeReady, Queues: []string{"x"}}},
		{name: "bad tenant", payload: `{"v":1,"type":"ready","tenant":"acme","queues":["x"]}`, want: event{V: 1, Type: TypeReady, Queues: []string{"x"}}},
		{name: "only push", payload: `{"v":1,"type":"maintenance","push":true}`, want: event{V: 1, Type: TypeMaintenance, Push: ptr(true)}},
		{name: "ready without queues", payload: `{"v":1,"type":"ready","queues":[""]}`, wantErr: true},
		{name: "maintenance without flags", payload: `{"v":1,"type":"maintenance"}`, wantErr: true},
		{name: "other version", payload: `{"v":2,"type":"ready","queues":["x"]}`, wantErr: true},
		{name: "unknown type", payload: `{"v":1,"type":"reboot","queues":["x"]}`, wantErr: true},
		{name: "not an object", payload: `["v",1]`, wantErr: true},
		{name: "not json", payload: `hello`, wantErr: true},
		{name: "wrong field type", payload: `{"v":1,"type":"ready","queues":"x"}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := decode(tt.payload)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func ptr[T any](v T) *T { return &v }

// FuzzDecode: a notification can come from any session on the database;
// whatever it holds, decode never panics, and what it accepts is an event a
// broker can act on and would encode the same way. Seeds in
// testdata/fuzz/FuzzDecode run in every go test.
func FuzzDecode(f *testing.F) {
	f.Add(`{"v":1,"from":"a","type":"ready","tenant":"` + testTenant + `","queues":["x"]}`)
	f.Add(`{"v":1,"type":"maintenance","pop":false}`)
	f.Add(`{"v":1,"type":"queue_config","queues":["q"],"deleted":true}`)
	f.Add(`{"v":1,"type":"ready","queues":null}`)
	f.Fuzz(func(t *testing.T, payload string) {
		e, err := decode(payload)
		if err != nil {
			return
		}
		require.Contains(t, []string{TypeReady, TypeQueueConfig, TypeMaintenance}, e.Type)
		require.True(t, e.Tenant == "" || canonicalTenant(e.Tenant) == e.Tenant)
		if e.Type == TypeMaintenance {
			require.True(t, e.Push != nil || e.Pop != nil)
		} else {
			require.NotEmpty(t, e.Queues)
		}
		for _, q := range e.Queues {
			require.NotEmpty(t, q)
		}
		again, err := decode(string(marshal(e)))
		require.NoError(t, err)
		require.Equal(t, e, again)
		var m map[string]any
		require.NoError(t, json.Unmarshal(marshal(e), &m))
	})
}
