// Package spool is the broker's disk spool (FILE_BUFFER_DIR): pushes that
// PostgreSQL cannot take, or that arrive during push maintenance, are
// appended to local files and answered `buffered`; a background drain
// replays them into the database later, oldest first.
//
// One job, four parts: the file format (this file and reader.go), the
// writer with group fsync (spool.go), recovery of what a crash left behind
// (recover.go), and the drain (drain.go). docs/spool.md describes the format
// and what a `buffered` answer promises.
package spool

import (
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
)

// Record is one spooled push item, as it will be replayed.
type Record struct {
	Queue     string `json:"queue"`
	Partition string `json:"partition"`
	// Tenant is reserved for native tenancy; written when set, carried
	// through replay untouched.
	Tenant        string `json:"tenant,omitempty"`
	TransactionID string `json:"transactionId"`
	TraceID       string `json:"traceId,omitempty"`
	ProducerSub   string `json:"producerSub,omitempty"`
	// Encrypted means Payload is already the sealed envelope: replay stores
	// it as is and marks the row encrypted.
	Encrypted bool            `json:"encrypted"`
	Payload   json.RawMessage `json:"payload"`
}

// key identifies the partition a record belongs to, for the per-partition
// pending counts that keep order.
func (r *Record) key() string { return Key(r.Tenant, r.Queue, r.Partition) }

// Key is the identity of a partition in the pending counts.
func Key(tenant, queue, partition string) string {
	if partition == "" {
		partition = "Default"
	}
	return tenant + "\x00" + queue + "\x00" + partition
}

// File layout (docs/spool.md):
//
//	header  8 bytes  "QSPOOL" 0x00 0x01 (format version 1)
//	record  4 bytes  little-endian length n of the body
//	        4 bytes  little-endian CRC-32C (Castagnoli) of the body
//	        n bytes  body: one JSON object (Record)
//
// Files without the header are read as the reference broker's format:
// records of a 4-byte little-endian length and the JSON body, no checksum.
const (
	headerLen = 8
	frameLen  = 8
	// MaxRecordLen bounds one record's body. A larger length can only be
	// damage; the reader stops there instead of allocating it.
	MaxRecordLen = 1 << 30
)

var (
	fileHeader = [headerLen]byte{'Q', 'S', 'P', 'O', 'O', 'L', 0x00, 0x01}
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// appendFrame appends the framed record to dst. The payload is copied byte
// for byte; it must be valid JSON, which every decoded push payload is.
func appendFrame(dst []byte, r *Record) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, frameLen)...)
	body := len(dst)
	dst = append(dst, `{"queue":`...)
	dst = appendString(dst, r.Queue)
	dst = append(dst, `,"partition":`...)
	dst = appendString(dst, r.Partition)
	if r.Tenant != "" {
		dst = append(dst, `,"tenant":`...)
		dst = appendString(dst, r.Tenant)
	}
	dst = append(dst, `,"transactionId":`...)
	dst = appendString(dst, r.TransactionID)
	if r.TraceID != "" {
		dst = append(dst, `,"traceId":`...)
		dst = appendString(dst, r.TraceID)
	}
	if r.ProducerSub != "" {
		dst = append(dst, `,"producerSub":`...)
		dst = appendString(dst, r.ProducerSub)
	}
	if r.Encrypted {
		dst = append(dst, `,"encrypted":true`...)
	} else {
		dst = append(dst, `,"encrypted":false`...)
	}
	dst = append(dst, `,"payload":`...)
	if len(r.Payload) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, r.Payload...)
	}
	dst = append(dst, '}')
	n := len(dst) - body
	binary.LittleEndian.PutUint32(dst[start:], uint32(n))
	binary.LittleEndian.PutUint32(dst[start+4:], crc32.Checksum(dst[body:], castagnoli))
	return dst
}

// appendString appends s as a JSON string. Invalid UTF-8 cannot occur in
// names that passed validation; json.Marshal would replace it anyway.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// Encode returns records framed as a whole spool file, header included. It
// is for tests and tools; the writer frames records as they come.
func Encode(recs []Record) []byte {
	out := append([]byte(nil), fileHeader[:]...)
	for i := range recs {
		out = appendFrame(out, &recs[i])
	}
	return out
}
