// Package pguuid makes pgx send and read github.com/google/uuid values in
// PostgreSQL's 16-byte binary form.
//
// uuid.UUID implements driver.Valuer, and pgx falls back to that interface
// for types it does not know: every id became a 36-character string that
// PostgreSQL parsed back, about a tenth of the broker's CPU on a push of 100
// messages (docs/benchmarks.md). Register puts a wrapper in front of that
// fallback, for single values and for the elements of uuid arrays alike.
//
// Scanning had the same detour the other way: *uuid.UUID implements
// sql.Scanner, which pgx tries before any wrapper, so every id read was
// formatted as text by pgx and parsed back by uuid.UUID.Scan. Register also
// replaces the uuid type's codec with one that copies the 16 bytes into a
// *uuid.UUID itself.
package pguuid

import (
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// Register teaches m the binary encoding of uuid.UUID, in both directions.
// Call it from the pool's AfterConnect, on every connection (before
// pgarray.Register, which wraps the uuid[] codec registered here).
func Register(m *pgtype.Map) {
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryWrapEncode}, m.TryWrapEncodePlanFuncs...)
	m.TryWrapScanPlanFuncs = append([]pgtype.TryWrapScanPlanFunc{tryWrapScan}, m.TryWrapScanPlanFuncs...)
	t, ok := m.TypeForOID(pgtype.UUIDOID)
	if !ok {
		return
	}
	if _, done := t.Codec.(scanCodec); done {
		return
	}
	elem := &pgtype.Type{Name: t.Name, OID: t.OID, Codec: scanCodec{t.Codec}}
	m.RegisterType(elem)
	if a, ok := m.TypeForOID(pgtype.UUIDArrayOID); ok {
		m.RegisterType(&pgtype.Type{Name: a.Name, OID: a.OID, Codec: &pgtype.ArrayCodec{ElementType: elem}})
	}
}

// scanCodec is the uuid codec with a direct binary scan into *uuid.UUID;
// everything else is the codec's own.
type scanCodec struct{ pgtype.Codec }

func (c scanCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*uuid.UUID); ok && format == pgtype.BinaryFormatCode {
		return binaryScan{}
	}
	return c.Codec.PlanScan(m, oid, format, target)
}

// binaryScan reads the 16 bytes of a binary uuid. NULL leaves the target
// as it was, as uuid.UUID's own Scan does.
type binaryScan struct{}

func (binaryScan) Scan(src []byte, target any) error {
	if src == nil {
		return nil
	}
	if len(src) != 16 {
		return fmt.Errorf("uuid: %d bytes in binary form, want 16", len(src))
	}
	copy(target.(*uuid.UUID)[:], src)
	return nil
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
