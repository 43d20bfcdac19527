package gguf

import (
	"bufio"
	"fmt"
	"io"

	"github.com/geisten/geist/quant"
)

// TensorInfo names a tensor whose data a StreamWriter receives later.
type TensorInfo struct {
	Name string
	Type quant.Type
	Dims []int64 // ggml order: Dims[0] (ne0) is the row length
}

// Size returns the bytes of the tensor's data, or an error when the type is
// unknown, the dimensions are bad or the row length does not fit the type.
func (t TensorInfo) Size() (int64, error) {
	if len(t.Dims) == 0 || len(t.Dims) > MaxDims {
		return 0, fmt.Errorf("gguf: tensor %q: %d dimensions", t.Name, len(t.Dims))
	}
	if !t.Type.Known() {
		return 0, fmt.Errorf("gguf: tensor %q: unknown type %s", t.Name, t.Type)
	}
	n := int64(1)
	for _, d := range t.Dims {
		if d <= 0 || n > (1<<62)/d {
			return 0, fmt.Errorf("gguf: tensor %q: bad dimensions %v", t.Name, t.Dims)
		}
		n *= d
	}
	if t.Dims[0]%int64(t.Type.BlockSize()) != 0 {
		return 0, fmt.Errorf("gguf: tensor %q: row length %d does not fit type %s", t.Name, t.Dims[0], t.Type)
	}
	return n / int64(t.Type.BlockSize()) * int64(t.Type.TypeSize()), nil
}

// StreamWriter writes a GGUF file whose tensor data arrives one tensor at a
// time, so a file larger than memory can be produced: the header, metadata
// and tensor table go out first (their sizes are known from the types and
// shapes), then each tensor's bytes in table order through Write.
type StreamWriter struct {
	c     *countingWriter
	align int64
	sizes []int64
	names []string
	next  int
}

// Stream writes the builder's metadata and the table of tensors to w and
// returns a writer for their data. Tensors added to the builder with
// AddTensor are not written: the table is tensors.
func (b *Builder) Stream(w io.Writer, tensors []TensorInfo) (*StreamWriter, error) {
	align := b.Alignment
	if align <= 0 {
		align = DefaultAlignment
	}
	if align != DefaultAlignment {
		b.Set("general.alignment", uint32(align))
	}
	s := &StreamWriter{
		c:     &countingWriter{w: bufio.NewWriterSize(w, 1<<20)},
		align: int64(align),
		sizes: make([]int64, len(tensors)),
		names: make([]string, len(tensors)),
	}
	seen := make(map[string]bool, len(tensors))
	for i, t := range tensors {
		size, err := t.Size()
		if err != nil {
			return nil, err
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("gguf: duplicate tensor name %q", t.Name)
		}
		seen[t.Name] = true
		s.sizes[i], s.names[i] = size, t.Name
	}
	c := s.c
	io.WriteString(c, Magic)
	c.u32(3)
	c.u64(uint64(len(tensors)))
	c.u64(uint64(len(b.kv)))
	for _, kv := range b.kv {
		c.str(kv.Key)
		t, err := typeOf(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("gguf: key %q: %w", kv.Key, err)
		}
		c.u32(uint32(t))
		if err := writeValue(c, kv.Value); err != nil {
			return nil, fmt.Errorf("gguf: key %q: %w", kv.Key, err)
		}
	}
	var off int64
	for i, t := range tensors {
		c.str(t.Name)
		c.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			c.u64(uint64(d))
		}
		c.u32(uint32(t.Type))
		c.u64(uint64(off))
		off = alignUp(off+s.sizes[i], s.align)
	}
	if len(tensors) > 0 {
		s.pad()
	}
	if c.err != nil {
		return nil, fmt.Errorf("gguf: write: %w", c.err)
	}
	return s, nil
}

func (s *StreamWriter) pad() {
	if r := s.c.n % s.align; r != 0 {
		s.c.Write(make([]byte, s.align-r))
	}
}

// Write writes the data of the next tensor of the table; it must hold
// exactly that tensor's bytes.
func (s *StreamWriter) Write(data []byte) error {
	if s.next >= len(s.sizes) {
		return fmt.Errorf("gguf: all %d tensors already written", len(s.sizes))
	}
	if int64(len(data)) != s.sizes[s.next] {
		return fmt.Errorf("gguf: tensor %q: %d bytes of data, want %d", s.names[s.next], len(data), s.sizes[s.next])
	}
	s.c.Write(data)
	s.pad()
	s.next++
	if s.c.err != nil {
		return fmt.Errorf("gguf: write: %w", s.c.err)
	}
	return nil
}

// Close flushes the buffered output. It fails when tensors of the table
// were not written. It does not close the underlying writer.
func (s *StreamWriter) Close() error {
	if s.next != len(s.sizes) {
		return fmt.Errorf("gguf: %d of %d tensors written", s.next, len(s.sizes))
	}
	if s.c.err != nil {
		return fmt.Errorf("gguf: write: %w", s.c.err)
	}
	if err := s.c.w.Flush(); err != nil {
		return fmt.Errorf("gguf: write: %w", err)
	}
	return nil
}
