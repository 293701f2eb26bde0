// Package pgarray encodes the broker's slice parameters (text, uuid, jsonb,
// int8, int4 and bool arrays) in PostgreSQL's binary array format straight
// from the Go slice. pgx's generic array codec boxes every element into an
// interface and looks its plan up through reflection: at batch 100 a push's
// statement sends eleven arrays of 100 and that was most of the broker's
// allocations per message. The bytes are exactly pgx's own (the tests
// compare them); every other value, and every scan, goes to pgx's codec.
package pgarray

import (
	"encoding/binary"
	"encoding/json"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// Register wraps the array types of m that it encodes. Call it on every
// connection's type map (after pguuid.Register).
func Register(m *pgtype.Map) {
	for _, oid := range []uint32{pgtype.TextArrayOID, pgtype.VarcharArrayOID, pgtype.UUIDArrayOID, pgtype.JSONBArrayOID,
		pgtype.Int8ArrayOID, pgtype.Int4ArrayOID, pgtype.BoolArrayOID} {
		t, ok := m.TypeForOID(oid)
		if !ok {
			continue
		}
		ac, ok := t.Codec.(*pgtype.ArrayCodec)
		if !ok || ac.ElementType == nil {
			continue
		}
		m.RegisterType(&pgtype.Type{Name: t.Name, OID: t.OID, Codec: &codec{Codec: ac, elemOID: ac.ElementType.OID}})
	}
}

// codec is pgx's array codec with a direct binary encoder for the slice
// types of its element.
type codec struct {
	pgtype.Codec
	elemOID uint32
}

func (c *codec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if format == pgtype.BinaryFormatCode {
		switch value.(type) {
		case []string:
			if c.elemOID == pgtype.TextOID || c.elemOID == pgtype.VarcharOID {
				return plan[string]{c.elemOID, appendString}
			}
		case []uuid.UUID:
			if c.elemOID == pgtype.UUIDOID {
				return plan[uuid.UUID]{c.elemOID, appendUUID}
			}
		case []json.RawMessage:
			if c.elemOID == pgtype.JSONBOID {
				return plan[json.RawMessage]{c.elemOID, appendJSONB}
			}
		case []int64:
			if c.elemOID == pgtype.Int8OID {
				return plan[int64]{c.elemOID, appendInt64}
			}
		case []int32:
			if c.elemOID == pgtype.Int4OID {
				return plan[int32]{c.elemOID, appendInt32}
			}
		case []bool:
			if c.elemOID == pgtype.BoolOID {
				return plan[bool]{c.elemOID, appendBool}
			}
		}
	}
	return c.Codec.PlanEncode(m, oid, format, value)
}

// plan encodes a []T as a one-dimensional array, lower bound 1, as pgx does
// (an empty slice too; a nil one is NULL). appendElem appends an element's
// bytes, or reports false for NULL.
type plan[T any] struct {
	elemOID    uint32
	appendElem func(buf []byte, v T) ([]byte, bool)
}

func (p plan[T]) Encode(value any, buf []byte) ([]byte, error) {
	s := value.([]T)
	if s == nil {
		return nil, nil
	}
	nullAt := len(buf) + 4
	buf = binary.BigEndian.AppendUint32(buf, 1) // dimensions
	buf = binary.BigEndian.AppendUint32(buf, 0) // has nulls, set below
	buf = binary.BigEndian.AppendUint32(buf, p.elemOID)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(s)))
	buf = binary.BigEndian.AppendUint32(buf, 1) // lower bound
	for _, v := range s {
		at := len(buf)
		buf = append(buf, 0xff, 0xff, 0xff, 0xff) // -1: NULL, unless filled in
		var ok bool
		if buf, ok = p.appendElem(buf, v); ok {
			binary.BigEndian.PutUint32(buf[at:], uint32(len(buf)-at-4))
		} else {
			binary.BigEndian.PutUint32(buf[nullAt:], 1)
		}
	}
	return buf, nil
}

func appendString(buf []byte, v string) ([]byte, bool) { return append(buf, v...), true }

func appendUUID(buf []byte, v uuid.UUID) ([]byte, bool) { return append(buf, v[:]...), true }

// appendJSONB is jsonb's binary form: version 1, then the text. A nil
// message is NULL, as pgx sends it.
func appendJSONB(buf []byte, v json.RawMessage) ([]byte, bool) {
	if v == nil {
		return buf, false
	}
	buf = append(buf, 1)
	return append(buf, v...), true
}

func appendInt64(buf []byte, v int64) ([]byte, bool) {
	return binary.BigEndian.AppendUint64(buf, uint64(v)), true
}

func appendInt32(buf []byte, v int32) ([]byte, bool) {
	return binary.BigEndian.AppendUint32(buf, uint32(v)), true
}

func appendBool(buf []byte, v bool) ([]byte, bool) {
	if v {
		return append(buf, 1), true
	}
	return append(buf, 0), true
}
