package handlers

import (
	"context"

	"github.com/queenforgo/queen/gen/api"
	"github.com/queenforgo/queen/handlers/broker"
)

// ConfigureQueue creates a queue or replaces all of its options
// (broker.Configure): every option left out returns to its default.
func (s *Server) ConfigureQueue(ctx context.Context, req api.ConfigureQueueRequestObject) (api.ConfigureQueueResponseObject, error) {
	if req.Body == nil {
		return badRequest[api.ConfigureQueue400JSONResponse]("Empty request body"), nil
	}
	b := req.Body
	in := api.QueueOptions{}
	if b.Options != nil {
		in = *b.Options
	}
	o := broker.QueueOptionsDefault()
	set := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	setBool := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	set(&o.Priority, in.Priority)
	set(&o.LeaseTime, in.LeaseTime)
	set(&o.RetryLimit, in.RetryLimit)
	set(&o.RetryDelay, in.RetryDelay)
	set(&o.TTL, in.Ttl)
	set(&o.MaxSize, in.MaxSize)
	setBool(&o.DeadLetterQueue, in.DeadLetterQueue)
	setBool(&o.DlqAfterMaxRetries, in.DlqAfterMaxRetries)
	set(&o.DelayedProcessing, in.DelayedProcessing)
	set(&o.WindowBuffer, in.WindowBuffer)
	set(&o.RetentionSeconds, in.RetentionSeconds)
	set(&o.CompletedRetentionSeconds, in.CompletedRetentionSeconds)
	setBool(&o.RetentionEnabled, in.RetentionEnabled)
	if in.RetentionEnabled == nil && (o.RetentionSeconds > 0 || o.CompletedRetentionSeconds > 0) {
		// queenctl's --retention and --completed-retention, and the JS and
		// Python create() options, never send retentionEnabled: a retention
		// time given alone means retention on. An explicit false wins.
		o.RetentionEnabled = true
	}
	setBool(&o.EncryptionEnabled, in.EncryptionEnabled)
	set(&o.MaxWaitTimeSeconds, in.MaxWaitTimeSeconds)
	q, partID, err := s.b.Configure(ctx, tenant(ctx), b.Queue, deref(b.Namespace, ""), deref(b.Task, ""), o)
	if msg, invalid := invalidMessage(err); invalid {
		return badRequest[api.ConfigureQueue400JSONResponse](msg), nil
	}
	if err != nil {
		return nil, err
	}
	return api.ConfigureQueue200JSONResponse{
		Configured: true, QueueId: q.ID.String(), PartitionId: partID.String(),
		Queue: q.Name, Namespace: q.Namespace, Task: q.Task, Options: resolvedOptions(q.Options),
	}, nil
}

func resolvedOptions(o broker.QueueOptions) api.QueueOptionsResolved {
	return api.QueueOptionsResolved{
		Priority:                  o.Priority,
		LeaseTime:                 o.LeaseTime,
		RetryLimit:                o.RetryLimit,
		RetryDelay:                o.RetryDelay,
		MaxSize:                   o.MaxSize,
		Ttl:                       o.TTL,
		DeadLetterQueue:           o.DeadLetterQueue,
		DlqAfterMaxRetries:        o.DlqAfterMaxRetries,
		DelayedProcessing:         o.DelayedProcessing,
		WindowBuffer:              o.WindowBuffer,
		RetentionSeconds:          o.RetentionSeconds,
		CompletedRetentionSeconds: o.CompletedRetentionSeconds,
		RetentionEnabled:          o.RetentionEnabled,
		EncryptionEnabled:         o.EncryptionEnabled,
		MaxWaitTimeSeconds:        o.MaxWaitTimeSeconds,
	}
}
