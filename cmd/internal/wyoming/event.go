package wyoming

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// ProtocolVersion is the Wyoming version whose events the server speaks
// (handled streaming came in 1.7, supports_home_control in 1.9). Every
// event header carries it, as the reference implementation's do.
const ProtocolVersion = "1.9.0"

// Errors of the event framing. Both end the connection: a stream with a
// broken or oversized event cannot be resynchronized.
var (
	ErrMalformed = errors.New("wyoming: malformed event")
	ErrTooLarge  = errors.New("wyoming: event too large")
)

// Limits bound one event; each is checked before anything of that part
// is read. Zero values take the defaults noted.
type Limits struct {
	MaxLine    int // the JSON header line, newline included (64 KiB)
	MaxData    int // data_length: the extra JSON data (64 KiB)
	MaxPayload int // payload_length: the binary payload (64 KiB)
}

func (l *Limits) defaults() {
	if l.MaxLine <= 0 {
		l.MaxLine = 64 << 10
	}
	if l.MaxData <= 0 {
		l.MaxData = 64 << 10
	}
	if l.MaxPayload <= 0 {
		l.MaxPayload = 64 << 10
	}
}

// Event is one Wyoming event: a type, JSON data (the header's "data"
// object with the extra data block merged over it) and a binary payload.
type Event struct {
	Type    string
	data    [][]byte // JSON objects in merge order: the header's data, then the data block
	Payload []byte
}

// Decode unmarshals the event's data into v (a pointer to a struct or a
// map): the header's data first, then the data block, whose keys win, as
// the reference implementation merges them.
func (e *Event) Decode(v any) error {
	for _, d := range e.data {
		if err := json.Unmarshal(d, v); err != nil {
			return fmt.Errorf("%s data: %w", e.Type, err)
		}
	}
	return nil
}

// header is an event's first line.
type header struct {
	Type          *string         `json:"type"`
	Data          json.RawMessage `json:"data"`
	DataLength    json.Number     `json:"data_length"`
	PayloadLength json.Number     `json:"payload_length"`
}

// Reader reads events from a stream, holding each within its Limits.
type Reader struct {
	r   *bufio.Reader
	lim Limits
}

// NewReader returns a Reader of r. It buffers 4 KiB; a longer header line
// is gathered up to MaxLine.
func NewReader(r io.Reader, lim Limits) *Reader {
	lim.defaults()
	return &Reader{r: bufio.NewReaderSize(r, 4096), lim: lim}
}

// Read returns the next event. io.EOF means the stream ended cleanly
// between events; ErrMalformed and ErrTooLarge (wrapped, saying what)
// mean it cannot go on; other errors are the stream's.
func (r *Reader) Read() (Event, error) {
	line, err := r.line()
	if err != nil {
		return Event{}, err
	}
	var h header
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	if err := dec.Decode(&h); err != nil {
		return Event{}, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	if dec.More() {
		return Event{}, fmt.Errorf("%w: header: more than one JSON value on the line", ErrMalformed)
	}
	if h.Type == nil || *h.Type == "" {
		return Event{}, fmt.Errorf("%w: header has no type", ErrMalformed)
	}
	ev := Event{Type: *h.Type}
	if len(h.Data) > 0 && string(h.Data) != "null" {
		if !isObject(h.Data) {
			return Event{}, fmt.Errorf("%w: %s: data is not a JSON object", ErrMalformed, ev.Type)
		}
		ev.data = append(ev.data, h.Data)
	}
	n, err := length(ev.Type, "data_length", h.DataLength, r.lim.MaxData)
	if err != nil {
		return Event{}, err
	}
	if n > 0 {
		block := make([]byte, n)
		if _, err := io.ReadFull(r.r, block); err != nil {
			return Event{}, fmt.Errorf("%w: %s: data block: %w", ErrMalformed, ev.Type, unexpected(err))
		}
		if !isObject(block) || !json.Valid(block) {
			return Event{}, fmt.Errorf("%w: %s: data block is not a JSON object", ErrMalformed, ev.Type)
		}
		ev.data = append(ev.data, block)
	}
	if n, err = length(ev.Type, "payload_length", h.PayloadLength, r.lim.MaxPayload); err != nil {
		return Event{}, err
	}
	if n > 0 {
		ev.Payload = make([]byte, n)
		if _, err := io.ReadFull(r.r, ev.Payload); err != nil {
			return Event{}, fmt.Errorf("%w: %s: payload: %w", ErrMalformed, ev.Type, unexpected(err))
		}
	}
	return ev, nil
}

// line reads the header line, refusing one longer than MaxLine before
// buffering more of it.
func (r *Reader) line() ([]byte, error) {
	var long []byte
	for {
		frag, err := r.r.ReadSlice('\n')
		if len(long)+len(frag) > r.lim.MaxLine {
			return nil, fmt.Errorf("%w: header line longer than %d bytes", ErrTooLarge, r.lim.MaxLine)
		}
		switch {
		case err == nil:
			if long != nil {
				return append(long, frag...), nil
			}
			return frag, nil
		case errors.Is(err, bufio.ErrBufferFull):
			long = append(long, frag...)
		case errors.Is(err, io.EOF) && len(long)+len(frag) == 0:
			return nil, io.EOF
		case errors.Is(err, io.EOF):
			return nil, fmt.Errorf("%w: stream ended inside a header line", ErrMalformed)
		default:
			return nil, err
		}
	}
}

// length reads the data_length or payload_length of an event of type
// typ: absent or a whole number in [0, max].
func length(typ, what string, n json.Number, max int) (int, error) {
	if n == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%w: %s: %s %s is not a whole number", ErrMalformed, typ, what, n)
	case v < 0:
		return 0, fmt.Errorf("%w: %s: %s %d is negative", ErrMalformed, typ, what, v)
	case v > int64(max):
		return 0, fmt.Errorf("%w: %s: %s %d exceeds the limit of %d bytes", ErrTooLarge, typ, what, v, max)
	}
	return int(v), nil
}

func isObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// AppendEvent appends an event to buf as the reference implementation
// writes it: the header line (type, version, data_length,
// payload_length), the data as a separate JSON block, then the payload.
// data may be nil (no data block).
func AppendEvent(buf []byte, typ string, data any, payload []byte) ([]byte, error) {
	var block []byte
	if data != nil {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(data); err != nil {
			return buf, fmt.Errorf("wyoming: %s data: %w", typ, err)
		}
		block = bytes.TrimRight(b.Bytes(), "\n")
		if string(block) == "{}" || string(block) == "null" {
			block = nil
		}
	}
	h := struct {
		Type          string `json:"type"`
		Version       string `json:"version"`
		DataLength    int    `json:"data_length,omitempty"`
		PayloadLength int    `json:"payload_length,omitempty"`
	}{typ, ProtocolVersion, len(block), len(payload)}
	line, err := json.Marshal(h)
	if err != nil {
		return buf, err
	}
	buf = append(buf, line...)
	buf = append(buf, '\n')
	buf = append(buf, block...)
	return append(buf, payload...), nil
}
