package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/geisten/geist/quant"
)

// Builder assembles a GGUF v3 file: metadata in insertion order, then
// tensors laid out in the order they were added, each aligned.
type Builder struct {
	Alignment int
	kv        []KV
	kvIndex   map[string]int
	tensors   []builderTensor
}

type builderTensor struct {
	name string
	typ  quant.Type
	dims []int64
	data []byte
}

// NewBuilder returns an empty builder with the default alignment.
func NewBuilder() *Builder {
	return &Builder{Alignment: DefaultAlignment, kvIndex: map[string]int{}}
}

// Set adds or replaces a metadata entry. The Go type of v picks the GGUF
// type: the scalar types of KV.Value, string, and slices of them; []any
// holds nested arrays.
func (b *Builder) Set(key string, v any) {
	if i, ok := b.kvIndex[key]; ok {
		b.kv[i].Value = v
		return
	}
	b.kvIndex[key] = len(b.kv)
	b.kv = append(b.kv, KV{Key: key, Value: v})
}

// CopyKV copies every metadata entry of f (general.alignment included).
func (b *Builder) CopyKV(f *File) {
	for _, kv := range f.KV {
		b.Set(kv.Key, kv.Value)
	}
}

// AddTensor appends a tensor; dims are in ggml order (row length first).
// data must hold exactly the tensor's bytes.
func (b *Builder) AddTensor(name string, t quant.Type, dims []int64, data []byte) error {
	if len(dims) == 0 || len(dims) > MaxDims {
		return fmt.Errorf("gguf: tensor %q: %d dimensions", name, len(dims))
	}
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	if dims[0]%int64(max(t.BlockSize(), 1)) != 0 || !t.Known() {
		return fmt.Errorf("gguf: tensor %q: row length %d does not fit type %s", name, dims[0], t)
	}
	want := n / int64(t.BlockSize()) * int64(t.TypeSize())
	if int64(len(data)) != want {
		return fmt.Errorf("gguf: tensor %q: %d bytes of data, %s %v needs %d", name, len(data), t, dims, want)
	}
	b.tensors = append(b.tensors, builderTensor{name, t, append([]int64(nil), dims...), data})
	return nil
}

// WriteFile writes the file to path (through a temporary file and rename).
func (b *Builder) WriteFile(path string) error {
	tmp := path + ".tmp"
	fd, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if _, err := b.WriteTo(fd); err != nil {
		fd.Close()
		os.Remove(tmp)
		return err
	}
	if err := fd.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("gguf: %w", err)
	}
	return os.Rename(tmp, path)
}

type countingWriter struct {
	w   *bufio.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

func (c *countingWriter) u32(v uint32) { binary.Write(c, binary.LittleEndian, v) }
func (c *countingWriter) u64(v uint64) { binary.Write(c, binary.LittleEndian, v) }
func (c *countingWriter) str(s string) { c.u64(uint64(len(s))); io.WriteString(c, s) }

// WriteTo writes the GGUF file to w.
func (b *Builder) WriteTo(w io.Writer) (int64, error) {
	align := b.Alignment
	if align <= 0 {
		align = DefaultAlignment
	}
	if align != DefaultAlignment {
		b.Set("general.alignment", uint32(align))
	}
	c := &countingWriter{w: bufio.NewWriterSize(w, 1<<20)}
	io.WriteString(c, Magic)
	c.u32(3)
	c.u64(uint64(len(b.tensors)))
	c.u64(uint64(len(b.kv)))
	for _, kv := range b.kv {
		c.str(kv.Key)
		t, err := typeOf(kv.Value)
		if err != nil {
			return c.n, fmt.Errorf("gguf: key %q: %w", kv.Key, err)
		}
		c.u32(uint32(t))
		if err := writeValue(c, kv.Value); err != nil {
			return c.n, fmt.Errorf("gguf: key %q: %w", kv.Key, err)
		}
	}
	var off int64
	offsets := make([]int64, len(b.tensors))
	for i, t := range b.tensors {
		offsets[i] = off
		c.str(t.name)
		c.u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			c.u64(uint64(d))
		}
		c.u32(uint32(t.typ))
		c.u64(uint64(off))
		off = alignUp(off+int64(len(t.data)), int64(align))
	}
	pad := func() {
		if r := c.n % int64(align); r != 0 {
			c.Write(make([]byte, int64(align)-r))
		}
	}
	if len(b.tensors) > 0 {
		pad()
	}
	for _, t := range b.tensors {
		c.Write(t.data)
		pad()
	}
	if c.err != nil {
		return c.n, fmt.Errorf("gguf: write: %w", c.err)
	}
	if err := c.w.Flush(); err != nil {
		return c.n, fmt.Errorf("gguf: write: %w", err)
	}
	return c.n, nil
}

