package migration

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/queenforgo/queen/gen/db"
)

// TestConnection connects to target and returns its server version.
func TestConnection(ctx context.Context, target Endpoint) (string, error) {
	conn, err := target.Connect(ctx)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return db.New(conn).ServerVersion(ctx)
}

// TableCount compares one table's rows on the source and the target; -1
// when a side could not be counted (the table is missing there).
type TableCount struct {
	Table          string
	Source, Target int64
}

// Validate counts the rows of every table of schema on the source and the
// target.
func (r *Runner) Validate(ctx context.Context, target Endpoint, schema string) ([]TableCount, error) {
	if schema == "" {
		schema = "queen"
	}
	count := func(e Endpoint, side string) (map[string]int64, []string, error) {
		conn, err := e.Connect(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("Failed to connect to %s: %w", side, err) //nolint:staticcheck // ST1005: the reference broker's wire text, shown to the dashboard as is
		}
		defer conn.Close(context.WithoutCancel(ctx))
		rows, err := db.New(conn).SchemaTableCounts(ctx, schema)
		if err != nil {
			return nil, nil, fmt.Errorf("Failed to count %s tables: %w", side, err) //nolint:staticcheck // ST1005: wire text, as above
		}
		m := make(map[string]int64, len(rows))
		names := make([]string, 0, len(rows))
		for _, row := range rows {
			m[row.TableName] = row.RowCount
			names = append(names, row.TableName)
		}
		return m, names, nil
	}
	src, names, err := count(r.source, "source")
	if err != nil {
		return nil, err
	}
	dst, dstNames, err := count(target, "target")
	if err != nil {
		return nil, err
	}
	for _, n := range dstNames {
		if _, ok := src[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	out := make([]TableCount, 0, len(names))
	for _, n := range names {
		tc := TableCount{Table: n, Source: -1, Target: -1}
		if v, ok := src[n]; ok {
			tc.Source = v
		}
		if v, ok := dst[n]; ok {
			tc.Target = v
		}
		out = append(out, tc)
	}
	return out, nil
}

// limitedBuffer keeps the last outputLimit bytes written to it.
type limitedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	b.buf.Write(p)
	if over := b.buf.Len() - outputLimit; over > 0 {
		b.buf.Next(over)
	}
	return n, nil
}

func (b *limitedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
