package handlers

import "strconv"

// The JSON tokens of the one-pass push decoder (push_decode.go): strings,
// escapes, values it skips, literals and numbers, each accepted exactly as
// encoding/json accepts it, or refused so the generated decoder answers.

// str reads a string token and returns its contents. plain: no escapes and
// only printable ASCII, so the contents are the string's value. A control
// character or a bad escape is not ok.
func (d *pushScanner) str() (raw []byte, plain, ok bool) {
	if !d.eat('"') {
		return nil, false, false
	}
	start := d.i
	plain = true
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			raw = d.b[start:d.i]
			d.i++
			return raw, plain, true
		case c == '\\':
			plain = false
			if !d.escape() {
				return nil, false, false
			}
			continue
		case c < 0x20:
			return nil, false, false
		case c >= 0x80:
			plain = false
		}
		d.i++
	}
	return nil, false, false
}

// escape consumes one escape sequence, d.i at its backslash.
func (d *pushScanner) escape() bool {
	if d.i+1 >= len(d.b) {
		return false
	}
	switch d.b[d.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		d.i += 2
		return true
	case 'u':
		if d.i+6 > len(d.b) {
			return false
		}
		for _, h := range d.b[d.i+2 : d.i+6] {
			if !isHex(h) {
				return false
			}
		}
		d.i += 6
		return true
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// skip consumes one JSON value, checking its syntax as encoding/json's
// scanner does. floats: the value decodes into an interface{} field, where
// encoding/json parses every number as a float64 and refuses one out of
// range; elsewhere (payloads, unknown members) numbers are only checked.
func (d *pushScanner) skip(floats bool) bool {
	var objects uint64 // bit k: the container at depth k+1 is an object
	depth := 0
	for {
		d.ws()
		switch c := d.peek(); c {
		case '{', '[':
			if depth == maxFastDepth {
				return false
			}
			d.i++
			if c == '{' {
				objects |= 1 << depth
			} else {
				objects &^= 1 << depth
			}
			depth++
			d.ws()
			if d.eat(closer(c)) {
				depth-- // empty: a complete value
				break
			}
			if c == '{' && !d.member() {
				return false
			}
			continue // its first value
		case '"':
			if _, _, ok := d.str(); !ok {
				return false
			}
		case 't':
			if !d.lit("true") {
				return false
			}
		case 'f':
			if !d.lit("false") {
				return false
			}
		case 'n':
			if !d.lit("null") {
				return false
			}
		default:
			start := d.i
			if !d.number() {
				return false
			}
			if floats {
				if _, err := strconv.ParseFloat(string(d.b[start:d.i]), 64); err != nil {
					return false
				}
			}
		}
		// A value is complete: close the containers it completes, up to
		// the next value or the end.
		more := false
		for depth > 0 && !more {
			d.ws()
			object := objects&(1<<(depth-1)) != 0
			switch {
			case d.eat(','):
				d.ws()
				if object && !d.member() {
					return false
				}
				more = true
			case object && d.eat('}'), !object && d.eat(']'):
				depth--
			default:
				return false
			}
		}
		if !more {
			return true
		}
	}
}

// member consumes an object member's name and colon.
func (d *pushScanner) member() bool {
	if _, _, ok := d.str(); !ok {
		return false
	}
	d.ws()
	return d.eat(':')
}

func closer(open byte) byte {
	if open == '{' {
		return '}'
	}
	return ']'
}

func (d *pushScanner) lit(s string) bool {
	if len(d.b)-d.i >= len(s) && string(d.b[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return true
	}
	return false
}

// number consumes a JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (d *pushScanner) number() bool {
	d.eat('-')
	switch c := d.peek(); {
	case c == '0':
		d.i++
	case '1' <= c && c <= '9':
		d.digits()
	default:
		return false
	}
	if d.eat('.') && !d.digits() {
		return false
	}
	if c := d.peek(); c == 'e' || c == 'E' {
		d.i++
		if c := d.peek(); c == '+' || c == '-' {
			d.i++
		}
		if !d.digits() {
			return false
		}
	}
	return true
}

// digits consumes [0-9]* and reports whether there was one.
func (d *pushScanner) digits() bool {
	start := d.i
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}
