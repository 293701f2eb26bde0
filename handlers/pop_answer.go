package handlers

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/handlers/broker"
)

// popAnswer is a pop's 200 answer, written straight into one buffer: the
// JSON encoding/json gives api.PopOKJSONResponse built by popResponse (same
// members, order and escaping), without the dozen strings per message and
// the reflection. A consumer receives every message once this way, so it
// is, with the ack, most of what the broker spends per delivered message
// (docs/benchmarks.md, "Performance round 2: consumption").
type popAnswer struct{ r *broker.PopResult }

func (a popAnswer) VisitPopQueueResponse(w http.ResponseWriter) error         { return a.write(w) }
func (a popAnswer) VisitPopPartitionResponse(w http.ResponseWriter) error     { return a.write(w) }
func (a popAnswer) VisitPopNamespaceTaskResponse(w http.ResponseWriter) error { return a.write(w) }

func (a popAnswer) write(w http.ResponseWriter) error {
	r := a.r
	pooled := answerBufs.Get().(*[]byte)
	buf := slices.Grow((*pooled)[:0], popAnswerSize(r))
	defer func() {
		if cap(buf) <= answerBufKeepMax {
			*pooled = buf
			answerBufs.Put(pooled)
		}
	}()
	buf = append(buf, `{"consumerGroup":`...)
	buf = appendJSONString(buf, r.Group)
	buf = append(buf, `,"leaseId":`...)
	buf = appendJSONString(buf, r.LeaseID)
	buf = append(buf, `,"messages":[`...)
	// What every message repeats (its group and lease) is escaped once.
	f := popFragmentsPool.Get().(*popFragments)
	defer f.release()
	f.reset(r)
	for i := range r.Messages {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = f.appendMessage(buf, &r.Messages[i])
	}
	buf = append(buf, `],"partition":`...)
	buf = appendJSONString(buf, r.Partition)
	buf = append(buf, `,"partitionId":"`...)
	buf = appendUUID(buf, r.PartitionID)
	buf = append(buf, `","partitionsClaimed":`...)
	buf = strconv.AppendInt(buf, int64(r.Partitions), 10)
	buf = append(buf, `,"queue":`...)
	buf = appendJSONString(buf, r.Queue)
	buf = append(buf, ",\"success\":true}\n"...)
	return writeJSONAnswer(w, http.StatusOK, buf)
}

// writeJSONAnswer writes a whole JSON answer with its Content-Type and
// Content-Length. With its length declared, an answer larger than
// net/http's buffers goes out whole instead of in chunks: one system call
// fewer per answer (two instead of three) and no chunk framing for the
// client to undo (docs/benchmarks.md, "Round 8: the broker's CPU per
// delivery").
func writeJSONAnswer(w http.ResponseWriter, status int, body []byte) error {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, err := w.Write(body)
	return err
}

// jsonContentType is the pop answer's Content-Type header value, shared by
// every answer (net/http only reads it).
var jsonContentType = []string{"application/json"}

// poppedMessageFixed is what appendPoppedMessage writes for a message
// besides its strings and payload: member names, punctuation, the time,
// the ids and a trace id.
const poppedMessageFixed = 320

// popAnswerSize is the length of r's answer, give or take escapes (which
// grow it) and the spaces dropped from payloads: one allocation or none.
func popAnswerSize(r *broker.PopResult) int {
	size := 256 + len(r.Group) + len(r.LeaseID) + len(r.Partition) + len(r.Queue)
	shared := poppedMessageFixed + len(r.Group) + len(r.LeaseID)
	for i := range r.Messages {
		m := &r.Messages[i]
		size += shared + len(m.Payload) + len(m.Partition) + len(m.Queue) + len(m.TransactionID)
		if m.ProducerSub != nil {
			size += len(*m.ProducerSub)
		}
	}
	return size
}

