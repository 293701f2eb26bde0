// Package pgjsonb makes pgx read jsonb into a json.RawMessage by copying the
// bytes PostgreSQL sent.
//
// pgx's JSON codecs copy only into a *[]byte; a *json.RawMessage (a named
// slice type) goes through json.Unmarshal, which first validates the whole
// document and then copies it: about 7 % of the broker's CPU on pops of 100
// messages (docs/benchmarks.md). PostgreSQL only ever sends valid JSON for a
// jsonb value, and its text form has no surrounding white space, so the copy
// holds the same bytes Unmarshal would have stored.
package pgjsonb

import (
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5/pgtype"
)

// Register wraps the jsonb codec of m. Call it from the pool's
// AfterConnect, on every connection.
func Register(m *pgtype.Map) {
	t, ok := m.TypeForOID(pgtype.JSONBOID)
	if !ok {
		return
	}
	if _, done := t.Codec.(codec); done {
		return
	}
	m.RegisterType(&pgtype.Type{Name: t.Name, OID: t.OID, Codec: codec{t.Codec}})
}

// codec is the jsonb codec with a direct scan into *json.RawMessage;
// everything else is the codec's own.
type codec struct{ pgtype.Codec }

func (c codec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*json.RawMessage); ok {
		switch format {
		case pgtype.BinaryFormatCode:
			return rawScan{binary: true}
		case pgtype.TextFormatCode:
			return rawScan{}
		}
	}
	return c.Codec.PlanScan(m, oid, format, target)
}

// rawScan copies a jsonb value; NULL is a nil RawMessage, as json.Unmarshal
// left it. The binary form is a version byte (1) and the text.
type rawScan struct{ binary bool }

func (p rawScan) Scan(src []byte, target any) error {
	dst := target.(*json.RawMessage)
	if src == nil {
		*dst = nil
		return nil
	}
	if p.binary {
		if len(src) == 0 || src[0] != 1 {
			return fmt.Errorf("jsonb: unknown binary version")
		}
		src = src[1:]
	}
	*dst = append(json.RawMessage(nil), src...)
	return nil
}
