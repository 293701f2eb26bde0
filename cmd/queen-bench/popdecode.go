package main

import (
	"bytes"
	"encoding/json"
	"errors"
)

// decodePop reads the members of a pop answer that the bench uses (leaseId,
// and per message transactionId, partitionId, leaseId and data) in one pass
// over the answer, skipping the rest without decoding it. encoding/json
// validates the whole answer first, then decodes it while skipping the
// unknown members, and so cost the bench more CPU per delivered message
// than the broker spent writing the answer; on a shared machine that CPU
// comes out of the broker's (docs/benchmarks.md). A string with an escape
// in it is decoded by encoding/json; anything this scanner does not expect
// falls back to json.Unmarshal, which then reports the error.
//
// p's Messages are reused (emptied first); with p.DataOnly set, the
// messages' ids and leases are skipped, not decoded: a consumer that sends
// no ack (autoAck) needs only the count and the payloads.
func decodePop(b []byte, p *popResponse) error {
	p.LeaseID, p.Messages = "", p.Messages[:0]
	d := popScanner{b: b}
	if err := d.answer(p); err != nil {
		*p = popResponse{DataOnly: p.DataOnly}
		return json.Unmarshal(b, p)
	}
	return nil
}

var errUnexpected = errors.New("unexpected JSON")

type popScanner struct {
	b []byte
	i int
}

func (d *popScanner) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// expect consumes c after whitespace.
func (d *popScanner) expect(c byte) error {
	d.ws()
	if d.i >= len(d.b) || d.b[d.i] != c {
		return errUnexpected
	}
	d.i++
	return nil
}

// peek returns the next byte after whitespace, or 0.
func (d *popScanner) peek() byte {
	d.ws()
	if d.i >= len(d.b) {
		return 0
	}
	return d.b[d.i]
}

// object calls member for each key of an object; member must consume the
// value.
func (d *popScanner) object(member func(key []byte) error) error {
	if err := d.expect('{'); err != nil {
		return err
	}
	if d.peek() == '}' {
		d.i++
		return nil
	}
	for {
		key, err := d.rawString()
		if err != nil {
			return err
		}
		if err := d.expect(':'); err != nil {
			return err
		}
		if err := member(key); err != nil {
			return err
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			return nil
		default:
			return errUnexpected
		}
	}
}

// rawString returns the bytes between the quotes of the next string. It
// jumps from quote to quote (bytes.IndexByte); a quote is the string's end
// unless an odd run of backslashes comes before it.
func (d *popScanner) rawString() ([]byte, error) {
	if err := d.expect('"'); err != nil {
		return nil, err
	}
	start := d.i
	for {
		j := bytes.IndexByte(d.b[d.i:], '"')
		if j < 0 {
			d.i = len(d.b)
			return nil, errUnexpected
		}
		end := d.i + j
		d.i = end + 1
		k := end
		for k > start && d.b[k-1] == '\\' {
			k--
		}
		if (end-k)%2 == 0 {
			return d.b[start:end], nil
		}
	}
}

// str decodes the next string (null gives "").
func (d *popScanner) str() (string, error) {
	if d.peek() == 'n' {
		return "", d.skip()
	}
	start := d.i
	raw, err := d.rawString()
	if err != nil {
		return "", err
	}
	for _, c := range raw {
		if c == '\\' {
			var s string
			err := json.Unmarshal(d.b[start:d.i], &s)
			return s, err
		}
	}
	return string(raw), nil
}

// skip consumes the next value and returns nothing of it.
func (d *popScanner) skip() error {
	switch d.peek() {
	case '"':
		_, err := d.rawString()
		return err
	case '{', '[':
		depth := 0
		for d.i < len(d.b) {
			switch d.b[d.i] {
			case '"':
				if _, err := d.rawString(); err != nil {
					return err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					d.i++
					return nil
				}
			}
			d.i++
		}
		return errUnexpected
	case 0:
		return errUnexpected
	default: // number, true, false, null
		start := d.i
		for d.i < len(d.b) {
			switch d.b[d.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				if d.i == start {
					return errUnexpected
				}
				return nil
			}
			d.i++
		}
		return nil
	}
}

func (d *popScanner) answer(p *popResponse) error {
	err := d.object(func(key []byte) error {
		var err error
		switch string(key) {
		case "leaseId":
			p.LeaseID, err = d.str()
		case "messages":
			err = d.messages(p)
		default:
			err = d.skip()
		}
		return err
	})
	if err != nil {
		return err
	}
	if d.peek() != 0 {
		return errUnexpected
	}
	return nil
}

func (d *popScanner) messages(p *popResponse) error {
	if d.peek() == 'n' {
		return d.skip()
	}
	if err := d.expect('['); err != nil {
		return err
	}
	if d.peek() == ']' {
		d.i++
		return nil
	}
	for {
		var m poppedMessage
		err := d.object(func(key []byte) error {
			var err error
			switch string(key) {
			case "transactionId":
				if p.DataOnly {
					return d.skip()
				}
				m.TransactionID, err = d.str()
			case "partitionId":
				if p.DataOnly {
					return d.skip()
				}
				m.PartitionID, err = d.str()
			case "leaseId":
				if p.DataOnly {
					return d.skip()
				}
				m.LeaseID, err = d.str()
			case "data":
				d.ws()
				start := d.i
				if err = d.skip(); err == nil {
					m.Data = json.RawMessage(d.b[start:d.i])
				}
			default:
				err = d.skip()
			}
			return err
		})
		if err != nil {
			return err
		}
		p.Messages = append(p.Messages, m)
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return nil
		default:
			return errUnexpected
		}
	}
}
