package mesh

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// FrameType is the one-byte tag after a frame's length.
type FrameType uint8

// Frame types. 1 to 41 keep the reference broker's numbering (its tags 2, 5
// and 20 belong to features this broker does not have); 100 and 101 are the
// challenge-response handshake, which the reference does not have.
const (
	FrameMessageAvailable  FrameType = 1   // {"tenant", "queues"}: wake long-polls
	FrameHeartbeat         FrameType = 3   // {"server_id"}: liveness only
	FrameHello             FrameType = 4   // dialer's answer to the challenge
	FrameQueueConfigSet    FrameType = 10  // {"tenant", "queue"}: drop cached queue settings
	FrameQueueConfigDelete FrameType = 11  // {"tenant", "queue"}: same, the queue is gone
	FrameMaintenance       FrameType = 40  // {"enabled"}: push maintenance
	FramePopMaintenance    FrameType = 41  // {"enabled"}: pop maintenance
	FrameChallenge         FrameType = 100 // listener's first frame: its nonce
	FrameWelcome           FrameType = 101 // listener's last frame: handshake accepted
)

// dataFrameTypes are the types sent after the handshake, the ones the frame
// counters always list.
var dataFrameTypes = []FrameType{
	FrameMessageAvailable, FrameHeartbeat, FrameQueueConfigSet,
	FrameQueueConfigDelete, FrameMaintenance, FramePopMaintenance,
}

func (t FrameType) String() string {
	switch t {
	case FrameMessageAvailable:
		return "MESSAGE_AVAILABLE"
	case FrameHeartbeat:
		return "HEARTBEAT"
	case FrameHello:
		return "HELLO"
	case FrameQueueConfigSet:
		return "QUEUE_CONFIG_SET"
	case FrameQueueConfigDelete:
		return "QUEUE_CONFIG_DELETE"
	case FrameMaintenance:
		return "MAINTENANCE_MODE_SET"
	case FramePopMaintenance:
		return "POP_MAINTENANCE_MODE_SET"
	case FrameChallenge:
		return "CHALLENGE"
	case FrameWelcome:
		return "WELCOME"
	}
	return fmt.Sprintf("UNKNOWN_%d", uint8(t))
}

// Frame size limits. The length field counts the type byte and the body.
const (
	// MaxFrameLen is the largest length a reader accepts (the reference's
	// limit); a larger or zero length closes the connection before any
	// allocation, so a hostile prefix cannot drive an out-of-memory.
	MaxFrameLen = 16 << 20
	// maxHandshakeLen bounds the frames read before a peer is authenticated:
	// a stranger gets no 16 MiB buffers out of us.
	maxHandshakeLen = 4 << 10
	// lenSize is the size of the length prefix.
	lenSize = 4
)

// Errors of the frame reader. Each one ends the connection.
var (
	ErrFrameEmpty    = errors.New("mesh: zero-length frame")
	ErrFrameTooLarge = errors.New("mesh: frame length over the limit")
)

// appendFrame appends one plain frame: u32 big-endian length (1 + payload),
// the type byte, the payload.
func appendFrame(dst []byte, t FrameType, payload []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(1+len(payload)))
	dst = append(dst, byte(t))
	return append(dst, payload...)
}

// frameReader reads length-prefixed frames from one connection. It reuses
// its buffer for small frames; the body it returns is valid until the next
// call.
type frameReader struct {
	r   io.Reader
	hdr [lenSize]byte
	buf []byte
}

// reuseLimit is the largest buffer a frameReader keeps between frames.
const reuseLimit = 64 << 10

// next reads one frame whose length is at most limit and returns its type
// and body (everything after the type byte). A short read is an error
// (io.ErrUnexpectedEOF); a clean end of stream before a frame is io.EOF.
func (fr *frameReader) next(limit int) (FrameType, []byte, error) {
	if _, err := io.ReadFull(fr.r, fr.hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(fr.hdr[:])
	switch {
	case n == 0:
		return 0, nil, ErrFrameEmpty
	case uint64(n) > uint64(limit):
		return 0, nil, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, n, limit)
	}
	var b []byte
	if int(n) <= cap(fr.buf) {
		b = fr.buf[:n]
	} else {
		b = make([]byte, n)
		if n <= reuseLimit {
			fr.buf = b
		}
	}
	if _, err := io.ReadFull(fr.r, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return FrameType(b[0]), b[1:], nil
}
