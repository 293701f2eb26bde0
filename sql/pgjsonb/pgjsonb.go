// Package pgjsonb makes pgx read jsonb into json.RawMessage as a plain copy
// of the bytes PostgreSQL sent.
//
// pgx's jsonb codec reads every json.RawMessage through json.Unmarshal,
// which scans the whole document to validate it before copying it: a pop
// reads a payload per message, and that scan was the broker's largest
// single cost in decoding a pop's rows (docs/benchmarks.md). jsonb is
// valid JSON by construction, so Register swaps in a codec whose
// Unmarshal copies into a json.RawMessage and leaves every other target to
// encoding/json as before.
package pgjsonb

import (
	"encoding/json"

	"github.com/jackc/pgx/v5/pgtype"
)

// Register replaces the jsonb codec of m. Call it on every connection's
// type map.
func Register(m *pgtype.Map) {
	t, ok := m.TypeForOID(pgtype.JSONBOID)
	if !ok {
		return
	}
	c, ok := t.Codec.(*pgtype.JSONBCodec)
	if !ok {
		return
	}
	unmarshal := c.Unmarshal
	if unmarshal == nil {
		unmarshal = json.Unmarshal
	}
	m.RegisterType(&pgtype.Type{Name: t.Name, OID: t.OID, Codec: &pgtype.JSONBCodec{
		Marshal: c.Marshal,
		Unmarshal: func(data []byte, v any) error {
			if raw, ok := v.(*json.RawMessage); ok {
				// data is the connection's read buffer: keep a copy.
				*raw = append(json.RawMessage(nil), data...)
				return nil
			}
			return unmarshal(data, v)
		},
	}})
}
