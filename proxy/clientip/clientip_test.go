package clientip_test

import (
	"crypto/tls"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/proxy/clientip"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"nope", "10.0.0.0/33", "1.2.3"} {
		_, err := clientip.Parse(bad)
		require.Error(t, err, bad)
	}
	tr, err := clientip.Parse(" loopback, 10.1.0.0/16 ,,192.0.2.7, PRIVATE")
	require.NoError(t, err)
	require.False(t, tr.Empty())
	empty, err := clientip.Parse("")
	require.NoError(t, err)
	require.True(t, empty.Empty())
}

func TestClientIP(t *testing.T) {
	t.Parallel()
	tr, err := clientip.Parse("10.0.0.0/8, ::1")
	require.NoError(t, err)
	tests := []struct {
		name, remote string
		xff          []string
		want         string
	}{
		{"untrusted peer: its own address, whatever it says", "203.0.113.9:5000", []string{"1.2.3.4"}, "203.0.113.9"},
		{"trusted peer: the entry it appended", "10.0.0.1:5000", []string{"198.51.100.7"}, "198.51.100.7"},
		{"a chain of trusted proxies", "10.0.0.1:5000", []string{"6.6.6.6, 198.51.100.7, 10.0.0.2"}, "198.51.100.7"},
		{"spoofed entries left of the client are ignored", "10.0.0.1:1", []string{"1.1.1.1", "198.51.100.7"}, "198.51.100.7"},
		{"no header: the proxy itself", "10.0.0.1:5000", nil, "10.0.0.1"},
		{"garbage stops at the last trusted hop", "10.0.0.1:5000", []string{"198.51.100.7, garbage"}, "10.0.0.1"},
		{"ipv6 peer, address with port", "[::1]:80", []string{"[2001:db8::1]:443"}, "2001:db8::1"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tt.remote
		for _, h := range tt.xff {
			r.Header.Add("X-Forwarded-For", h)
		}
		require.Equal(t, tt.want, tr.ClientIP(r).String(), tt.name)
	}
}

func TestSecureAndOrigin(t *testing.T) {
	t.Parallel()
	tr, err := clientip.Parse("loopback")
	require.NoError(t, err)
	r := httptest.NewRequest("GET", "http://Acme.Example.com/x", nil)
	r.RemoteAddr = "203.0.113.9:1"
	r.Header.Set("X-Forwarded-Proto", "https")
	require.False(t, tr.Secure(r), "an untrusted peer's X-Forwarded-Proto is ignored")
	require.Equal(t, "http://acme.example.com", tr.Origin(r))
	r.RemoteAddr = "127.0.0.1:1"
	require.True(t, tr.Secure(r))
	require.Equal(t, "https://acme.example.com", tr.Origin(r))
	r.Header.Del("X-Forwarded-Proto")
	r.TLS = &tls.ConnectionState{}
	require.True(t, tr.Secure(r))
}

func TestBucket(t *testing.T) {
	t.Parallel()
	tr, _ := clientip.Parse("")
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "[2001:db8:1:2:3:4:5:6]:1"
	require.Equal(t, "2001:db8:1:2::/64", clientip.Bucket(tr.ClientIP(r)))
	r.RemoteAddr = "192.0.2.1:1"
	require.Equal(t, "192.0.2.1", clientip.Bucket(tr.ClientIP(r)))
	r.RemoteAddr = "pipe"
	require.Equal(t, "unknown", clientip.Bucket(tr.ClientIP(r)))
}
