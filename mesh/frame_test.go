package mesh

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFrameLayout(t *testing.T) {
	t.Parallel()
	require.Equal(t, []byte{0, 0, 0, 3, 1, 'h', 'i'}, appendFrame(nil, FrameMessageAvailable, []byte("hi")))
	require.Equal(t, []byte{0, 0, 0, 1, 3}, appendFrame(nil, FrameHeartbeat, nil))
}

func TestFrameReader(t *testing.T) {
	t.Parallel()
	frame := func(n uint32, rest ...byte) []byte { return append(binary.BigEndian.AppendUint32(nil, n), rest...) }

	tests := []struct {
		name    string
		in      []byte
		limit   int
		want    FrameType
		body    string
		wantErr error
	}{
		{name: "payload", in: appendFrame(nil, FrameQueueConfigSet, []byte(`{"queue":"q"}`)), limit: MaxFrameLen, want: FrameQueueConfigSet, body: `{"queue":"q"}`},
		{name: "type only", in: frame(1, 3), limit: MaxFrameLen, want: FrameHeartbeat},
		{name: "zero length", in: frame(0, 1, 2, 3), limit: MaxFrameLen, wantErr: ErrFrameEmpty},
		{name: "4 GiB length", in: frame(0xffffffff, 1), limit: MaxFrameLen, wantErr: ErrFrameTooLarge},
		{name: "one over the limit", in: frame(MaxFrameLen+1, 1), limit: MaxFrameLen, wantErr: ErrFrameTooLarge},
		{name: "over the handshake limit", in: frame(maxHandshakeLen+1, 4), limit: maxHandshakeLen, wantErr: ErrFrameTooLarge},
		{name: "truncated payload", in: frame(10, 1, 'a', 'b'), limit: MaxFrameLen, wantErr: io.ErrUnexpectedEOF},
		{name: "truncated length", in: []byte{0, 0, 3}, limit: MaxFrameLen, wantErr: io.ErrUnexpectedEOF},
		{name: "nothing", in: nil, limit: MaxFrameLen, wantErr: io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fr := &frameReader{r: bytes.NewReader(tt.in)}
			typ, body, err := fr.next(tt.limit)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, typ)
			require.Equal(t, tt.body, string(body))
		})
	}
}

// An unknown type is just a frame: the reader returns it and the next one.
func TestFrameReaderUnknownThenValid(t *testing.T) {
	t.Parallel()
	in := appendFrame(nil, FrameType(99), []byte("future"))
	in = appendFrame(in, FrameMessageAvailable, []byte(`{}`))
	fr := &frameReader{r: bytes.NewReader(in)}
	typ, _, err := fr.next(MaxFrameLen)
	require.NoError(t, err)
	require.Equal(t, FrameType(99), typ)
	require.Equal(t, "UNKNOWN_99", typ.String())
	typ, body, err := fr.next(MaxFrameLen)
	require.NoError(t, err)
	require.Equal(t, FrameMessageAvailable, typ)
	require.Equal(t, "{}", string(body))
}

// FuzzFrameReader: whatever a peer sends, the reader never panics, never
// returns more than the limit, stops at the first error, and every frame it
// returns re-encodes to exactly the bytes it consumed. Seeds in
// testdata/fuzz/FuzzFrameReader run in every go test.
func FuzzFrameReader(f *testing.F) {
	f.Add(appendFrame(appendFrame(nil, FrameMessageAvailable, []byte(`{"tenant":"t","queues":["a"]}`)), FrameHeartbeat, nil), uint16(64))
	f.Add([]byte{0, 0, 0, 0}, uint16(64))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1}, uint16(64))
	f.Add([]byte{0, 0, 0, 9, 1, 'x'}, uint16(64))
	f.Add([]byte{0, 0, 0, 5, 4, '{', '}', 0, 0}, uint16(2))
	f.Fuzz(func(t *testing.T, data []byte, limit uint16) {
		lim := int(limit) + 1
		fr := &frameReader{r: bytes.NewReader(data)}
		var again []byte
		for {
			typ, body, err := fr.next(lim)
			if err != nil {
				require.True(t, err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) ||
					errors.Is(err, ErrFrameEmpty) || errors.Is(err, ErrFrameTooLarge), "%v", err)
				break
			}
			require.LessOrEqual(t, 1+len(body), lim)
			again = appendFrame(again, typ, body)
			require.True(t, bytes.HasPrefix(data, again), "frames re-encode to the input")
		}
	})
}

func TestSealedFrames(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte{7}, 32)
	s, o := newSealer(key), newOpener(key)

	f1 := s.appendFrame(nil, FrameMessageAvailable, []byte(`{"queues":["a"]}`))
	f2 := s.appendFrame(nil, FrameHeartbeat, []byte(`{}`))
	body := func(f []byte) (FrameType, []byte) {
		fr := &frameReader{r: bytes.NewReader(f)}
		typ, b, err := fr.next(MaxFrameLen)
		require.NoError(t, err)
		return typ, bytes.Clone(b)
	}

	typ, b := body(f1)
	p, err := o.open(typ, b)
	require.NoError(t, err)
	require.Equal(t, `{"queues":["a"]}`, string(p))

	// The same frame again: its MAC is fine, its sequence number is not.
	_, err = o.open(typ, b)
	require.ErrorIs(t, err, errFrameSequence)

	typ2, b2 := body(f2)
	p, err = o.open(typ2, b2)
	require.NoError(t, err)
	require.Equal(t, `{}`, string(p))

	// Altered type, payload, sequence or MAC, or too short: the MAC fails.
	f3 := s.appendFrame(nil, FrameMaintenance, []byte(`{"enabled":true}`))
	typ3, b3 := body(f3)
	for name, alter := range map[string]func() (FrameType, []byte){
		"type":     func() (FrameType, []byte) { return FramePopMaintenance, b3 },
		"payload":  func() (FrameType, []byte) { c := bytes.Clone(b3); c[len(c)-2] = 'X'; return typ3, c },
		"sequence": func() (FrameType, []byte) { c := bytes.Clone(b3); c[seqSize-1]++; return typ3, c },
		"mac":      func() (FrameType, []byte) { c := bytes.Clone(b3); c[seqSize] ^= 1; return typ3, c },
		"short":    func() (FrameType, []byte) { return typ3, b3[:sealedOverhead-1] },
		"other key": func() (FrameType, []byte) {
			return body(newSealer(bytes.Repeat([]byte{8}, 32)).appendFrame(nil, typ3, []byte(`{"enabled":true}`)))
		},
	} {
		typ, b := alter()
		_, err := newOpener(key).open(typ, b)
		require.ErrorIs(t, err, errFrameMAC, name)
		_, err = o.open(typ, b)
		require.ErrorIs(t, err, errFrameMAC, name)
	}
	p, err = o.open(typ3, b3)
	require.NoError(t, err, "refusals leave the sequence untouched")
	require.Equal(t, `{"enabled":true}`, string(p))
}
