package mesh

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
)

// protocolVersion is carried in the challenge and HELLO and bound into every
// MAC, so that a later protocol cannot be downgraded to this one unnoticed.
const protocolVersion = 1

// Values of the challenge's "auth" field.
const (
	AuthOff  = "off"  // open mode: no secret, frames unauthenticated
	AuthHMAC = "hmac" // handshake and every frame authenticated
)

const (
	nonceSize = 32
	macSize   = sha256.Size
	seqSize   = 8
	// sealedOverhead is what an authenticated frame carries beyond a plain
	// one: the sequence number and the MAC, between the type and the payload.
	sealedOverhead = seqSize + macSize
)

// Labels that keep the three uses of the secret apart.
const (
	labelHello   = "queen-mesh hello"
	labelWelcome = "queen-mesh welcome"
	labelFrames  = "queen-mesh frames"
)

// challengeMsg is the listener's first frame on every accepted connection.
type challengeMsg struct {
	V        int    `json:"v"`
	ServerID string `json:"server_id"`
	Instance string `json:"instance"` // random per process: lets a dialer notice it dialled itself
	Nonce    string `json:"nonce"`    // hex, nonceSize bytes, fresh per connection
	Auth     string `json:"auth"`     // AuthOff or AuthHMAC
}

// helloMsg is the dialer's answer.
type helloMsg struct {
	V        int    `json:"v"`
	ServerID string `json:"server_id"`
	Nonce    string `json:"nonce"`     // hex, nonceSize bytes, fresh per connection
	MAC      string `json:"mac"`       // hex HMAC over the transcript; empty in open mode
	HTTPAddr string `json:"http_addr"` // informational: the dialer's HTTP address
}

// welcomeMsg is the listener's acceptance. Its MAC proves to the dialer that
// the listener knows the secret too, so frames never go to an impostor.
type welcomeMsg struct {
	MAC string `json:"mac"`
}

// transcript is what a handshake MAC covers: a label, the version, both
// nonces, both server ids and the dialer's HTTP address, each length-prefixed
// so that no two different handshakes share an encoding.
type transcript struct {
	listenerNonce, dialerNonce []byte
	listenerID, dialerID       string
	httpAddr                   string
}

func (t transcript) bytes(label string) []byte {
	b := make([]byte, 0, 160+len(t.listenerID)+len(t.dialerID)+len(t.httpAddr))
	b = appendField(b, []byte(label))
	b = append(b, protocolVersion)
	b = appendField(b, t.listenerNonce)
	b = appendField(b, t.dialerNonce)
	b = appendField(b, []byte(t.listenerID))
	b = appendField(b, []byte(t.dialerID))
	return appendField(b, []byte(t.httpAddr))
}

func appendField(b, v []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

// mac is HMAC-SHA256 under the shared secret of the labelled transcript.
func (t transcript) mac(secret []byte, label string) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write(t.bytes(label))
	return h.Sum(nil)
}

// sessionKey derives the key of the per-frame MACs with HKDF-SHA256 from the
// secret, salted with both nonces: every connection has its own key, so a
// frame recorded on one connection is worthless on any other.
func (t transcript) sessionKey(secret []byte) []byte {
	salt := append(append([]byte{}, t.listenerNonce...), t.dialerNonce...)
	key, err := hkdf.Key(sha256.New, secret, salt, string(t.bytes(labelFrames)), sha256.Size)
	if err != nil {
		// Only a key length over 255 hash sizes fails; ours is one.
		panic("mesh: hkdf: " + err.Error())
	}
	return key
}

// verifyMAC compares a hex MAC with the expected bytes in constant time.
func verifyMAC(hexMAC string, want []byte) bool {
	got, err := hex.DecodeString(hexMAC)
	if err != nil || len(got) != len(want) {
		return false
	}
	return hmac.Equal(got, want)
}

func newNonce() []byte {
	b := make([]byte, nonceSize)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return b
}

func decodeNonce(s string) ([]byte, bool) {
	b, err := hex.DecodeString(s)
	return b, err == nil && len(b) == nonceSize
}

// decodeStrict unmarshals a handshake message. Handshake JSON comes from
// unauthenticated strangers, so only an object is accepted.
func decodeStrict(b []byte, v any) bool {
	return len(b) > 0 && b[0] == '{' && json.Unmarshal(b, v) == nil
}

// Errors of an authenticated frame. Each one ends the connection.
var (
	errFrameMAC      = errors.New("mesh: frame MAC does not verify")
	errFrameSequence = errors.New("mesh: frame sequence number out of order")
)

// sealer authenticates the frames one dialled connection sends: after the
// type byte come a sequence number that starts at 1 and grows by one per
// frame, and HMAC-SHA256(session key, sequence ‖ type ‖ payload).
type sealer struct {
	h   hash.Hash
	seq uint64
	sum [macSize]byte
}

func newSealer(key []byte) *sealer { return &sealer{h: hmac.New(sha256.New, key)} }

// appendFrame appends one sealed frame; a nil sealer appends a plain one
// (open mode).
func (s *sealer) appendFrame(dst []byte, t FrameType, payload []byte) []byte {
	if s == nil {
		return appendFrame(dst, t, payload)
	}
	s.seq++
	var seq [seqSize]byte
	binary.BigEndian.PutUint64(seq[:], s.seq)
	s.h.Reset()
	s.h.Write(seq[:])
	s.h.Write([]byte{byte(t)})
	s.h.Write(payload)
	mac := s.h.Sum(s.sum[:0])
	dst = binary.BigEndian.AppendUint32(dst, uint32(1+sealedOverhead+len(payload)))
	dst = append(dst, byte(t))
	dst = append(dst, seq[:]...)
	dst = append(dst, mac...)
	return append(dst, payload...)
}

// opener checks the frames one accepted connection receives. A frame must
// carry a MAC that verifies under this connection's key and exactly the next
// sequence number: a forged or altered frame fails the MAC, and a frame sent
// again (on this connection or copied from another) fails one or the other.
type opener struct {
	h    hash.Hash
	last uint64
	sum  [macSize]byte
}

func newOpener(key []byte) *opener { return &opener{h: hmac.New(sha256.New, key)} }

// open returns the payload of a sealed frame's body (everything after the
// type byte).
func (o *opener) open(t FrameType, body []byte) ([]byte, error) {
	if len(body) < sealedOverhead {
		return nil, errFrameMAC
	}
	seq, mac, payload := body[:seqSize], body[seqSize:sealedOverhead], body[sealedOverhead:]
	o.h.Reset()
	o.h.Write(seq)
	o.h.Write([]byte{byte(t)})
	o.h.Write(payload)
	if !hmac.Equal(mac, o.h.Sum(o.sum[:0])) {
		return nil, errFrameMAC
	}
	if binary.BigEndian.Uint64(seq) != o.last+1 {
		return nil, errFrameSequence
	}
	o.last++
	return payload, nil
}