// popFragments are the parts of a popped message's encoding that are the
// same for every message of an answer, escaped once: the group and the
// lease (and the partition, its id and the queue of the message before).
type popFragments struct {
	head  []byte // {"consumerGroup":<group>,"createdAt":"
	lease []byte // ","leaseId":<lease>,"partition":

	// The last partition's `<partition>,"partitionId":"<id>","producerSub":`
	// and `<queue>,"retryCount":`, for the next message of the same.
	partName, queueName string
	partID              uuid.UUID
	part, queue         []byte

	// The last time's text up to its microseconds ("2026-12-04T04:28:33."),
	// for the next time in the same second: the messages of an answer were
	// mostly pushed together.
	timeSec    int64
	timeOK     bool
	timePrefix [20]byte
}

// appendTime appends t as appendTimeMicros does, the date and clock taken
// from the last time's when t is in the same second.
func (f *popFragments) appendTime(buf []byte, t time.Time) []byte {
	sec := t.Unix()
	if !f.timeOK || sec != f.timeSec {
		var b [32]byte
		s := appendTimeMicros(b[:0], t)
		if len(s) != 27 { // a year outside 0-9999
			return append(buf, s...)
		}
		copy(f.timePrefix[:], s)
		f.timeSec, f.timeOK = sec, true
	}
	buf = append(buf, f.timePrefix[:]...)
	var us [6]byte
	putDigits(us[:], t.Nanosecond()/1000)
	buf = append(buf, us[:]...)
	return append(buf, 'Z')
}

var popFragmentsPool = sync.Pool{New: func() any { return new(popFragments) }}

// reset makes f r's: its group and lease, no partition or queue yet.
func (f *popFragments) reset(r *broker.PopResult) {
	buf := append(f.head[:0], `{"consumerGroup":`...)
	buf = appendJSONString(buf, r.Group)
	buf = append(buf, `,"createdAt":"`...)
	n := len(buf)
	buf = append(buf, `","leaseId":`...)
	buf = appendJSONString(buf, r.LeaseID)
	buf = append(buf, `,"partition":`...)
	f.head, f.lease = buf[:n], buf[n:]
	f.part, f.queue = f.part[:0], f.queue[:0]
	f.partName, f.queueName = "", ""
	f.timeOK = false
}

// release puts f back in the pool, unless a long name grew it.
func (f *popFragments) release() {
	if cap(f.head) <= popFragmentsKeepMax && cap(f.part) <= popFragmentsKeepMax && cap(f.queue) <= popFragmentsKeepMax {
		f.partName, f.queueName = "", ""
		popFragmentsPool.Put(f)
	}
}

const popFragmentsKeepMax = 4 << 10

// appendMessage appends one element of popResponse's messages as
// encoding/json writes it.
func (f *popFragments) appendMessage(buf []byte, m *broker.Message) []byte {
	buf = append(buf, f.head...)
	buf = f.appendTime(buf, m.CreatedAt)
	buf = append(buf, `","data":`...)
	if m.Payload == nil {
		buf = append(buf, "null"...)
	} else {
		buf = appendCompactJSON(buf, m.Payload)
	}
	buf = append(buf, `,"id":"`...)
	buf = appendUUID(buf, m.ID)
	buf = append(buf, f.lease...)
	if len(f.part) == 0 || m.Partition != f.partName || m.PartitionID != f.partID {
		f.part = appendJSONString(f.part[:0], m.Partition)
		f.part = append(f.part, `,"partitionId":"`...)
		f.part = appendUUID(f.part, m.PartitionID)
		f.part = append(f.part, `","producerSub":`...)
		f.partName, f.partID = m.Partition, m.PartitionID
	}
	buf = append(buf, f.part...)
	if m.ProducerSub == nil {
		buf = append(buf, "null"...)
	} else {
		buf = appendJSONString(buf, *m.ProducerSub)
	}
	buf = append(buf, `,"queue":`...)
	if len(f.queue) == 0 || m.Queue != f.queueName {
		f.queue = appendJSONString(f.queue[:0], m.Queue)
		f.queue = append(f.queue, `,"retryCount":`...)
		f.queueName = m.Queue
	}
	buf = append(buf, f.queue...)
	buf = strconv.AppendInt(buf, int64(m.RetryCount), 10)
	buf = append(buf, `,"traceId":`...)
	if m.TraceID == nil {
		buf = append(buf, "null"...)
	} else {
		buf = append(buf, '"')
		buf = appendUUID(buf, *m.TraceID)
		buf = append(buf, '"')
	}
	buf = append(buf, `,"transactionId":`...)
	buf = appendJSONString(buf, m.TransactionID)
	return append(buf, '}')
}

