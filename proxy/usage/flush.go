package usage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/queenforgo/queen/gen/pxdb"
	"github.com/queenforgo/queen/proxy/pxerr"
)

// batch is one flush: what the spool file holds.
type batch struct {
	ID   uuid.UUID `json:"id"`
	Rows []row     `json:"rows"`
}

type row struct {
	Cluster uuid.UUID `json:"cluster"`
	Minute  time.Time `json:"minute"`
	Class   string    `json:"class"`
	Counts
}

// Spool file names: "usage-<UnixNano of the spooling>-<batch id>.json",
// so that names sort in the order batches were spooled.
const (
	spoolPrefix = "usage-"
	spoolSuffix = ".json"
	badSuffix   = ".bad" // a batch pxdb refused as malformed, kept for a person to look at
)

func prepareSpool(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("QUEEN_PROXY_SPOOL_DIR %s: %w", dir, err)
	}
	probe, err := os.CreateTemp(dir, ".probe-*")
	if err != nil {
		return fmt.Errorf("QUEEN_PROXY_SPOOL_DIR %s is not writable: %w", dir, err)
	}
	_ = probe.Close()
	return os.Remove(probe.Name())
}

// Flush replays the spool, then adds the counters to pxdb as one batch, or
// spools them when pxdb does not confirm. It returns the first error met
// (what was not written is spooled or back in memory, not lost).
func (m *Meter) Flush(ctx context.Context) error {
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	var checked []uuid.UUID
	replayErr := m.replay(ctx, &checked)
	b := m.take()
	var err error
	switch {
	case len(b.Rows) == 0:
	case replayErr != nil:
		// pxdb is refusing: newer usage queues behind the spool.
		err = m.spool(b)
	default:
		if err = m.apply(ctx, b); err != nil {
			m.cfg.Logger.Warn("usage flush failed; batch spooled for replay", "err", err, "batch", b.ID, "rows", len(b.Rows))
			err = errors.Join(err, m.spool(b))
		} else {
			checked = append(checked, b.clusters()...)
		}
	}
	if len(checked) > 0 {
		m.checkQuotas(ctx, checked)
	}
	return errors.Join(replayErr, err)
}

// apply writes b in one statement; pxdb skips a batch id it applied before.
func (m *Meter) apply(ctx context.Context, b batch) error {
	p := pxdb.UsageBatchApplyParams{BatchID: b.ID, KeepDays: int32(m.cfg.KeepDays)}
	for _, r := range b.Rows {
		p.ClusterIds = append(p.ClusterIds, r.Cluster)
		p.Minutes = append(p.Minutes, r.Minute)
		p.OpClasses = append(p.OpClasses, r.Class)
		p.Msgs = append(p.Msgs, r.Msgs)
		p.Reqs = append(p.Reqs, r.Reqs)
		p.BytesIn = append(p.BytesIn, r.BytesIn)
		p.BytesOut = append(p.BytesOut, r.BytesOut)
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.Timeout)
	defer cancel()
	applied, err := m.q.UsageBatchApply(actx, p)
	if err == nil && !applied {
		m.cfg.Logger.Info("usage batch was applied before; not counted again", "batch", b.ID)
	}
	return err
}

// spool writes b to the spool directory: a temporary file, synced, then
// renamed, so a replay never reads half a batch. When that fails too the
// batch goes back into memory.
func (m *Meter) spool(b batch) error {
	body, err := json.Marshal(b)
	if err == nil {
		err = writeFileSync(m.cfg.SpoolDir, fmt.Sprintf("%s%020d-%s%s", spoolPrefix, m.cfg.NowFunc().UnixNano(), b.ID, spoolSuffix), body)
	}
	if err != nil {
		m.cfg.Logger.Error("usage spool write failed; batch kept in memory", "err", err, "dir", m.cfg.SpoolDir)
		m.putBack(b)
		return err
	}
	return nil
}

// replay applies the spooled batches oldest first and removes each once
// pxdb confirmed it; it stops at the first failure, so order holds.
func (m *Meter) replay(ctx context.Context, checked *[]uuid.UUID) error {
	names, err := spooled(m.cfg.SpoolDir)
	if err != nil {
		return err
	}
	for _, name := range names {
		path := filepath.Join(m.cfg.SpoolDir, name)
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var b batch
		if err := json.Unmarshal(raw, &b); err != nil || b.ID == uuid.Nil {
			m.cfg.Logger.Error("usage spool file unreadable; set aside", "file", name, "err", err)
			_ = os.Rename(path, path+badSuffix)
			continue
		}
		if err := m.apply(ctx, b); err != nil {
			if malformed(err) {
				m.cfg.Logger.Error("usage batch refused by pxdb; set aside", "file", name, "err", err)
				_ = os.Rename(path, path+badSuffix)
				continue
			}
			return err
		}
		if err := os.Remove(path); err != nil {
			return err
		}
		m.cfg.Logger.Info("spooled usage batch replayed", "batch", b.ID, "rows", len(b.Rows))
		*checked = append(*checked, b.clusters()...)
	}
	return nil
}

// Spooled is the number of batches waiting in the spool, for tests and the
// logs.
func (m *Meter) Spooled() int {
	names, _ := spooled(m.cfg.SpoolDir)
	return len(names)
}

func spooled(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); e.Type().IsRegular() && strings.HasPrefix(n, spoolPrefix) && strings.HasSuffix(n, spoolSuffix) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

// malformed tells a batch pxdb will never take (bad data) from pxdb being
// unreachable or busy, which a replay outlasts.
func malformed(err error) bool { return errors.Is(pxerr.Translate(err), pxerr.ErrPermanent) }

func (b batch) clusters() []uuid.UUID {
	var out []uuid.UUID
	for _, r := range b.Rows {
		if !slices.Contains(out, r.Cluster) {
			out = append(out, r.Cluster)
		}
	}
	return out
}

// checkQuotas applies the monthly quotas of the clusters just metered.
func (m *Meter) checkQuotas(ctx context.Context, clusters []uuid.UUID) {
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.Timeout)
	defer cancel()
	changed, err := m.q.UsageQuotasCheck(qctx, pxdb.UsageQuotasCheckParams{ClusterIds: clusters, WarnPercent: int32(m.cfg.WarnPercent)})
	switch {
	case err != nil:
		m.cfg.Logger.Warn("monthly quota check failed; the next flush checks again", "err", err)
	case changed > 0:
		m.cfg.Logger.Info("monthly quota changed cluster statuses", "clusters", changed)
	}
}

// writeFileSync writes name in dir durably: temporary file, fsync, rename,
// fsync of the directory.
func writeFileSync(dir, name string, body []byte) error {
	f, err := os.CreateTemp(dir, ".tmp-"+name+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
