package catalog

import (
	"encoding/json"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/pxdb"
	"github.com/queenforgo/queen/proxy/limit"
)

// Status is a cluster's effective status: the worse of its own and its
// tenant's (PROXY.md §2.2).
type Status string

// The effective statuses, from least to most severe.
const (
	StatusActive      Status = "active"
	StatusPushBlocked Status = "push_blocked" // also a tenant in grace
	StatusSuspended   Status = "suspended"
	StatusDeleting    Status = "deleting"
)

// severity orders the stored statuses; an unknown one counts as suspended.
func severity(s string) (int, Status) {
	switch s {
	case "active":
		return 0, StatusActive
	case "grace", "push_blocked":
		return 1, StatusPushBlocked
	case "deleting":
		return 3, StatusDeleting
	}
	return 2, StatusSuspended
}

// MergeStatus is the effective status of a cluster with status cluster in a
// tenant with status tenant.
func MergeStatus(tenant, cluster string) Status {
	a, sa := severity(tenant)
	b, sb := severity(cluster)
	if a > b {
		return sa
	}
	return sb
}

// Cluster is what the proxy needs to serve one cluster.
type Cluster struct {
	ID           uuid.UUID
	Slug         string
	TenantID     uuid.UUID
	Status       Status
	BrokerTenant uuid.UUID // the x-queen-tenant the broker sees
	CellID       uuid.UUID
	BaseURL      string
	CellSecret   *string // nil: the broker gets no Authorization header
	Plan         string
	Limits       limit.Limits
	Features     map[string]bool
}

// Key is a live API key with its cluster.
type Key struct {
	ID      uuid.UUID
	Scopes  []string
	Cluster Cluster
}

func clusterFromRow(r pxdb.ClusterBySlugRow) Cluster {
	n := func(v *int32) int64 {
		if v == nil {
			return 0
		}
		return int64(*v)
	}
	n64 := func(v *int64) int64 {
		if v == nil {
			return 0
		}
		return *v
	}
	plan := limit.Limits{
		ReqPerSec: n(r.MaxReqPerSec), ReqBurst: n(r.ReqBurst),
		MsgsPerSec: n(r.MaxMsgsPerSec), MsgsBurst: n(r.MsgsBurst),
		MaxQueues: n(r.MaxQueues), MaxPartitionsPerQueue: n(r.MaxPartitionsPerQueue),
		MaxParkedPops: n(r.MaxParkedPops), MaxPayloadBytes: n(r.MaxPayloadBytes),
		MaxBatchItems: n(r.MaxBatchItems), MaxRetainedBytes: n64(r.MaxRetainedBytes),
		MaxRetentionSeconds: n(r.MaxRetentionSeconds), MonthlyMsgsQuota: n64(r.MonthlyMsgsQuota),
	}
	features := map[string]bool{}
	var raw map[string]any
	_ = json.Unmarshal(r.Features, &raw)
	for k, v := range raw {
		features[k] = v == true // a missing or non-boolean key means off
	}
	return Cluster{
		ID: r.ID, Slug: r.Slug, TenantID: r.TenantID,
		Status:       MergeStatus(r.TenantStatus, r.Status),
		BrokerTenant: r.BrokerTenantUuid,
		CellID:       r.CellID, BaseURL: r.BaseUrl, CellSecret: r.CellSecret,
		Plan:     r.PlanCode,
		Limits:   limit.Merge(plan, r.LimitOverrides),
		Features: features,
	}
}

func keyFromRow(r pxdb.ApiKeyLookupRow) Key {
	return Key{ID: r.KeyID, Scopes: r.Scopes, Cluster: clusterFromRow(pxdb.ClusterBySlugRow{
		ID: r.ID, Slug: r.Slug, Status: r.Status, BrokerTenantUuid: r.BrokerTenantUuid,
		LimitOverrides: r.LimitOverrides, TenantID: r.TenantID, TenantStatus: r.TenantStatus,
		CellID: r.CellID, BaseUrl: r.BaseUrl, CellSecret: r.CellSecret, CellStatus: r.CellStatus,
		PlanCode: r.PlanCode, MaxReqPerSec: r.MaxReqPerSec, ReqBurst: r.ReqBurst,
		MaxMsgsPerSec: r.MaxMsgsPerSec, MsgsBurst: r.MsgsBurst, MaxQueues: r.MaxQueues,
		MaxPartitionsPerQueue: r.MaxPartitionsPerQueue, MaxParkedPops: r.MaxParkedPops,
		MaxPayloadBytes: r.MaxPayloadBytes, MaxBatchItems: r.MaxBatchItems,
		MaxRetainedBytes: r.MaxRetainedBytes, MaxRetentionSeconds: r.MaxRetentionSeconds,
		MonthlyMsgsQuota: r.MonthlyMsgsQuota, Features: r.Features,
	})}
}