func typeOf(v any) (ValueType, error) {
	switch v.(type) {
	case uint8:
		return TypeUint8, nil
	case int8:
		return TypeInt8, nil
	case uint16:
		return TypeUint16, nil
	case int16:
		return TypeInt16, nil
	case uint32:
		return TypeUint32, nil
	case int32:
		return TypeInt32, nil
	case uint64:
		return TypeUint64, nil
	case int64:
		return TypeInt64, nil
	case float32:
		return TypeFloat32, nil
	case float64:
		return TypeFloat64, nil
	case bool:
		return TypeBool, nil
	case string:
		return TypeString, nil
	case []uint8, []int8, []uint16, []int16, []uint32, []int32, []uint64, []int64, []float32, []float64, []bool, []string, []any:
		return TypeArray, nil
	}
	return 0, fmt.Errorf("unsupported metadata type %T", v)
}

func writeArray[T any](c *countingWriter, et ValueType, xs []T) error {
	c.u32(uint32(et))
	c.u64(uint64(len(xs)))
	for _, x := range xs {
		if err := writeValue(c, x); err != nil {
			return err
		}
	}
	return nil
}

func writeValue(c *countingWriter, v any) error {
	le := binary.LittleEndian
	switch x := v.(type) {
	case uint8:
		c.Write([]byte{x})
	case int8:
		c.Write([]byte{byte(x)})
	case bool:
		if x {
			c.Write([]byte{1})
		} else {
			c.Write([]byte{0})
		}
	case uint16, int16, uint32, int32, uint64, int64:
		binary.Write(c, le, x)
	case float32:
		c.u32(math.Float32bits(x))
	case float64:
		c.u64(math.Float64bits(x))
	case string:
		c.str(x)
	case []uint8:
		c.u32(uint32(TypeUint8))
		c.u64(uint64(len(x)))
		c.Write(x)
	case []int8:
		return writeArray(c, TypeInt8, x)
	case []uint16:
		return writeArray(c, TypeUint16, x)
	case []int16:
		return writeArray(c, TypeInt16, x)
	case []uint32:
		return writeArray(c, TypeUint32, x)
	case []int32:
		return writeArray(c, TypeInt32, x)
	case []uint64:
		return writeArray(c, TypeUint64, x)
	case []int64:
		return writeArray(c, TypeInt64, x)
	case []float32:
		return writeArray(c, TypeFloat32, x)
	case []float64:
		return writeArray(c, TypeFloat64, x)
	case []bool:
		return writeArray(c, TypeBool, x)
	case []string:
		return writeArray(c, TypeString, x)
	case []any:
		// Nested arrays: every element must itself be an array of one type.
		c.u32(uint32(TypeArray))
		c.u64(uint64(len(x)))
		for i, e := range x {
			t, err := typeOf(e)
			if err != nil || t != TypeArray {
				return fmt.Errorf("nested array element %d is %T, want an array", i, e)
			}
			if err := writeValue(c, e); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("unsupported metadata type %T", v)
	}
	return nil
}
