package usage

import "context"

// ApplyThenSpool writes the counters as one batch and then spools the same
// batch, as a flush does when pxdb committed but the confirmation was lost.
func (m *Meter) ApplyThenSpool(ctx context.Context) error {
	b := m.take()
	if err := m.apply(ctx, b); err != nil {
		return err
	}
	return m.spool(b)
}
