package handlers

import (
	"encoding/json"
	"unsafe"

	"github.com/queenforgo/queen/handlers/broker"
)

// decodePushBody decodes a push body (PushRequest) in one pass over the
// bytes, for the hottest route: payloads stay sub-slices of body (checked to
// be JSON, never copied) and a push's repeated queue and partition names are
// one string each. encoding/json, which the generated handler uses, scans the
// body twice and copies every field and payload; at batch 100 that was a
// third of the broker's CPU per pushed message (docs/benchmarks.md).
//
// It decides only what it is sure encoding/json's Decoder decides the same
// way into api.PushRequest: with ok it returns exactly the items that
// decoding would give (a null or absent field as "", an absent or null
// payload as nil). Anything else (a syntax error, a wrong type, a duplicate
// key, a key in another case, a nesting deeper than maxFastDepth, no items)
// answers !ok, and the caller hands the body to the generated decoder, which
// gives the answer it always gave. So the fast path cannot change which
// bodies are accepted or how a refusal reads; the tests and FuzzPushDecode
// hold it to that.
//
// body must not be modified afterwards: the transaction and trace ids point
// into it.
func decodePushBody(body []byte) (items []broker.PushItem, ok bool) {
	d := pushScanner{b: body}
	d.ws()
	if !d.eat('{') {
		return nil, false
	}
	seen := false
	d.ws()
	for !d.eat('}') {
		if seen && !d.eat(',') {
			return nil, false
		}
		if seen {
			d.ws()
		}
		key, ok := d.key()
		if !ok {
			return nil, false
		}
		switch string(key) {
		case "items":
			if items != nil {
				return nil, false
			}
			items, ok = d.items()
		case "bufferMs", "bufferMax":
			ok = d.skip(true)
		default:
			ok = !foldsToAny(key, pushRequestKeys) && d.skip(false)
		}
		if !ok {
			return nil, false
		}
		seen = true
		d.ws()
	}
	// What follows the object is never read by encoding/json's Decoder.
	return items, items != nil
}

// The members of PushRequest and PushItem as openapi.yaml names them (and
// gen/api's json tags spell them); TestPushDecodeKeysMatchSpec checks both.
var (
	pushRequestKeys = []string{"items", "bufferMs", "bufferMax"}
	pushItemKeys    = []string{"queue", "partition", "payload", "transactionId", "traceId", "producerSub", "namespace", "task"}
)

// maxFastDepth bounds the nesting of a value the fast path follows (one bit
// per level); deeper values go to encoding/json, which has its own limit
// (10,000) and error for it.
const maxFastDepth = 64

// pushScanner walks a body; b is never modified.
type pushScanner struct {
	b []byte
	i int
	// Queue and partition names decoded so far (up to maxNames): the items
	// of one push mostly share a few, and then share their strings.
	names []string
}

// maxNames bounds the names a push's decode remembers.
const maxNames = 16

