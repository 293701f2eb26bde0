package crypto

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// The vectors below were made with Node.js's crypto module (OpenSSL), not
// with this package: key = bytes 0x00..0x1f, iv = bytes 0xa0..0xaf,
// plaintext = {"hello":"world","n":42}.
//
//	createCipheriv("aes-256-gcm", key, iv.subarray(0, 12))  // what C++ v0.16 did
//	createCipheriv("aes-256-gcm", key, iv)                  // the Node.js broker
var (
	katKey = func() []byte {
		k := make([]byte, KeySize)
		for i := range k {
			k[i] = byte(i)
		}
		return k
	}()
	katIV        = [IVSize]byte{0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf}
	katPlaintext = []byte(`{"hello":"world","n":42}`)
	kat12        = `{"encrypted":"nToUSCmnbZ1YR/C8dRak/FyONzKog3AR","iv":"oKGio6SlpqeoqaqrrK2urw==","authTag":"3PSQY9z8xXivnBTZndRSXg=="}`
	kat16        = `{"encrypted":"UYFL2XSholT5vGjen3jpsq5nLVtEAGPR","iv":"oKGio6SlpqeoqaqrrK2urw==","authTag":"/AwVaifEJJj8K7KfLg22sw=="}`
)

func newTestCipher(t *testing.T, key []byte) *Cipher {
	t.Helper()
	c, err := New(key)
	require.NoError(t, err)
	return c
}

// ENC-2: with a fixed key and an injected IV, sealing produces byte for byte
// the envelope OpenSSL produces with nonce = iv[0:12], so the reference
// brokers read what we write.
func TestSealKnownAnswer(t *testing.T) {
	t.Parallel()
	c := newTestCipher(t, katKey)
	got, err := c.sealWithIV(katIV, katPlaintext)
	require.NoError(t, err)
	require.JSONEq(t, kat12, string(got))

	var env map[string]string
	require.NoError(t, json.Unmarshal(got, &env))
	require.Len(t, env, 3)
	for field, size := range map[string]int{"iv": IVSize, "authTag": TagSize} {
		raw, err := base64.StdEncoding.DecodeString(env[field])
		require.NoError(t, err, field)
		require.Len(t, raw, size, field)
	}
}

// ENC-2/ENC-3: envelopes of both reference generations open.
func TestOpenReferenceEnvelopes(t *testing.T) {
	t.Parallel()
	c := newTestCipher(t, katKey)
	for name, env := range map[string]string{"c++ and rust (12-byte nonce)": kat12, "node.js (16-byte nonce)": kat16} {
		pt, err := c.Open([]byte(env))
		require.NoError(t, err, name)
		require.Equal(t, katPlaintext, pt, name)
	}
	// jsonb reorders keys and adds spaces; extra members are tolerated.
	pt, err := c.Open([]byte(`{"iv": "oKGio6SlpqeoqaqrrK2urw==", "authTag": "3PSQY9z8xXivnBTZndRSXg==", "encrypted": "nToUSCmnbZ1YR/C8dRak/FyONzKog3AR", "v": 1}`))
	require.NoError(t, err)
	require.Equal(t, katPlaintext, pt)
}

func TestSealOpenRoundTripFreshIVs(t *testing.T) {
	t.Parallel()
	c := newTestCipher(t, katKey)
	a, err := c.Seal(katPlaintext)
	require.NoError(t, err)
	b, err := c.Seal(katPlaintext)
	require.NoError(t, err)
	require.NotEqual(t, a, b, "every seal draws a new iv")
	require.False(t, bytes.Contains(a, []byte("world")))
	for _, env := range [][]byte{a, b} {
		pt, err := c.Open(env)
		require.NoError(t, err)
		require.Equal(t, katPlaintext, pt)
	}
	empty, err := c.Seal([]byte{})
	require.NoError(t, err)
	pt, err := c.Open(empty)
	require.NoError(t, err)
	require.Empty(t, pt)
}

// ENC-3: refusals. A wrong key, a damaged envelope, and an IV or tag that is
// not 16 bytes fail with ErrDecrypt; anything that is not an envelope is
// ErrNotEnvelope.
func TestOpenRefusals(t *testing.T) {
	t.Parallel()
	c := newTestCipher(t, katKey)
	other := make([]byte, KeySize)
	for i := range other {
		other[i] = 0xff
	}
	_, err := newTestCipher(t, other).Open([]byte(kat12))
	require.ErrorIs(t, err, ErrDecrypt, "wrong key")

	flipped := bytes.Replace([]byte(kat12), []byte("nToU"), []byte("nToV"), 1)
	_, err = c.Open(flipped)
	require.ErrorIs(t, err, ErrDecrypt, "damaged ciphertext")

	for name, env := range map[string]string{
		"12-byte iv":   `{"encrypted":"nToUSCmnbZ1YR/C8dRak/FyONzKog3AR","iv":"oKGio6SlpqeoqaqrrA==","authTag":"3PSQY9z8xXivnBTZndRSXg=="}`,
		"8-byte tag":   `{"encrypted":"nToUSCmnbZ1YR/C8dRak/FyONzKog3AR","iv":"oKGio6SlpqeoqaqrrK2urw==","authTag":"3PSQY9z8xXg="}`,
		"bad base64":   `{"encrypted":"***","iv":"oKGio6SlpqeoqaqrrK2urw==","authTag":"3PSQY9z8xXivnBTZndRSXg=="}`,
		"url alphabet": `{"encrypted":"nToUSCmnbZ1YR_C8dRak_FyONzKog3AR","iv":"oKGio6SlpqeoqaqrrK2urw==","authTag":"3PSQY9z8xXivnBTZndRSXg=="}`,
	} {
		_, err := c.Open([]byte(env))
		require.ErrorIs(t, err, ErrDecrypt, name)
	}

	for _, stored := range []string{
		`{"hello":"world"}`, `"authTag"`, `[{"encrypted":"a","iv":"b","authTag":"c"}]`, `null`, ``, `42`,
		`{"encrypted":"a","iv":"b"}`, `{"encrypted":"a","iv":"b","authTag":null}`, `{"encrypted":1,"iv":"b","authTag":"c"}`,
		`{"encrypted":"a","iv":"b","authTag":"c"`,
	} {
		_, err := c.Open([]byte(stored))
		require.ErrorIs(t, err, ErrNotEnvelope, stored)
		require.False(t, IsEnvelope([]byte(stored)), stored)
	}
	require.True(t, IsEnvelope([]byte(kat16)))
}

func TestNewRefusesWrongKeySize(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 16, 31, 33, 64} {
		_, err := New(make([]byte, n))
		require.Error(t, err, n)
	}
}

// The envelope detector reads stored payloads, which are client input.
func FuzzOpen(f *testing.F) {
	f.Add([]byte(kat12))
	f.Add([]byte(kat16))
	f.Add([]byte(`{"encrypted":"","iv":"","authTag":""}`))
	f.Add([]byte(`{"authTag":"AAAAAAAAAAAAAAAAAAAAAA==","iv":"AAAAAAAAAAAAAAAAAAAAAA==","encrypted":""}`))
	c, err := New(katKey)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, stored []byte) {
		pt, err := c.Open(stored)
		if err == nil {
			// Only a genuine envelope under this key opens.
			if !IsEnvelope(stored) {
				t.Fatalf("opened a non-envelope: %q", stored)
			}
			_ = pt
		}
	})
}
