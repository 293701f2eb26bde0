// Package pguuid makes pgx send and read github.com/google/uuid values in
// PostgreSQL's 16-byte binary form.
//
// uuid.UUID implements driver.Valuer, and pgx falls back to that interface
// for types it does not know: every id became a 36-character string that
// PostgreSQL parsed back, about a tenth of the broker's CPU on a push of 100
// messages (docs/benchmarks.md). Register puts a wrapper in front of that
// fallback, for single values and for the elements of uuid arrays alike.
package pguuid

import (
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// Register teaches m the binary encoding of uuid.UUID, in both directions.
// Call it from the pool's AfterConnect, on every connection.
func Register(m *pgtype.Map) {
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryWrapEncode}, m.TryWrapEncodePlanFuncs...)
	m.TryWrapScanPlanFuncs = append([]pgtype.TryWrapScanPlanFunc{tryWrapScan}, m.TryWrapScanPlanFuncs...)
}

// binaryUUID is uuid.UUID as pgtype's UUID codec understands it.
type binaryUUID uuid.UUID

func (u binaryUUID) UUIDValue() (pgtype.UUID, error) {
	return pgtype.UUID{Bytes: u, Valid: true}, nil
}

// ScanUUID leaves the target as it was for NULL, as uuid.UUID's own Scan
// does.
func (u *binaryUUID) ScanUUID(v pgtype.UUID) error {
	if v.Valid {
		*u = v.Bytes
	}
	return nil
}

func tryWrapEncode(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	if u, ok := value.(uuid.UUID); ok {
		return &encodePlan{}, binaryUUID(u), true
	}
	return nil, nil, false
}

type encodePlan struct{ next pgtype.EncodePlan }

func (p *encodePlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *encodePlan) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode(binaryUUID(value.(uuid.UUID)), buf)
}

func tryWrapScan(target any) (pgtype.WrappedScanPlanNextSetter, any, bool) {
	if u, ok := target.(*uuid.UUID); ok {
		return &scanPlan{}, (*binaryUUID)(u), true
	}
	return nil, nil, false
}

type scanPlan struct{ next pgtype.ScanPlan }

func (p *scanPlan) SetNext(next pgtype.ScanPlan) { p.next = next }

func (p *scanPlan) Scan(src []byte, target any) error {
	return p.next.Scan(src, (*binaryUUID)(target.(*uuid.UUID)))
}
