package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/queenforgo/queen/gen/client"
)

type wireMessage struct {
	ID            string  `json:"id"`
	TransactionID string  `json:"transactionId"`
	PartitionID   string  `json:"partitionId"`
	QueuePath     string  `json:"queuePath"`
	Queue         string  `json:"queue"`
	Partition     string  `json:"partition"`
	Namespace     string  `json:"namespace"`
	Status        string  `json:"status"`
	QueueStatus   string  `json:"queueStatus"`
	LeaseExpires  *string `json:"leaseExpiresAt"`
	BusStatus     struct {
		ConsumedBy  int `json:"consumedBy"`
		TotalGroups int `json:"totalGroups"`
	} `json:"busStatus"`
}

type wireMessagePage struct {
	Messages   []wireMessage `json:"messages"`
	Total      int           `json:"total"`
	Pagination struct {
		Limit   int  `json:"limit"`
		Offset  int  `json:"offset"`
		HasMore bool `json:"hasMore"`
	} `json:"pagination"`
	Mode struct {
		HasQueueMode   bool   `json:"hasQueueMode"`
		BusGroupsCount int    `json:"busGroupsCount"`
		Type           string `json:"type"`
	} `json:"mode"`
}

func (b *testBundle) messages(query string) wireMessagePage {
	b.t.Helper()
	var page wireMessagePage
	b.doJSON("GET", "/api/v1/messages"+query, nil, http.StatusOK, &page)
	return page
}

func txIDs(page wireMessagePage) []string {
	out := make([]string, len(page.Messages))
	for i, m := range page.Messages {
		out[i] = m.TransactionID
	}
	return out
}

// messagesWorkload: queue mq (namespace mns) partition p with m0..m4, the
// queue-mode group popped m0 and m1 and acked m0; partition x with x0,
// dead-lettered. Messages are pushed one by one so that newest-first is
// push order reversed.
func messagesWorkload(b *testBundle) (p, x string) {
	b.t.Helper()
	b.configureTagged("mq", "mns", "mtask")
	for _, tx := range []string{"m0", "m1", "m2", "m3", "m4"} {
		b.push(item("mq", "p", tx, map[string]any{"tx": tx}))
	}
	got := b.pop("/api/v1/pop/queue/mq/partition/p?batch=2")
	require.Len(b.t, got.Messages, 2)
	require.True(b.t, b.ack("m0", got.PartitionID, "completed", "", got.LeaseID).Success)
	p = got.PartitionID
	x = b.push(item("mq", "x", "x0", "dead"))[0].PartitionID
	got = b.pop("/api/v1/pop/queue/mq/partition/x")
	require.True(b.t, b.ack("x0", x, "failed", "", got.LeaseID).Success)
	b.exec(`UPDATE queen.queues SET retry_limit = 0 WHERE name = 'mq'`)
	got = b.pop("/api/v1/pop/queue/mq/partition/x")
	r := b.ack("x0", x, "failed", "", got.LeaseID)
	require.True(b.t, r.DLQ, "retries exhausted")
	return p, x
}

