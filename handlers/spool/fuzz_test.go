package spool

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzSpoolReader: whatever the bytes (a spool file is read back after
// crashes, disk damage and hand edits), the reader never panics, never
// claims more good bytes than it read, stops with io.EOF, ErrTorn or
// ErrCorrupt, and every record it returns survives a round trip through the
// writer's encoding. Seeds in testdata/fuzz/FuzzSpoolReader run in every
// go test.
func FuzzSpoolReader(f *testing.F) {
	full := Encode(sampleRecords())
	f.Add(full)
	f.Add(full[:len(full)-7])
	f.Add([]byte{})
	f.Add(fileHeader[:5])
	legacy := binary.LittleEndian.AppendUint32(nil, 60)
	legacy = append(legacy, `{"queue":"q","transactionId":"t","payload":{"a":[1,2,3]}}   `...)
	f.Add(legacy)
	f.Add(append(bytes.Clone(fileHeader[:]), 0xff, 0xff, 0xff, 0x3f, 0, 0, 0, 0, '{'))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		var recs []Record
		for {
			rec, err := r.Next()
			if err != nil {
				require.True(t, err == io.EOF || errors.Is(err, ErrTorn) || errors.Is(err, ErrCorrupt), "%v", err)
				_, again := r.Next()
				require.Equal(t, err, again, "errors are sticky")
				break
			}
			require.NotEmpty(t, rec.Queue)
			require.NotEmpty(t, rec.TransactionID)
			require.NotEmpty(t, rec.Partition)
			recs = append(recs, rec)
		}
		require.LessOrEqual(t, r.Offset(), int64(len(data)))
		if len(recs) == 0 {
			return
		}
		back := NewReader(bytes.NewReader(Encode(recs)))
		for _, want := range recs {
			got, err := back.Next()
			require.NoError(t, err)
			require.Equal(t, want.Queue, got.Queue)
			require.Equal(t, want.Partition, got.Partition)
			require.Equal(t, want.TransactionID, got.TransactionID)
			require.Equal(t, want.Encrypted, got.Encrypted)
			require.JSONEq(t, string(want.Payload), string(got.Payload))
		}
		_, err := back.Next()
		require.Equal(t, io.EOF, err)
	})
}
