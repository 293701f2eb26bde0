// Package crypto seals message payloads for storage and opens them again
// (SECURITY-REQUIREMENTS §4, payload encryption at rest).
//
// The stored form is the reference broker's envelope, a JSON object of three
// standard-base64 strings (with padding):
//
//	{"encrypted": <ciphertext>, "iv": <16 random bytes>, "authTag": <16-byte GCM tag>}
//
// The cipher is AES-256-GCM without additional data. The IV holds 16 random
// bytes but only the first 12 are the GCM nonce: the C++ v0.16 broker never
// set OpenSSL's IV length, so OpenSSL used its default of 12 bytes, and the
// Rust broker copies that to stay compatible. Sealing here does the same, so
// the C++ and Rust brokers read what this one writes. Opening tries that
// nonce first and, if the tag does not verify, the whole 16-byte IV as the
// nonce (GCM's GHASH-derived counter), which is how the first, Node.js
// broker used the same envelope. The tag authenticates either way, so a
// wrong guess can only fail, never produce a wrong plaintext.
//
// One key per process (QUEEN_ENCRYPTION_KEY); there is no key id in the
// envelope, so rotation means draining the encrypted queues first.
package crypto

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

const (
	// KeySize is the AES-256 key length in bytes.
	KeySize = 32
	// IVSize is the length of the envelope's iv field in bytes.
	IVSize = 16
	// TagSize is the length of the envelope's authTag field in bytes.
	TagSize = 16
	// nonceSize is the part of the IV used as the GCM nonce when sealing.
	nonceSize = 12
)

// Errors of Open. Neither says anything about the key or the payload.
var (
	// ErrNotEnvelope means the stored payload is not an envelope: it is
	// served as stored.
	ErrNotEnvelope = errors.New("payload is not an encryption envelope")
	// ErrDecrypt means the envelope does not open with the loaded key (a
	// different key, or a damaged envelope).
	ErrDecrypt = errors.New("envelope does not decrypt with the loaded key")
)

// Cipher seals and opens payloads with one AES-256 key. It is safe for
// concurrent use.
type Cipher struct {
	gcm12 cipher.AEAD // nonce = iv[:12]: C++ v0.16 and Rust brokers, and ours
	gcm16 cipher.AEAD // nonce = the whole iv: the Node.js broker
	rand  io.Reader
}

// New returns a Cipher for a 32-byte key.
func New(key []byte) (*Cipher, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("encryption key must be %d bytes, got %d", KeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("aes: %w", err)
	}
	gcm12, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("gcm: %w", err)
	}
	gcm16, err := cipher.NewGCMWithNonceSize(block, IVSize)
	if err != nil {
		return nil, fmt.Errorf("gcm: %w", err)
	}
	return &Cipher{gcm12: gcm12, gcm16: gcm16, rand: rand.Reader}, nil
}

// envelope is the stored form. Field order is the reference's; PostgreSQL
// jsonb reorders it anyway.
type envelope struct {
	Encrypted string `json:"encrypted"`
	IV        string `json:"iv"`
	AuthTag   string `json:"authTag"`
}

// Seal encrypts plaintext under a fresh random IV and returns the envelope
// JSON.
func (c *Cipher) Seal(plaintext []byte) ([]byte, error) {
	var iv [IVSize]byte
	if _, err := io.ReadFull(c.rand, iv[:]); err != nil {
		return nil, fmt.Errorf("read random iv: %w", err)
	}
	return c.sealWithIV(iv, plaintext)
}

func (c *Cipher) sealWithIV(iv [IVSize]byte, plaintext []byte) ([]byte, error) {
	sealed := c.gcm12.Seal(nil, iv[:nonceSize], plaintext, nil)
	ct, tag := sealed[:len(sealed)-TagSize], sealed[len(sealed)-TagSize:]
	enc := base64.StdEncoding
	return json.Marshal(envelope{
		Encrypted: enc.EncodeToString(ct),
		IV:        enc.EncodeToString(iv[:]),
		AuthTag:   enc.EncodeToString(tag),
	})
}

// Open decrypts a stored envelope. It returns ErrNotEnvelope when stored is
// not one (detection is by shape, whatever the queue's flag says: ENC-3) and
// ErrDecrypt when it is one that does not open with this key.
func (c *Cipher) Open(stored []byte) ([]byte, error) {
	env, ok := parseEnvelope(stored)
	if !ok {
		return nil, ErrNotEnvelope
	}
	enc := base64.StdEncoding
	ct, err1 := enc.DecodeString(env.Encrypted)
	iv, err2 := enc.DecodeString(env.IV)
	tag, err3 := enc.DecodeString(env.AuthTag)
	if err1 != nil || err2 != nil || err3 != nil || len(iv) != IVSize || len(tag) != TagSize {
		// The reference refuses these without trying to decrypt.
		return nil, ErrDecrypt
	}
	sealed := append(ct, tag...)
	if pt, err := c.gcm12.Open(nil, iv[:nonceSize], sealed, nil); err == nil {
		return pt, nil
	}
	if pt, err := c.gcm16.Open(nil, iv, sealed, nil); err == nil {
		return pt, nil
	}
	return nil, ErrDecrypt
}

// IsEnvelope reports whether a stored payload has the envelope's shape: a
// JSON object whose encrypted, iv and authTag members are strings. Other
// members are allowed, as in the reference.
func IsEnvelope(stored []byte) bool {
	_, ok := parseEnvelope(stored)
	return ok
}

// authTagKey is looked for before any parsing, so that ordinary payloads
// cost one byte scan.
var authTagKey = []byte(`"authTag"`)

func parseEnvelope(stored []byte) (envelope, bool) {
	trimmed := bytes.TrimLeft(stored, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' || !bytes.Contains(trimmed, authTagKey) {
		return envelope{}, false
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(trimmed, &fields) != nil {
		return envelope{}, false
	}
	var env envelope
	for name, dst := range map[string]*string{"encrypted": &env.Encrypted, "iv": &env.IV, "authTag": &env.AuthTag} {
		raw, ok := fields[name]
		if !ok || json.Unmarshal(raw, dst) != nil || raw[0] != '"' {
			return envelope{}, false
		}
	}
	return env, true
}
