package handlers

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/queenforgo/queen/handlers/broker"
)

// ackAnswer is a batch ack's 200 answer, written straight into one buffer:
// the JSON encoding/json gives api.AckBatch200JSONResponse built by
// ackResults (same members, order and escaping), without the three pointers
// per result and the reflection. A consumer gets one result per message
// it consumed (docs/benchmarks.md, "Performance round 2: consumption").
type ackAnswer struct{ res []broker.AckResult }

func (a ackAnswer) VisitAckBatchResponse(w http.ResponseWriter) error {
	pooled := answerBufs.Get().(*[]byte)
	buf := slices.Grow((*pooled)[:0], ackAnswerSize(a.res))
	defer func() {
		if cap(buf) <= answerBufKeepMax {
			*pooled = buf
			answerBufs.Put(pooled)
		}
	}()
	buf = append(buf, '[')
	for i := range a.res {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendAckResult(buf, i, &a.res[i])
	}
	buf = append(buf, "]\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(buf)
	return err
}

// ackResultFixed is what appendAckResult writes for a result besides its
// strings: member names, punctuation, booleans and the index.
const ackResultFixed = 140

// ackAnswerSize is the length of the answer of res, give or take escapes
// and refusals: one allocation or none.
func ackAnswerSize(res []broker.AckResult) int {
	size := 16
	for i := range res {
		size += ackResultFixed + len(res[i].Partition) + len(res[i].Queue) + len(res[i].TransactionID)
	}
	return size
}

// appendAckResult appends result i as encoding/json writes the api.AckResult
// ackResults makes of it.
func appendAckResult(buf []byte, i int, r *broker.AckResult) []byte {
	buf = append(buf, `{"dlq":`...)
	buf = strconv.AppendBool(buf, r.DeadLettered)
	buf = append(buf, `,"error":`...)
	if r.Refused == nil {
		buf = append(buf, "null"...)
	} else {
		buf = appendJSONString(buf, refusalText(r.Refused))
	}
	buf = append(buf, `,"index":`...)
	buf = strconv.AppendInt(buf, int64(i), 10)
	buf = append(buf, `,"leaseReleased":`...)
	buf = strconv.AppendBool(buf, r.LeaseReleased)
	if r.Queue == "" {
		buf = append(buf, `,"partitionName":null,"queueName":null`...)
	} else {
		buf = append(buf, `,"partitionName":`...)
		buf = appendJSONString(buf, r.Partition)
		buf = append(buf, `,"queueName":`...)
		buf = appendJSONString(buf, r.Queue)
	}
	buf = append(buf, `,"success":`...)
	buf = strconv.AppendBool(buf, r.Applied())
	buf = append(buf, `,"transactionId":`...)
	buf = appendJSONString(buf, r.TransactionID)
	return append(buf, '}')
}
