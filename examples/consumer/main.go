// Command consumer shows the Go SDK (sdk/queen): it pushes a few orders to a
// queue, consumes them with a long-poll loop that acks each one after it is
// printed, and stops when it has seen them all (or on Ctrl-C).
//
//	make run                        # a broker on :6632, in another terminal
//	go run ./examples/consumer -n 5
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/queenforgo/queen/gen/client"
	"github.com/queenforgo/queen/sdk/queen"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

type order struct {
	ID    int     `json:"id"`
	Total float64 `json:"total"`
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("consumer", flag.ContinueOnError)
	url := fs.String("url", "http://localhost:6632", "broker URL")
	queue := fs.String("queue", "example-orders", "queue to use")
	n := fs.Int("n", 5, "orders to push and consume")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *n < 1 {
		return errors.New("-n must be at least 1")
	}

	c, err := queen.New(*url)
	if err != nil {
		return err
	}

	// Push: one request; the transaction ids make a re-run a no-op
	// ("duplicate") instead of a second copy.
	runID := strconv.FormatInt(time.Now().UnixNano(), 36)
	msgs := make([]queen.Message, *n)
	for i := range msgs {
		msgs[i] = queen.Message{
			Queue: *queue, Partition: "customer-42",
			TransactionID: runID + "-" + strconv.Itoa(i),
			Payload:       order{ID: i, Total: 10 * float64(i+1)},
		}
	}
	results, err := c.Push(ctx, msgs...)
	if err != nil {
		return err
	}
	for _, r := range results {
		fmt.Fprintf(out, "pushed %s: %s\n", *r.TransactionId, r.Status)
	}

	// Consume until every order of this run was seen: the handler returns
	// nil, so each message is acked as completed.
	cctx, done := context.WithCancel(ctx)
	defer done()
	seen := 0
	err = c.Consume(cctx, queen.ConsumerConfig{Queue: *queue, Batch: 10, Wait: 5 * time.Second},
		func(_ context.Context, m client.PoppedMessage) error {
			var o order
			if m.Data == nil || json.Unmarshal(*m.Data, &o) != nil {
				return fmt.Errorf("message %s: not an order", m.TransactionId)
			}
			fmt.Fprintf(out, "consumed %s: order %d, total %.2f (partition %s)\n", m.TransactionId, o.ID, o.Total, m.Partition)
			seen++
			if seen == *n {
				done()
			}
			return nil
		})
	if err != nil {
		return err
	}
	if seen < *n {
		return ctx.Err()
	}
	return nil
}
