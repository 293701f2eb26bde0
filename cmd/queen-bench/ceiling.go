package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ceilingTable is shaped like queen.messages minus the columns a push
// leaves NULL or default, with the same keys and indexes, so that the
// ceiling pays the same index maintenance as the broker's inserts. It is a
// regular (WAL-logged) table: a TEMP or UNLOGGED one would not have the
// broker's durability.
const ceilingTable = `CREATE TABLE messages (
    id             uuid PRIMARY KEY,
    partition_id   uuid NOT NULL,
    seq            bigint NOT NULL,
    transaction_id text NOT NULL,
    payload        jsonb NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (partition_id, seq),
    UNIQUE (partition_id, transaction_id)
);
CREATE INDEX ON messages (created_at)`

// ceilingMinTable is the least a broker must write per message: the order
// key (partition, seq), the dedup key (partition, transactionId) and the
// payload, nothing else. The broker's own indexes and columns are what
// separates it from ceilingTable.
const ceilingMinTable = `CREATE TABLE messages (
    partition_id   uuid NOT NULL,
    seq            bigint NOT NULL,
    transaction_id text NOT NULL,
    payload        jsonb NOT NULL,
    PRIMARY KEY (partition_id, seq),
    UNIQUE (partition_id, transaction_id)
)`

// ceilingInsert is one multi-row INSERT per batch, in its own transaction
// (autocommit), like one push.
const ceilingInsert = `INSERT INTO messages (id, partition_id, seq, transaction_id, payload)
SELECT unnest($1::uuid[]), unnest($2::uuid[]), unnest($3::bigint[]), unnest($4::text[]), unnest($5::jsonb[])`

// ceilingMinInsert is ceilingInsert for ceilingMinTable (no id).
const ceilingMinInsert = `INSERT INTO messages (partition_id, seq, transaction_id, payload)
SELECT unnest($1::uuid[]), unnest($2::bigint[]), unnest($3::text[]), unnest($4::jsonb[])`

// ceilingScenario inserts the rows a push run would store, straight into
// PostgreSQL: -producers connections, -batch rows per statement, the same
// partition rotation and payloads, the server's default durability, for
// -duration. The scratch schema is dropped afterwards. minimal picks
// ceilingMinTable (scenario ceiling-min) instead of ceilingTable.
func (b *bench) ceilingScenario(ctx context.Context, minimal bool) (result, error) {
	scenario, table, insert := "ceiling", ceilingTable, ceilingInsert
	if minimal {
		scenario, table, insert = "ceiling-min", ceilingMinTable, ceilingMinInsert
	}
	schema := ceilingSchema(b.cfg.Queue + "-" + scenario)
	if _, err := b.pg.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return result{}, fmt.Errorf("create scratch schema: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if _, err := b.pg.Exec(dctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			fmt.Fprintf(b.log, "queen-bench: drop scratch schema %s: %v\n", schema, err)
		}
	}()

	pcfg, err := pgxpool.ParseConfig(b.cfg.PG)
	if err != nil {
		return result{}, fmt.Errorf("parse -pg: %w", err)
	}
	pcfg.MaxConns = int32(b.cfg.Producers)
	pcfg.MinConns = int32(b.cfg.Producers)
	pcfg.ConnConfig.RuntimeParams["search_path"] = schema
	pcfg.ConnConfig.RuntimeParams["application_name"] = "queen-bench-ceiling"
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return result{}, fmt.Errorf("connect: %w", err)
	}
	closePool := sync.OnceFunc(pool.Close)
	defer closePool()
	if _, err := pool.Exec(ctx, table); err != nil {
		return result{}, fmt.Errorf("create scratch table: %w", err)
	}
	// Open every connection before the clock starts.
	conns := make([]*pgxpool.Conn, b.cfg.Producers)
	for i := range conns {
		if conns[i], err = pool.Acquire(ctx); err != nil {
			return result{}, fmt.Errorf("connect: %w", err)
		}
	}
	for _, c := range conns {
		c.Release()
	}

	parts := make([]uuid.UUID, b.cfg.Partitions)
	for i := range parts {
		parts[i] = uuid.New()
	}
	seqs := make([]atomic.Int64, len(parts))
	pad := strings.Repeat("x", max(b.cfg.PayloadBytes-payloadOverhead, 0))
	bud := newBudget(b.cfg.MaxMessages)
	recs := make([]recorder, b.cfg.Producers)
	var t tally

	m := b.startMeasure(ctx)
	start := time.Now()
	deadline := start.Add(b.cfg.Duration)
	var wg sync.WaitGroup
	for w := range b.cfg.Producers {
		wg.Go(func() {
			var payload []byte
			prefix := schema + "-" + strconv.Itoa(w) + "-"
			for k := 0; ctx.Err() == nil && time.Now().Before(deadline); k++ {
				n := bud.take(b.cfg.Batch)
				if n == 0 {
					return
				}
				p := (w + k*b.cfg.Producers) % len(parts)
				last := seqs[p].Add(int64(n))
				ids := make([]uuid.UUID, n)
				partIDs := make([]uuid.UUID, n)
				seqCol := make([]int64, n)
				txIDs := make([]string, n)
				payloads := make([]string, n)
				now := time.Now().UnixNano()
				for i := range n {
					ids[i], _ = uuid.NewV7()
					partIDs[i] = parts[p]
					seqCol[i] = last - int64(n) + 1 + int64(i)
					txIDs[i] = prefix + strconv.FormatInt(seqCol[i], 10)
					payload = appendPayload(payload[:0], now, pad)
					payloads[i] = string(payload)
				}
				began := time.Now()
				args := []any{ids, partIDs, seqCol, txIDs, payloads}
				if minimal {
					args = args[1:]
				}
				if _, err := pool.Exec(ctx, insert, args...); err != nil {
					if ctx.Err() != nil {
						return
					}
					t.fail(err)
					continue
				}
				end := time.Now()
				recs[w].add(end.Sub(began))
				t.count(int64(n), end)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	// Closing the connections flushes their statistics to pg_stat_database.
	closePool()
	all := make([]*recorder, len(recs))
	for i := range recs {
		all[i] = &recs[i]
	}
	res := result{
		Scenario: scenario,
		Command:  b.command(scenario, "duration", "producers", "batch", "partitions", "payload-bytes"),
		Messages: t.msgs.Load(),
		Elapsed:  elapsed,
		Latency:  mergeRecorders(all...).summary(),
	}
	if minimal {
		res.note(fmt.Sprintf("plain INSERT ... unnest over %d connections, keys (partition_id, seq) and (partition_id, transaction_id) only", b.cfg.Producers))
	} else {
		res.note(fmt.Sprintf("plain INSERT ... unnest over %d connections", b.cfg.Producers))
	}
	res.note(t.errorNote())
	m.finish(ctx, &res)
	return res, nil
}

// ceilingSchema is a scratch schema name derived from the run's queue
// prefix: lowercase, [a-z0-9_] only, within PostgreSQL's 63 bytes.
func ceilingSchema(queue string) string {
	var sb strings.Builder
	sb.WriteString("queen_bench_")
	for _, r := range strings.ToLower(queue) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			sb.WriteRune(r)
		} else {
			sb.WriteByte('_')
		}
	}
	s := sb.String()
	if len(s) > 63 {
		s = s[:63]
	}
	return s
}
