package broker

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/queenforgo/queen/gen/db"
	"github.com/queenforgo/queen/handlers/crypto"
)

// payloadWarnEvery rate-limits the warnings of sealer, which can
// otherwise fire once per message.
const payloadWarnEvery = time.Minute

// sealer is payload encryption at rest (SECURITY-REQUIREMENTS §4): every
// write path seals through it (insert.go, spool.go) and every read path
// opens through it (pops here, the adapter's reads through OpenPayload).
//
// The rules, and why:
//   - A payload is sealed only when the queue has encryption_enabled and a
//     key is loaded (ENC-1). A flagged queue without a key stores plaintext
//     and the push succeeds, as the founding page says; a sampled warning
//     names the queue, so the mistake is visible without failing producers.
//   - On read, a payload is opened when it has the envelope's shape and a key
//     is loaded, whatever the queue's flag says now (ENC-3), so turning the
//     flag off never strands messages.
//   - A payload that does not open (no key, another key, a damaged envelope)
//     is served as stored, the envelope itself, and the read succeeds (ENC-3):
//     failing the pop would block the partition behind one message. A sampled
//     warning says so, without the payload or anything about the key.
type sealer struct {
	cipher *crypto.Cipher // nil: no key loaded
	log    *slog.Logger

	lastPlainWarn  atomic.Int64 // unix nanoseconds of the last warning
	lastOpenWarn   atomic.Int64
	undecryptables atomic.Int64 // envelopes served as stored since boot
}

// seal returns the payload to store and whether it is an envelope.
func (p *sealer) seal(q db.QueenQueue, payload json.RawMessage) (json.RawMessage, bool, error) {
	if !q.EncryptionEnabled {
		return payload, false, nil
	}
	if p.cipher == nil {
		if sampled(&p.lastPlainWarn) {
			p.log.Warn("queue has encryption enabled but QUEEN_ENCRYPTION_KEY is not set: payloads stored in plaintext",
				"queue", q.Name)
		}
		return payload, false, nil
	}
	env, err := p.cipher.Seal(payload)
	if err != nil {
		// Never store plaintext the queue asked to encrypt: fail the push.
		return nil, false, fmt.Errorf("encrypt payload for queue %q: %w", q.Name, err)
	}
	return env, true, nil
}

// open returns the payload to serve. encrypted is the row's is_encrypted.
func (p *sealer) open(stored []byte, encrypted bool) json.RawMessage {
	if p.cipher == nil {
		if encrypted {
			p.servedSealed("no key loaded")
		}
		return stored
	}
	plain, err := p.cipher.Open(stored)
	switch {
	case errors.Is(err, crypto.ErrNotEnvelope):
		return stored
	case err != nil:
		p.servedSealed("wrong key or damaged envelope")
		return stored
	case !json.Valid(plain):
		// The response embeds the payload as JSON: what is not JSON stays
		// sealed rather than breaking the answer.
		p.servedSealed("decrypted payload is not JSON")
		return stored
	}
	return plain
}

func (p *sealer) servedSealed(reason string) {
	n := p.undecryptables.Add(1)
	if sampled(&p.lastOpenWarn) {
		p.log.Warn("encrypted payload served as stored: it cannot be decrypted",
			"reason", reason, "since_boot", n)
	}
}

// sampled reports whether a warning may be logged now, at most once per
// payloadWarnEvery for each last.
func sampled(last *atomic.Int64) bool {
	now := time.Now().UnixNano()
	prev := last.Load()
	if prev != 0 && now-prev < int64(payloadWarnEvery) {
		return false
	}
	return last.CompareAndSwap(prev, now)
}

// OpenPayload is a stored payload as clients see it: opened when it is an
// envelope this broker's key opens, else as stored (see sealer). The read
// routes of the dashboard call it for every payload they serve.
func (b *Broker) OpenPayload(stored []byte, encrypted bool) json.RawMessage {
	return b.seal.open(stored, encrypted)
}

// storedPayload is the payload to insert for it and whether it is sealed:
// a payload replayed sealed stays as it is (sealing it again would lock it
// in two envelopes), everything else is sealed as its queue asks.
func (b *Broker) storedPayload(q db.QueenQueue, it PushItem) (json.RawMessage, bool, error) {
	if it.sealed {
		return it.Payload, true, nil
	}
	return b.seal.seal(q, it.Payload)
}