func (d *pushScanner) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// eat consumes c if it is next.
func (d *pushScanner) eat(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// key reads a member name and the colon after it. Names with escapes or
// bytes outside ASCII are not handled here (encoding/json folds them,
// Unicode included).
func (d *pushScanner) key() ([]byte, bool) {
	raw, plain, ok := d.str()
	if !ok || !plain {
		return nil, false
	}
	d.ws()
	if !d.eat(':') {
		return nil, false
	}
	d.ws()
	return raw, true
}

// items reads the items array.
func (d *pushScanner) items() ([]broker.PushItem, bool) {
	return scanArray(d, d.item)
}

// scanArray reads a JSON array whose elements item reads; false for
// anything else (null included), which sends the body to the generated
// decoder.
func scanArray[T any](d *pushScanner, item func(*T) bool) ([]T, bool) {
	if !d.eat('[') {
		return nil, false
	}
	d.ws()
	if d.eat(']') {
		return []T{}, true
	}
	// Elements are decoded in place in the slice: a local passed to item
	// through a func value would escape, an allocation per element.
	first := make([]T, 1)
	start := d.i
	if !item(&first[0]) {
		return nil, false
	}
	// Size the slice from the first element: the elements of one body are
	// mostly alike.
	items := make([]T, 1, min(len(d.b)/max(d.i-start, 1)+1, 1001))
	items[0] = first[0]
	for {
		d.ws()
		if d.eat(']') {
			return items, true
		}
		if !d.eat(',') {
			return nil, false
		}
		d.ws()
		var zero T
		items = append(items, zero)
		if !item(&items[len(items)-1]) {
			return nil, false
		}
	}
}

// The members of PushItem that a repeat would overwrite (encoding/json
// keeps the last one, or merges): a repeat goes to the slow path.
const (
	seenQueue = 1 << iota
	seenPartition
	seenPayload
	seenTransactionID
	seenTraceID
)

// item reads one PushItem object into it.
func (d *pushScanner) item(it *broker.PushItem) bool {
	if !d.eat('{') {
		return false // null or another type
	}
	d.ws()
	if d.eat('}') {
		return true
	}
	var seen int
	for {
		key, ok := d.key()
		if !ok {
			return false
		}
		var bit int
		switch string(key) {
		case "queue":
			bit = seenQueue
			ok = d.peek() == '"' && d.name(&it.Queue)
		case "partition":
			bit = seenPartition
			ok = d.null() || d.name(&it.Partition)
		case "transactionId":
			bit = seenTransactionID
			ok = d.null() || d.id(&it.TransactionID)
		case "traceId":
			bit = seenTraceID
			ok = d.null() || d.id(&it.TraceID)
		case "payload":
			bit = seenPayload
			start := d.i
			if ok = d.skip(false); ok && string(d.b[start:d.i]) != "null" {
				it.Payload = d.b[start:d.i:d.i]
			}
		case "producerSub", "namespace", "task":
			ok = d.skip(true)
		default:
			ok = !foldsToAny(key, pushItemKeys) && d.skip(false)
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		d.ws()
		if d.eat('}') {
			return true
		}
		if !d.eat(',') {
			return false
		}
		d.ws()
	}
}

func (d *pushScanner) peek() byte {
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// null consumes a JSON null.
func (d *pushScanner) null() bool {
	if len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// name reads a string into *dst as a string of its own (names outlive the
// request in the broker's caches and metrics), shared with an equal name
// decoded before.
func (d *pushScanner) name(dst *string) bool {
	start := d.i
	raw, plain, ok := d.str()
	if !ok {
		return false
	}
	if !plain {
		*dst, ok = unquote(d.b[start:d.i])
		return ok
	}
	for _, n := range d.names {
		if n == string(raw) {
			*dst = n
			return true
		}
	}
	*dst = string(raw)
	if len(d.names) < maxNames {
		d.names = append(d.names, *dst)
	}
	return true
}

// id reads a string into *dst without a copy: it points into the body,
// which lives as long as the payloads anyway.
func (d *pushScanner) id(dst *string) bool {
	start := d.i
	raw, plain, ok := d.str()
	switch {
	case !ok:
		return false
	case !plain:
		*dst, ok = unquote(d.b[start:d.i])
		return ok
	case len(raw) > 0:
		*dst = unsafe.String(&raw[0], len(raw))
	default:
		*dst = ""
	}
	return true
}

// unquote decodes a quoted JSON string with escapes or non-ASCII bytes as
// encoding/json does (invalid UTF-8 and lone surrogates become U+FFFD).
func unquote(quoted []byte) (string, bool) {
	var s string
	err := json.Unmarshal(quoted, &s)
	return s, err == nil
}

// foldsToAny reports whether key, plain ASCII, matches one of names the way
// encoding/json matches member names (ignoring ASCII case).
func foldsToAny(key []byte, names []string) bool {
	for _, n := range names {
		if len(n) == len(key) && equalFoldASCII(key, n) {
			return true
		}
	}
	return false
}

func equalFoldASCII(a []byte, b string) bool {
	for i := range a {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
