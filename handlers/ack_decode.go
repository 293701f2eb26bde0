package handlers

import "github.com/queenforgo/queen/gen/api"

// decodeAckBody decodes a batch ack body (AckBatchRequest) in one pass over
// the bytes, with the push decoder's scanner (push_decode.go,
// push_decode_tokens.go): a consumer sends one per pop, and encoding/json
// (the generated handler's decode) was a tenth of the broker's CPU per
// consumed message (docs/benchmarks.md).
//
// Like decodePushBody it decides only what it is sure encoding/json's
// Decoder decides the same way into api.AckBatchRequest, and with ok returns
// exactly that value (the pointers of equal strings are shared); anything
// else (a syntax error, a wrong type, a duplicate key, a key in another
// case, an item's ignored consumerGroup other than a string or null, a
// missing or null acknowledgments) answers !ok, and the caller hands the
// body to the generated decoder. The handler then checks the decoded
// request as it checks the generated one, so every answer, a 4xx included,
// is the one it always was; TestAckDecodeMatchesGenerated and
// FuzzAckDecode hold the decoder to that.
//
// body must not be modified afterwards: the ids point into it.
func decodeAckBody(body []byte) (req api.AckBatchRequest, ok bool) {
	d := ackScanner{pushScanner: pushScanner{b: body}}
	d.ws()
	if !d.eat('{') {
		return req, false
	}
	var seen int
	d.ws()
	for !d.eat('}') {
		if seen != 0 && !d.eat(',') {
			return req, false
		}
		if seen != 0 {
			d.ws()
		}
		key, ok := d.key()
		if !ok {
			return req, false
		}
		bit := seenOther
		switch string(key) {
		case "acknowledgments":
			bit = seenAcks
			req.Acknowledgments, ok = d.acks()
		case "consumerGroup":
			bit = seenGroup
			if !d.null() {
				var g string
				ok = d.peek() == '"' && d.name(&g)
				req.ConsumerGroup = &g
			}
		default:
			ok = !foldsToAny(key, ackRequestKeys) && d.skip(false)
		}
		if !ok || seen&bit&^seenOther != 0 {
			return req, false
		}
		seen |= bit
		d.ws()
	}
	// What follows the object is never read by encoding/json's Decoder.
	return req, req.Acknowledgments != nil
}

// The members of AckBatchRequest and AckBatchItem as openapi.yaml names
// them (and gen/api's json tags spell them); TestAckDecodeKeysMatchSpec
// checks both.
var (
	ackRequestKeys = []string{"acknowledgments", "consumerGroup"}
	ackItemKeys    = []string{"transactionId", "partitionId", "status", "leaseId", "error", "consumerGroup"}
)

// The members a repeat would overwrite (encoding/json keeps the last one):
// a repeat goes to the generated decoder. seenOther marks a member that may
// repeat.
const (
	seenOther = 1 << iota
	seenAcks
	seenGroup
	seenTxID
	seenPartitionID
	seenStatus
	seenLease
	seenError
	seenItemGroup
)

// ackScanner is the push scanner with the last optional strings an ack
// body gave: the items of one batch mostly share their status, lease and
// error, and then share one pointer.
type ackScanner struct {
	pushScanner
	status       *api.AckStatus
	lease, error *string
}

// acks reads the acknowledgments array.
func (d *ackScanner) acks() ([]api.AckBatchItem, bool) {
	return scanArray(&d.pushScanner, d.item)
}

// item reads one AckBatchItem object into it.
func (d *ackScanner) item(it *api.AckBatchItem) bool {
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
		bit := seenOther
		switch string(key) {
		case "transactionId":
			bit = seenTxID
			ok = d.null() || d.id(&it.TransactionId)
		case "partitionId":
			bit = seenPartitionID
			ok = d.null() || d.id(&it.PartitionId)
		case "status":
			bit = seenStatus
			var s *string
			s, ok = d.optional((*string)(d.status))
			it.Status, d.status = (*api.AckStatus)(s), (*api.AckStatus)(s)
		case "leaseId":
			bit = seenLease
			it.LeaseId, ok = d.optional(d.lease)
			d.lease = it.LeaseId
		case "error":
			bit = seenError
			it.Error, ok = d.optional(d.error)
			d.error = it.Error
		case "consumerGroup":
			// Ignored by the handler; encoding/json stores any value in an
			// interface{}, and only a string or null is decided here.
			bit = seenItemGroup
			if !d.null() {
				var g string
				ok = d.peek() == '"' && d.id(&g)
				it.ConsumerGroup = g
			}
		default:
			ok = !foldsToAny(key, ackItemKeys) && d.skip(false)
		}
		if !ok || seen&bit&^seenOther != 0 {
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

// optional reads a string or null into a pointer: nil for null, last when
// the string equals *last, else a new one.
func (d *ackScanner) optional(last *string) (*string, bool) {
	if d.null() {
		return nil, true
	}
	var s string
	if d.peek() != '"' || !d.id(&s) {
		return nil, false
	}
	if last != nil && *last == s {
		return last, true
	}
	p := new(string) // only here: s itself stays off the heap
	*p = s
	return p, true
}
