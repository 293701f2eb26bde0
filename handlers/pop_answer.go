package handlers

import (
	"net/http"
	"slices"
	"strconv"

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
	for i := range r.Messages {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendPoppedMessage(buf, r, &r.Messages[i])
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
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(buf)
	return err
}

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

// appendPoppedMessage appends one element of popResponse's messages as
// encoding/json writes it.
func appendPoppedMessage(buf []byte, r *broker.PopResult, m *broker.Message) []byte {
	buf = append(buf, `{"consumerGroup":`...)
	buf = appendJSONString(buf, r.Group)
	buf = append(buf, `,"createdAt":"`...)
	buf = m.CreatedAt.UTC().AppendFormat(buf, timeMicros)
	buf = append(buf, `","data":`...)
	if m.Payload == nil {
		buf = append(buf, "null"...)
	} else {
		buf = appendCompactJSON(buf, m.Payload)
	}
	buf = append(buf, `,"id":"`...)
	buf = appendUUID(buf, m.ID)
	buf = append(buf, `","leaseId":`...)
	buf = appendJSONString(buf, r.LeaseID)
	buf = append(buf, `,"partition":`...)
	buf = appendJSONString(buf, m.Partition)
	buf = append(buf, `,"partitionId":"`...)
	buf = appendUUID(buf, m.PartitionID)
	buf = append(buf, `","producerSub":`...)
	if m.ProducerSub == nil {
		buf = append(buf, "null"...)
	} else {
		buf = appendJSONString(buf, *m.ProducerSub)
	}
	buf = append(buf, `,"queue":`...)
	buf = appendJSONString(buf, m.Queue)
	buf = append(buf, `,"retryCount":`...)
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

// appendCompactJSON appends the valid JSON document src as encoding/json
// writes a json.RawMessage: whitespace outside strings dropped (PostgreSQL
// prints jsonb with a space after every ':' and ','), and <, >, &, U+2028
// and U+2029 inside strings escaped.
func appendCompactJSON(buf, src []byte) []byte {
	inString := false
	start := 0 // src[start:i] is still to copy
	for i := 0; i < len(src); i++ {
		c := src[i]
		if inString {
			switch {
			case c == '\\':
				i++ // the escaped byte cannot end the string
			case c == '"':
				inString = false
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
			continue
		}
		switch c {
		case '"':
			inString = true
		case ' ', '\t', '\n', '\r':
			buf = append(buf, src[start:i]...)
			start = i + 1
		}
	}
	return append(buf, src[start:]...)
}

const hexDigits = "0123456789abcdef"