func TestMessagesListStatusFiltersAndPaging(t *testing.T) {
	t.Parallel()
	b := setup(t)
	messagesWorkload(b)

	page := b.messages("")
	require.Equal(t, 6, page.Total)
	require.False(t, page.Pagination.HasMore)
	require.Equal(t, 200, page.Pagination.Limit)
	require.Equal(t, []string{"x0", "m4", "m3", "m2", "m1", "m0"}, txIDs(page), "newest first")
	status := map[string]string{}
	for _, m := range page.Messages {
		status[m.TransactionID] = m.Status
		require.Equal(t, m.Status, m.QueueStatus)
		require.Equal(t, "mq/"+m.Partition, m.QueuePath)
		require.Equal(t, "mns", m.Namespace)
	}
	require.Equal(t, map[string]string{
		"m0": "completed", "m1": "processing", "m2": "pending", "m3": "pending", "m4": "pending", "x0": "dead_letter",
	}, status)
	require.True(t, page.Mode.HasQueueMode)
	require.Equal(t, "queue", page.Mode.Type)
	require.NotNil(t, page.Messages[4].LeaseExpires, "m1 is under a live lease")

	for query, want := range map[string][]string{
		"?status=pending":                             {"m4", "m3", "m2"},
		"?status=processing":                          {"m1"},
		"?status=completed":                           {"m0"},
		"?status=dead_letter":                         {"x0"},
		"?queue=mq&partition=x":                       {"x0"},
		"?ns=mns&task=mtask&status=pending":           {"m4", "m3", "m2"},
		"?namespace=mns&partition=p&limit=2&offset=1": {"m3", "m2"},
		"?ns=other":                                   {},
		"?task=other":                                 {},
		"?queue=nope":                                 {},
	} {
		page := b.messages(query)
		require.Equal(t, want, txIDs(page), query)
	}
	page = b.messages("?partition=p&limit=2&offset=2")
	require.Equal(t, []string{"m2", "m1"}, txIDs(page))
	require.Equal(t, 2, page.Total, "the page's length")
	require.True(t, page.Pagination.HasMore)
	page = b.messages("?partition=p&limit=2&offset=3")
	require.Equal(t, []string{"m1", "m0"}, txIDs(page))
	require.False(t, page.Pagination.HasMore, "m0 is the last")
	page = b.messages("?partition=p&limit=2&offset=50")
	require.Empty(t, page.Messages)
	require.False(t, page.Pagination.HasMore)

	// The time window: an hour back by default; `to` covers its minute.
	b.exec(`UPDATE queen.messages m SET created_at = now() - interval '3 hours', id = `+agedMessageID("$1")+`
		WHERE m.transaction_id = 'm0'`, 3*time.Hour.Seconds())
	require.NotContains(t, txIDs(b.messages("")), "m0")
	from := url.QueryEscape(time.Now().Add(-4 * time.Hour).UTC().Format(time.RFC3339))
	to := url.QueryEscape(time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339))
	require.Equal(t, []string{"m0"}, txIDs(b.messages("?from="+from+"&to="+to)))
	require.Empty(t, b.messages("?from="+url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))).Messages)
	require.Contains(t, txIDs(b.messages("?to="+url.QueryEscape(time.Now().UTC().Format("2006-01-02T15:04:05")))), "m4",
		"a zone-less `to` is UTC and covers its whole minute")

	for _, bad := range []string{"status=done", "limit=0", "limit=10001", "offset=-1", "from=yesterday", "queue=a%20b"} {
		status, _ := b.do("GET", "/api/v1/messages?"+bad, nil)
		require.Equal(t, http.StatusBadRequest, status, bad)
	}
}

func TestMessagesBusMode(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.push(item("bus", "p", "b0", 0))
	b.push(item("bus", "p", "b1", 1))
	require.Len(t, b.pop("/api/v1/pop/queue/bus?consumerGroup=g1&autoAck=true").Messages, 1)
	require.Len(t, b.pop("/api/v1/pop/queue/bus?consumerGroup=g2&autoAck=true&batch=2").Messages, 2)
	// A group on another queue counts without a queue filter only.
	b.push(item("other", "p", "o0", 0))
	require.Len(t, b.pop("/api/v1/pop/queue/other?consumerGroup=g3&autoAck=true").Messages, 1)
	all := b.messages("")
	require.Equal(t, "bus", all.Mode.Type)
	require.Equal(t, 3, all.Mode.BusGroupsCount)
	require.False(t, all.Mode.HasQueueMode)
	page := b.messages("?queue=bus")
	require.Equal(t, "bus", page.Mode.Type)
	require.Equal(t, 2, page.Mode.BusGroupsCount)
	require.False(t, page.Mode.HasQueueMode)
	require.Equal(t, "b1", page.Messages[0].TransactionID)
	require.Equal(t, "pending", page.Messages[0].Status, "g1 has not read b1")
	require.Equal(t, 1, page.Messages[0].BusStatus.ConsumedBy)
	require.Equal(t, 2, page.Messages[0].BusStatus.TotalGroups)
	require.Equal(t, "completed", page.Messages[1].Status)
	require.Equal(t, 2, page.Messages[1].BusStatus.ConsumedBy)

	// The queue-mode group joins: its cursor decides (hybrid).
	b.pop("/api/v1/pop/queue/bus?autoAck=true")
	page = b.messages("?queue=bus")
	require.Equal(t, "hybrid", page.Mode.Type)
	all = b.messages("")
	require.Equal(t, "hybrid", all.Mode.Type)
	require.True(t, all.Mode.HasQueueMode)
	require.Equal(t, 3, all.Mode.BusGroupsCount)
	require.Equal(t, []string{"pending", "completed"}, []string{page.Messages[0].Status, page.Messages[1].Status})
}

