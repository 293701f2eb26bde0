package spool

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

var (
	// ErrTorn means the input ends inside a record: a write cut short by a
	// crash. Everything before it is good.
	ErrTorn = errors.New("spool: torn record at end of file")
	// ErrCorrupt means a record is damaged (bad checksum, impossible length,
	// unreadable JSON, missing fields) or the file is not a spool file. The
	// framing cannot be trusted past it.
	ErrCorrupt = errors.New("spool: corrupt record")
)

// Reader reads the records of one spool file, of either format. It never
// allocates more than the input holds, whatever lengths it claims.
type Reader struct {
	r       *bufio.Reader
	started bool
	legacy  bool
	off     int64 // end of the last good record (or of the header)
	pos     int64 // bytes consumed
	body    bytes.Buffer
	err     error // sticky
}

// NewReader reads records from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Offset is the length of the good prefix read so far: the header and every
// record Next returned. Truncating a file there removes a torn tail.
func (r *Reader) Offset() int64 { return r.off }

// Legacy reports whether the input is in the reference broker's format
// (no header, no checksums). Valid after the first call to Next.
func (r *Reader) Legacy() bool { return r.legacy }

// Next returns the next record; io.EOF at a clean end, ErrTorn when the
// input ends inside a record, ErrCorrupt (wrapped, with the offset) for
// damage. After an error, Next keeps returning it.
func (r *Reader) Next() (Record, error) {
	if r.err != nil {
		return Record{}, r.err
	}
	rec, err := r.next()
	if err != nil {
		r.err = err
	}
	return rec, err
}

func (r *Reader) next() (Record, error) {
	if !r.started {
		if err := r.start(); err != nil {
			return Record{}, err
		}
	}
	var frame [frameLen]byte
	flen := frameLen
	if r.legacy {
		flen = 4
	}
	n, err := io.ReadFull(r.r, frame[:flen])
	r.pos += int64(n)
	switch {
	case err == io.EOF:
		return Record{}, io.EOF
	case err != nil:
		return Record{}, ErrTorn
	}
	size := binary.LittleEndian.Uint32(frame[:4])
	if size < 2 || size > MaxRecordLen {
		return Record{}, r.corrupt("impossible length %d", size)
	}
	r.body.Reset()
	// Grow with what actually arrives, never by the claimed length.
	copied, err := io.CopyN(&r.body, r.r, int64(size))
	r.pos += copied
	if err != nil {
		return Record{}, ErrTorn
	}
	body := r.body.Bytes()
	if !r.legacy {
		if want := binary.LittleEndian.Uint32(frame[4:]); crc32.Checksum(body, castagnoli) != want {
			return Record{}, r.corrupt("checksum mismatch")
		}
	}
	rec, err := decodeBody(body)
	if err != nil {
		return Record{}, r.corrupt("%v", err)
	}
	r.off = r.pos
	return rec, nil
}

func (r *Reader) start() error {
	r.started = true
	head, err := r.r.Peek(headerLen)
	if len(head) == 0 && err != nil {
		return io.EOF
	}
	if len(head) == headerLen && bytes.Equal(head, fileHeader[:]) {
		_, _ = r.r.Discard(headerLen)
		r.pos, r.off = headerLen, headerLen
		return nil
	}
	if bytes.HasPrefix(fileHeader[:], head) {
		return ErrTorn // the header itself was cut short
	}
	switch {
	case len(head) >= 5 && head[4] == '{':
		r.legacy = true
		return nil
	case len(head) < 5:
		// Too short to tell: a legacy length without its body.
		return ErrTorn
	}
	return r.corrupt("not a spool file")
}

func (r *Reader) corrupt(format string, args ...any) error {
	return fmt.Errorf("%w at offset %d: %s", ErrCorrupt, r.off, fmt.Sprintf(format, args...))
}

// decodeBody parses and checks one record body.
func decodeBody(body []byte) (Record, error) {
	var rec Record
	if err := json.Unmarshal(body, &rec); err != nil {
		return Record{}, fmt.Errorf("unreadable JSON: %w", err)
	}
	switch {
	case rec.Queue == "":
		return Record{}, errors.New("no queue")
	case rec.TransactionID == "":
		return Record{}, errors.New("no transactionId")
	}
	if len(rec.Payload) == 0 {
		rec.Payload = json.RawMessage("null")
	}
	if rec.Partition == "" {
		rec.Partition = "Default"
	}
	return rec, nil
}
