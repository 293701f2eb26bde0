package broker

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// DefaultTenant is the tenant of every request when native tenancy is off,
// and of every request that names none when it is on (tenant.go). Rows
// stored before tenancy belong to it (migration 0010).
const DefaultTenant = "00000000-0000-0000-0000-000000000001"

// QueueModeGroup is the consumer group of plain queue consumers: one shared
// cursor, competing consumers.
const QueueModeGroup = "__QUEUE_MODE__"

// QueueKey identifies a queue: its tenant and its name. The queue cache,
// the pop watermarks and the wake-ups are keyed by it.
type QueueKey struct {
	Tenant string
	Queue  string
}

// PushItem is one message to store, after the adapter's decoding and
// defaults (partition "Default", a generated transaction id, JSON null).
type PushItem struct {
	Queue         string
	Partition     string
	TransactionID string
	TraceID       string // "" stores NULL
	Payload       json.RawMessage
	ProducerSub   string // "" stores NULL; only ever from the token

	tenant string // set by the entry point
	// sealed: Payload is already the encryption envelope (spool replay,
	// dead-letter replay of a payload that cannot be opened).
	sealed bool
}

// PushStatus is what happened to one pushed item.
type PushStatus string

// The push statuses.
const (
	Queued    PushStatus = "queued"    // committed in PostgreSQL
	Duplicate PushStatus = "duplicate" // the transaction id was stored already; the ids are the original's
	Buffered  PushStatus = "buffered"  // fsynced to the disk spool; no ids until its replay stores it
)

// PushResult is the outcome of one PushItem, in input order.
type PushResult struct {
	Status      PushStatus
	MessageID   uuid.UUID // zero when Buffered
	PartitionID uuid.UUID // zero when Buffered
}

// PopRequest is one pop, after the adapter's decoding. Zero values take the
// broker's defaults (Config), except where said.
type PopRequest struct {
	Tenant    string
	Queue     string // the queue and the partition routes
	Partition string // the partition route only
	Namespace string // the namespace/task route only (with or without Task)
	Task      string

	Group         string         // "": queue mode (QueueModeGroup)
	Batch         int            // <= 0: Config.DefaultBatch
	Wait          bool           // long-poll until Timeout
	Timeout       *time.Duration // nil: Config.DefaultTimeout
	AutoAck       bool           // the cursor passes the batch at once
	MaxPartitions int            // <= 0: 1
	// SubscriptionMode "new" or "new-only" starts a named group's new
	// cursors at now; "" means Config.DefaultSubscriptionMode.
	SubscriptionMode string
	// SubscriptionFrom, when set, starts a named group's new cursors there
	// (it wins over SubscriptionMode).
	SubscriptionFrom *time.Time
}

// PopResult is a non-empty pop. Every claimed partition shares LeaseID
// ("" with AutoAck).
type PopResult struct {
	Queue       string // of the first claimed partition
	Partition   string
	PartitionID uuid.UUID
	LeaseID     string
	Group       string
	Partitions  int // partitions claimed
	Messages    []Message
}

// Message is a delivered message with its payload opened.
type Message struct {
	ID            uuid.UUID
	TransactionID string
	TraceID       *uuid.UUID
	Payload       json.RawMessage
	ProducerSub   *string
	CreatedAt     time.Time
	Queue         string
	Partition     string
	PartitionID   uuid.UUID
	RetryCount    int
}

// AckStatus is what a consumer reports about a message.
type AckStatus string

// The ack statuses.
const (
	AckCompleted AckStatus = "completed" // the cursor passes it
	AckFailed    AckStatus = "failed"    // redelivered until the retry limit, then dead-lettered
	AckDLQ       AckStatus = "dlq"       // dead-lettered at once
	AckRetry     AckStatus = "retry"     // the lease is released, the cursor stays
)

// AckItem is one acknowledgement.
type AckItem struct {
	TransactionID string
	PartitionID   uuid.UUID
	Status        AckStatus
	Group         string // "": queue mode
	LeaseID       string // "": no lease check
	Error         string // the reason stored with a dead letter

	tenant string // set by the entry point
}

// AckResult is the outcome of one AckItem, in input order. Refused is nil
// when it applied, else ErrNotFound (no such message), ErrLeaseLost or
// ErrBlocked.
type AckResult struct {
	TransactionID string
	Refused       error
	LeaseReleased bool
	DeadLettered  bool
	Queue         string // "" when the message was not found
	Partition     string
}

// Applied reports whether the acknowledgement applied.
func (r AckResult) Applied() bool { return r.Refused == nil }