func TestMessageGetAndDelete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, x := messagesWorkload(b)
	b.pop("/api/v1/pop/queue/mq/partition/p?consumerGroup=audit&autoAck=true&batch=3")

	var d struct {
		ID, TransactionID, PartitionID, Queue, Partition, Namespace, Task, Status, QueuePath string
		Payload, Data                                                                        json.RawMessage
		IsEncrypted                                                                          bool
		ErrorMessage                                                                         *string
		RetryCount                                                                           *int
		LeaseExpiresAt                                                                       *string
		QueueConfig                                                                          struct{ LeaseTime, RetryLimit, Ttl int }
		Mode                                                                                 struct {
			HasQueueMode                     bool
			BusGroupsCount, ConsumedByGroups int
			Type                             string
		}
		ConsumerGroups []struct {
			Name     string
			Consumed bool
		}
	}
	b.doJSON("GET", "/api/v1/messages/"+p+"/m1", nil, http.StatusOK, &d)
	require.Equal(t, "m1", d.TransactionID)
	require.Equal(t, "processing", d.Status)
	require.Equal(t, "mq/p", d.QueuePath)
	require.Equal(t, "mtask", d.Task)
	require.JSONEq(t, `{"tx":"m1"}`, string(d.Payload))
	require.JSONEq(t, `{"tx":"m1"}`, string(d.Data))
	require.Nil(t, d.ErrorMessage)
	require.Nil(t, d.RetryCount)
	require.NotNil(t, d.LeaseExpiresAt)
	require.Equal(t, 300, d.QueueConfig.LeaseTime)
	require.Equal(t, "hybrid", d.Mode.Type)
	require.Equal(t, 1, d.Mode.ConsumedByGroups, "audit read m0..m2")
	require.Len(t, d.ConsumerGroups, 2)
	require.Equal(t, "__QUEUE_MODE__", d.ConsumerGroups[0].Name)
	require.False(t, d.ConsumerGroups[0].Consumed)
	require.Equal(t, "audit", d.ConsumerGroups[1].Name)
	require.True(t, d.ConsumerGroups[1].Consumed)

	b.doJSON("GET", "/api/v1/messages/"+x+"/x0", nil, http.StatusOK, &d)
	require.Equal(t, "dead_letter", d.Status)
	require.NotNil(t, d.ErrorMessage)
	require.Equal(t, 1, *d.RetryCount)

	// A transactionId needing escapes round-trips through the path.
	odd := "a b%"
	b.push(item("mq", "p", odd, 1))
	b.doJSON("GET", "/api/v1/messages/"+p+"/"+url.PathEscape(odd), nil, http.StatusOK, &d)
	require.Equal(t, odd, d.TransactionID)
	// So does an escaped slash (outside b.do: the spec router of the test
	// bundle splits the decoded path).
	y := b.push(item("mq", "y", "a/b", 1))[0].PartitionID
	resp, err := http.Get(b.url + "/api/v1/messages/" + y + "/a%2Fb")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&d))
	require.Equal(t, "a/b", d.TransactionID)

	status, raw := b.do("GET", "/api/v1/messages/"+p+"/nope", nil)
	require.Equal(t, http.StatusNotFound, status)
	require.JSONEq(t, `{"error":"Message not found"}`, string(raw))
	status, _ = b.do("GET", "/api/v1/messages/not-a-uuid/m1", nil)
	require.Equal(t, http.StatusBadRequest, status)

	var del struct {
		Success       bool
		Message       string
		TransactionID string
	}
	b.doJSON("DELETE", "/api/v1/messages/"+p+"/m3", nil, http.StatusOK, &del)
	require.True(t, del.Success)
	require.Equal(t, "Message deleted successfully", del.Message)
	b.doJSON("DELETE", "/api/v1/messages/"+p+"/m3", nil, http.StatusOK, &del)
	require.False(t, del.Success)
	require.Equal(t, "Message not found", del.Message)
	status, _ = b.do("GET", "/api/v1/messages/"+p+"/m3", nil)
	require.Equal(t, http.StatusNotFound, status)
	// Deleting a dead-lettered message takes its dead-letter row with it.
	b.doJSON("DELETE", "/api/v1/messages/"+x+"/x0", nil, http.StatusOK, &del)
	require.True(t, del.Success)
	var dlq struct{ Total int }
	b.doJSON("GET", "/api/v1/dlq", nil, http.StatusOK, &dlq)
	require.Zero(t, dlq.Total)
	var parts struct{ Partitions []wirePartition }
	b.doJSON("GET", "/api/v1/resources/partitions?queue=mq", nil, http.StatusOK, &parts)
	require.Equal(t, "p", parts.Partitions[1].Partition, "after Default")
	// Totals are exact (deletes count vacant sequence numbers). Pending is
	// the sequence span past the cursor, at most the total: a message
	// deleted inside it still counts until the cursor passes it.
	require.Equal(t, 5, parts.Partitions[1].Total, "m0..m2, m4 and the odd one")
	require.Equal(t, 5, parts.Partitions[1].Pending, "m1..m4 and the odd one, m3's number included")
	b.doJSON("DELETE", "/api/v1/messages/"+p+"/"+url.PathEscape(odd), nil, http.StatusOK, &del)
	b.doJSON("GET", "/api/v1/resources/partitions?queue=mq", nil, http.StatusOK, &parts)
	require.Equal(t, 4, parts.Partitions[1].Total, "m0..m2 and m4")
	require.Equal(t, 4, parts.Partitions[1].Pending, "at most the total")
}

// queenctl messages list --limit 10000 sends limit=10000: pages past the old
// 1,000 cap come back whole, newest first; above 10,000 is a 400.
func TestMessagesLimitUpTo10000(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 1500
	for start := 0; start < n; start += 750 {
		items := make([]client.PushItem, 750)
		for i := range items {
			items[i] = item("many", "p", fmt.Sprintf("t%04d", start+i), i)
		}
		b.push(items...)
	}
	page := b.messages("?queue=many&limit=10000")
	require.Len(t, page.Messages, n)
	require.Equal(t, n, page.Total)
	require.Equal(t, 10000, page.Pagination.Limit)
	require.False(t, page.Pagination.HasMore)
	require.Equal(t, "t1499", page.Messages[0].TransactionID, "newest first")
	require.Equal(t, "t0000", page.Messages[n-1].TransactionID)

	page = b.messages("?queue=many&limit=1200")
	require.Len(t, page.Messages, 1200)
	require.True(t, page.Pagination.HasMore)
	require.Equal(t, "t0300", page.Messages[1199].TransactionID)

	status, body := b.do("GET", "/api/v1/messages?limit=10001", nil)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, string(body), "limit")
}
