package spool

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func sampleRecords() []Record {
	return []Record{
		{Queue: "orders", Partition: "customer-42", TransactionID: "tx-1", Payload: json.RawMessage(`{"total": 10}`)},
		{Queue: "orders", Partition: "Default", TransactionID: "tx-2", TraceID: "0190f7a4-0000-7000-8000-000000000001",
			ProducerSub: "svc-a", Payload: json.RawMessage(`"caf\u00e9 \"quoted\" <b>"`)},
		{Queue: "audit", Partition: "Default", Tenant: "acme", TransactionID: "tx-\u00e9\n3", Encrypted: true,
			Payload: json.RawMessage(`{"encrypted":"AAAA","iv":"BBBB","authTag":"CCCC"}`)},
	}
}

// SP-2: three events written by the spool, read back by an independent
// parser of the documented format (header, then u32 LE length, u32 LE
// CRC-32C, JSON body).
func TestFormatReadByIndependentParser(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := Open(Config{Dir: dir})
	want := sampleRecords()
	require.NoError(t, s.Append(t.Context(), want))
	require.NoError(t, s.Close())

	files, err := filepath.Glob(filepath.Join(dir, "queen-*.buf"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	require.Regexp(t, `^queen-\d{13}-\d{8}\.buf$`, filepath.Base(files[0]))
	raw, err := os.ReadFile(files[0])
	require.NoError(t, err)

	require.Equal(t, []byte("QSPOOL\x00\x01"), raw[:8])
	raw = raw[8:]
	var got []map[string]any
	for len(raw) > 0 {
		require.GreaterOrEqual(t, len(raw), 8)
		n := binary.LittleEndian.Uint32(raw[0:4])
		sum := binary.LittleEndian.Uint32(raw[4:8])
		body := raw[8 : 8+n]
		require.Equal(t, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)), sum)
		var m map[string]any
		require.NoError(t, json.Unmarshal(body, &m))
		got = append(got, m)
		raw = raw[8+n:]
	}
	require.Len(t, got, 3)
	for i, w := range want {
		require.Equal(t, w.Queue, got[i]["queue"])
		require.Equal(t, w.Partition, got[i]["partition"])
		require.Equal(t, w.TransactionID, got[i]["transactionId"])
		require.Equal(t, w.Encrypted, got[i]["encrypted"])
		var wantPayload any
		require.NoError(t, json.Unmarshal(w.Payload, &wantPayload))
		require.Equal(t, wantPayload, got[i]["payload"])
	}
	require.Equal(t, "acme", got[2]["tenant"])
	require.Equal(t, "svc-a", got[1]["producerSub"])
	require.NotContains(t, got[0], "traceId")
}

func readAll(t *testing.T, b []byte) ([]Record, int64, error) {
	t.Helper()
	r := NewReader(bytes.NewReader(b))
	var out []Record
	for {
		rec, err := r.Next()
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return out, r.Offset(), err
		}
		out = append(out, rec)
	}
}

// A file cut at any byte reads as the records wholly before the cut, then
// ErrTorn (or a clean end exactly at a record boundary).
func TestReaderToleratesTornTail(t *testing.T) {
	t.Parallel()
	recs := sampleRecords()
	full := Encode(recs)
	var bounds []int
	for i := range recs {
		bounds = append(bounds, len(Encode(recs[:i+1])))
	}
	for cut := 0; cut <= len(full); cut++ {
		got, off, err := readAll(t, full[:cut])
		whole := 0
		for _, b := range bounds {
			if b <= cut {
				whole++
			}
		}
		require.Len(t, got, whole, "cut at %d", cut)
		atBoundary := cut == 0 || cut == headerLen
		for _, b := range bounds {
			atBoundary = atBoundary || b == cut
		}
		if atBoundary {
			require.NoError(t, err, "cut at %d", cut)
		} else {
			require.ErrorIs(t, err, ErrTorn, "cut at %d", cut)
		}
		if cut >= headerLen {
			require.LessOrEqual(t, off, int64(cut))
		}
	}
}

// A flipped bit anywhere in a record's body fails its checksum: the reader
// stops there with ErrCorrupt and returns what came before.
func TestReaderDetectsCorruption(t *testing.T) {
	t.Parallel()
	recs := sampleRecords()
	full := Encode(recs)
	first := len(Encode(recs[:1]))
	for i := first + frameLen; i < len(Encode(recs[:2])); i++ {
		b := bytes.Clone(full)
		b[i] ^= 0x10
		got, off, err := readAll(t, b)
		require.ErrorIs(t, err, ErrCorrupt, "byte %d", i)
		require.Len(t, got, 1)
		require.Equal(t, int64(first), off)
	}
	// An impossible length.
	b := bytes.Clone(full)
	binary.LittleEndian.PutUint32(b[first:], MaxRecordLen+1)
	_, _, err := readAll(t, b)
	require.ErrorIs(t, err, ErrCorrupt)
	// Not a spool file at all.
	_, _, err = readAll(t, []byte("hello, world"))
	require.ErrorIs(t, err, ErrCorrupt)
}

// Files of the reference broker (no header, no checksum) are read too, so a
// spool left by it is replayed after switching brokers.
func TestReaderReadsReferenceFormat(t *testing.T) {
	t.Parallel()
	var b []byte
	for _, body := range []string{
		`{"queue":"q","partition":"p","transactionId":"a","payload":{"x":1},"encrypted":false}`,
		`{"queue":"q","transactionId":"b","payload":null}`,
	} {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(body)))
		b = append(b, body...)
	}
	got, _, err := readAll(t, b)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "p", got[0].Partition)
	require.Equal(t, "Default", got[1].Partition)
	require.JSONEq(t, `{"x":1}`, string(got[0].Payload))
	require.Equal(t, "null", string(got[1].Payload))

	got, _, err = readAll(t, b[:len(b)-3])
	require.ErrorIs(t, err, ErrTorn)
	require.Len(t, got, 1)
}

// Records missing what replay needs are damage, not records.
func TestReaderRejectsIncompleteRecords(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{"transactionId":"a","payload":1}`, `{"queue":"q","payload":1}`, `[1,2]`} {
		var b []byte
		b = binary.LittleEndian.AppendUint32(b, uint32(len(body)))
		b = append(b, body...)
		_, _, err := readAll(t, b)
		require.True(t, errors.Is(err, ErrCorrupt) || errors.Is(err, ErrTorn), "%s: %v", body, err)
	}
}