// appendTimeMicros appends t as t.UTC().AppendFormat(buf, timeMicros)
// does, without reading the layout at every call.
func appendTimeMicros(buf []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(buf, timeMicros)
	}
	hour, min, sec := t.Clock()
	us := t.Nanosecond() / 1000
	var b [27]byte
	putDigits(b[0:4], year)
	b[4] = '-'
	putDigits(b[5:7], int(month))
	b[7] = '-'
	putDigits(b[8:10], day)
	b[10] = 'T'
	putDigits(b[11:13], hour)
	b[13] = ':'
	putDigits(b[14:16], min)
	b[16] = ':'
	putDigits(b[17:19], sec)
	b[19] = '.'
	putDigits(b[20:26], us)
	b[26] = 'Z'
	return append(buf, b[:]...)
}

// putDigits writes v into b in decimal, zero-padded to len(b) digits.
func putDigits(b []byte, v int) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
}

// appendCompactJSON appends the valid JSON document src as encoding/json
// writes a json.RawMessage: whitespace outside strings dropped (PostgreSQL
// prints jsonb with a space after every ':' and ','), and <, >, &, U+2028
// and U+2029 inside strings escaped. Runs of bytes that need nothing are
// skipped with a table look-up each (compactOutside, compactInside).
func appendCompactJSON(buf, src []byte) []byte {
	start := 0 // src[start:i] is still to copy
	i := 0
	for {
		// Outside strings.
		for i < len(src) && !compactOutside[src[i]] {
			i++
		}
		if i >= len(src) {
			break
		}
		if src[i] != '"' { // white space
			buf = append(buf, src[start:i]...)
			i++
			start = i
			continue
		}
		// Inside a string, from its opening quote.
		for i++; i < len(src); i++ {
			for i < len(src) && !compactInside[src[i]] {
				i++
			}
			if i >= len(src) {
				break
			}
			c := src[i]
			if c == '"' {
				break
			}
			switch {
			case c == '\\':
				i++ // the escaped byte cannot end the string
			case c == '<' || c == '>' || c == '&':
				buf = append(buf, src[start:i]...)
				buf = append(buf, `\u00`...)
				buf = append(buf, hexDigits[c>>4], hexDigits[c&0xf])
				start = i + 1
			case c == 0xE2 && i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8:
				buf = append(buf, src[start:i]...)
				buf = append(buf, `\u202`...)
				buf = append(buf, hexDigits[src[i+2]&0xf])
				i += 2
				start = i + 1
			}
		}
		i++ // past the closing quote
	}
	return append(buf, src[start:]...)
}

// compactOutside marks the bytes appendCompactJSON stops at outside a
// string (a quote, white space); compactInside those inside one (the
// closing quote, an escape, the characters it escapes, the first byte of
// U+2028 and U+2029).
var compactOutside, compactInside = func() (out, in [256]bool) {
	for _, c := range []byte{'"', ' ', '\t', '\n', '\r'} {
		out[c] = true
	}
	for _, c := range []byte{'"', '\\', '<', '>', '&', 0xE2} {
		in[c] = true
	}
	return out, in
}()

const hexDigits = "0123456789abcdef"
