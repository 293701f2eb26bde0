package handlers

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/handlers/broker"
)

// pushAnswer is a push's 201 answer, written straight into one buffer. It
// is the JSON encoding/json gives api.PushMessages201JSONResponse built by
// pushResult (same fields, order and escaping), without the per-item
// strings, pointers and reflection: at batch 100 that encoding was a tenth
// of the broker's CPU per pushed message (docs/benchmarks.md).
type pushAnswer struct {
	items []broker.PushItem
	out   []broker.PushResult
}

// answerBufs holds the answers' buffers: the ResponseWriter copies what it
// is given, so a buffer is free again once written.
var answerBufs = sync.Pool{New: func() any { return new([]byte) }}

// answerBufKeepMax is the largest buffer that goes back to the pool.
const answerBufKeepMax = 1 << 20

func (a pushAnswer) VisitPushMessagesResponse(w http.ResponseWriter) error {
	pooled := answerBufs.Get().(*[]byte)
	buf := slices.Grow((*pooled)[:0], 64+len(a.out)*400)
	defer func() {
		if cap(buf) <= answerBufKeepMax {
			*pooled = buf
			answerBufs.Put(pooled)
		}
	}()
	buf = append(buf, '[')
	for i := range a.out {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendPushResult(buf, i, a.items[i], a.out[i])
	}
	buf = append(buf, "]\n"...)
	return writeJSONAnswer(w, http.StatusCreated, buf)
}

// appendPushResult appends pushResult(i, it, o) as encoding/json writes it.
func appendPushResult(buf []byte, i int, it broker.PushItem, o broker.PushResult) []byte {
	buf = append(buf, `{"index":`...)
	buf = strconv.AppendInt(buf, int64(i), 10)
	withIDs := o.Status != broker.Buffered
	if withIDs {
		buf = append(buf, `,"messageId":"`...)
		buf = appendUUID(buf, o.MessageID)
		buf = append(buf, `","message_id":"`...)
		buf = appendUUID(buf, o.MessageID)
		buf = append(buf, '"')
	}
	buf = append(buf, `,"partition":`...)
	buf = appendJSONString(buf, it.Partition)
	if withIDs {
		buf = append(buf, `,"partition_id":"`...)
		buf = appendUUID(buf, o.PartitionID)
		buf = append(buf, '"')
	}
	buf = append(buf, `,"queue":`...)
	buf = appendJSONString(buf, it.Queue)
	buf = append(buf, `,"queueName":`...)
	buf = appendJSONString(buf, it.Queue)
	buf = append(buf, `,"status":`...)
	buf = appendJSONString(buf, string(o.Status))
	buf = append(buf, `,"trace_id":`...)
	if it.TraceID != "" {
		buf = appendJSONString(buf, it.TraceID)
	} else {
		buf = append(buf, "null"...)
	}
	buf = append(buf, `,"transactionId":`...)
	buf = appendJSONString(buf, it.TransactionID)
	buf = append(buf, `,"transaction_id":`...)
	buf = appendJSONString(buf, it.TransactionID)
	return append(buf, '}')
}

// appendJSONString quotes s as encoding/json does: printable ASCII other
// than the quote, the backslash and the HTML characters goes as it is,
// anything else through json.Marshal.
func appendJSONString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !jsonPlain[s[i]] {
			q, _ := json.Marshal(s) // a string always encodes
			return append(buf, q...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

// jsonPlain marks the bytes appendJSONString copies as they are.
var jsonPlain = func() (t [256]bool) {
	for c := 0x20; c <= 0x7e; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendUUID appends u in its canonical form, as u.String() gives it.
func appendUUID(buf []byte, u uuid.UUID) []byte {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:], u[10:])
	return append(buf, b[:]...)
}
