package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// decodePop reads what json.Unmarshal reads into popResponse, for answers
// shaped as the broker writes them and for everything else valid JSON
// allows there: whitespace, escapes, nested and unknown members, nulls.
func TestDecodePopMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	answers := []string{
		`{"consumerGroup":"__QUEUE_MODE__","leaseId":"L1","messages":[{"consumerGroup":"g","createdAt":"2026-12-03T06:07:08.123456Z","data":{"t":1733200000000000000,"pad":"xxxx"},"id":"0195","leaseId":"L1","partition":"Default","partitionId":"p-1","producerSub":null,"queue":"q","retryCount":0,"traceId":null,"transactionId":"tx-1"},{"data":[1,{"a":"]}\"{["}],"transactionId":"tx-2","partitionId":"p-1","leaseId":""}],"partition":"Default","partitionId":"p-1","partitionsClaimed":1,"queue":"q","success":true}` + "\n",
		` { "leaseId" : "L\u00e9\"2" , "messages" : [ { "transactionId" : "a\\b\nc" , "data" : "s" , "x" : [ true , false , null , -1.5e3 ] , "partitionId" : null } ] } `,
		`{"messages":[],"leaseId":""}`,
		`{"messages":null}`,
		`{"unknown":{"nested":[{"leaseId":"not this one"}]},"messages":[{"data":null},{"data":12}]}`,
		`{}`,
		`{"leaseId":"a\\\\","messages":[{"transactionId":"\\\\\"q\\","data":"\\","partitionId":"\"\""}]}`,
	}
	var got, dataOnly popResponse // reused across answers, as a consumer does
	dataOnly.DataOnly = true
	for _, a := range answers {
		var want popResponse
		require.NoError(t, json.Unmarshal([]byte(a), &want), a)
		require.NoError(t, decodePop([]byte(a), &got), a)
		require.NoError(t, decodePop([]byte(a), &dataOnly), a)
		require.Equal(t, want.LeaseID, dataOnly.LeaseID, a)
		require.Len(t, dataOnly.Messages, len(want.Messages), a)
		for i := range want.Messages {
			require.Equal(t, poppedMessage{Data: want.Messages[i].Data}, dataOnly.Messages[i], a)
		}
		require.Equal(t, want.LeaseID, got.LeaseID, a)
		require.Len(t, got.Messages, len(want.Messages), a)
		for i := range want.Messages {
			w, g := want.Messages[i], got.Messages[i]
			require.Equal(t, w.TransactionID, g.TransactionID, a)
			require.Equal(t, w.PartitionID, g.PartitionID, a)
			require.Equal(t, w.LeaseID, g.LeaseID, a)
			require.Equal(t, string(w.Data), string(g.Data), a)
		}
	}
	for _, bad := range []string{``, `{`, `{"messages":[{"data":}]}`, `[]`, `{"leaseId":5}`, `{} x`} {
		var p popResponse
		require.Error(t, decodePop([]byte(bad), &p), bad)
	}
}
