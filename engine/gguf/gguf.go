// Package gguf reads and writes GGUF files, the container llama.cpp uses for
// models: a header, typed metadata, a tensor table and aligned tensor data.
//
// The reader is hardened like ggml's gguf.cpp: every length and count is
// checked against the bytes that remain, dimensions and size sums against
// overflow, tensor data against the end of the file and against each other.
// A malformed file gives an error that names what is wrong; it never panics.
package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"

	"github.com/geisten/geist/quant"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the tensor data alignment when general.alignment is absent.
const DefaultAlignment = 32

// MaxDims is the most dimensions a tensor may have (GGML_MAX_DIMS).
const MaxDims = 4

// Bounds on what a file may ask the reader to allocate, checked before the
// allocation. Real files are far inside them: a 262K-token vocabulary with
// its scores, types and merges takes about 16 MiB of metadata, the largest
// models a few thousand tensors and some fifty keys.
const (
	// MaxMetadata is the most bytes the metadata (keys and values) may
	// take in the file. Decoded, it takes at most a few times that.
	MaxMetadata = 256 << 20
	// MaxKV is the most metadata entries a file may have.
	MaxKV = 1 << 16
	// MaxTensors is the most tensors a file may have.
	MaxTensors = 1 << 20
	// MaxArray is the most elements a metadata array may have.
	MaxArray = 1 << 24
)

// maxMetadata is MaxMetadata, lowered by tests.
var maxMetadata = MaxMetadata

// ErrNotGGUF is returned for input that does not start with the GGUF magic.
var ErrNotGGUF = errors.New("gguf: not a GGUF file (bad magic)")

// ErrTruncated: the bytes end before what the header says follows.
var ErrTruncated = errors.New("gguf: truncated")

// ValueType is the type tag of a metadata value.
type ValueType uint32

// Metadata value types of the GGUF specification.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// size is the encoded size of a fixed-size value type, 0 for string/array.
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// KV is one metadata entry. Value holds a plain Go value: uint8, int8,
// uint16, int16, uint32, int32, uint64, int64, float32, float64, bool or
// string; arrays are typed slices ([]string, []float32, []int32, ...), and
// arrays of arrays are []any.
type KV struct {
	Key   string
	Value any
}

// Tensor describes one tensor of the file.
type Tensor struct {
	Name   string
	Type   quant.Type
	Dims   []int64 // ggml order: Dims[0] (ne0) is the row length
	Offset int64   // from the start of the data section
	Size   int64   // bytes
	Data   []byte  // the tensor's bytes, inside the mapped file
}

// Elements is the number of elements of the tensor.
func (t *Tensor) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// File is a parsed GGUF file. Tensor data aliases the mapped file: it is
// valid until Close.
type File struct {
	Version    uint32
	KV         []KV
	Tensors    []Tensor
	Alignment  int
	DataOffset int64 // start of the tensor data section in the file

	kvIndex     map[string]int
	tensorIndex map[string]int
	data        []byte
	unmap       func() error
	anon        [][]byte // memory from Anon, unmapped by Close
}

// Open maps the file at path read-only and parses it.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("gguf: %s is a directory", path)
	}
	if st.Size() < 24 {
		if st.Size() >= 4 && !isMagic(fd) {
			return nil, fmt.Errorf("%w: %s", ErrNotGGUF, path)
		}
		return nil, fmt.Errorf("gguf: %s: file too short (%d bytes) for a GGUF header", path, st.Size())
	}
	data, unmap, err := mmapFile(fd, st.Size())
	if err != nil {
		return nil, fmt.Errorf("gguf: mapping %s: %w", path, err)
	}
	f, err := Parse(data)
	if err != nil {
		unmap()
		return nil, err
	}
	f.unmap = unmap
	return f, nil
}

func isMagic(fd *os.File) bool {
	var b [4]byte
	if _, err := fd.ReadAt(b[:], 0); err != nil {
		return false
	}
	return string(b[:]) == Magic
}

// Close releases the mapping and the memory from Anon. Tensor data must
// not be used afterwards.
func (f *File) Close() error {
	f.freeAnon()
	if f.unmap == nil {
		return nil
	}
	err := f.unmap()
	f.unmap = nil
	f.data = nil
	return err
}

// Bytes returns the whole file as mapped (or as passed to Parse).
func (f *File) Bytes() []byte { return f.data }

// Value returns the metadata value stored under key.
func (f *File) Value(key string) (any, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return nil, false
	}
	return f.KV[i].Value, true
}

// Tensor returns the tensor called name.
func (f *File) Tensor(name string) (*Tensor, bool) {
	i, ok := f.tensorIndex[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// String returns the string value of key.
func (f *File) String(key string) (string, bool) {
	v, ok := f.Value(key)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	return s, ok
}

// Arch returns general.architecture, or "" when it is missing.
func (f *File) Arch() string {
	s, _ := f.String("general.architecture")
	return s
}

// Int returns the value of key as an int64 if it is an integer of any width
// (an unsigned value above MaxInt64 is reported as absent).
func (f *File) Int(key string) (int64, bool) {
	v, ok := f.Value(key)
	if !ok {
		return 0, false
	}
	return AsInt(v)
}

// Float returns the value of key as a float64 if it is a float or an integer.
func (f *File) Float(key string) (float64, bool) {
	v, ok := f.Value(key)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	i, ok := AsInt(v)
	return float64(i), ok
}

// AsInt converts an integer metadata value of any width to int64.
func AsInt(v any) (int64, bool) {
	switch x := v.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case uint64:
		if x > math.MaxInt64 {
			return 0, false
		}
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

// reader decodes little-endian values from a byte slice, tracking the
// position for error messages. Every read checks the bytes that remain
// before end, which is the end of b or, while the metadata is read, the
// end of the MaxMetadata bytes after the header.
type reader struct {
	b   []byte
	off int
	end int
}

func (r *reader) remaining() int { return r.end - r.off }

// room describes the bytes that remain, for errors.
func (r *reader) room() string {
	if r.end < len(r.b) {
		return fmt.Sprintf("%d bytes that remain of the %d-byte metadata limit", r.remaining(), maxMetadata)
	}
	return fmt.Sprintf("%d bytes that remain", r.remaining())
}

func (r *reader) need(n int, what string) error {
	if n < 0 || n > r.remaining() {
		if r.end < len(r.b) {
			return fmt.Errorf("gguf: %s needs %d bytes at offset %d, more than the %s", what, n, r.off, r.room())
		}
		return fmt.Errorf("%w: %s needs %d bytes at offset %d, %d remain", ErrTruncated, what, n, r.off, r.remaining())
	}
	return nil
}

func (r *reader) u32(what string) (uint32, error) {
	if err := r.need(4, what); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v, nil
}

func (r *reader) u64(what string) (uint64, error) {
	if err := r.need(8, what); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v, nil
}

// str reads a string; what (followed by idx unless idx < 0) names it in
// errors, built only then: a vocabulary has hundreds of thousands.
func (r *reader) str(what string, idx int) (string, error) {
	name := func() string {
		if idx < 0 {
			return what
		}
		return fmt.Sprintf("%s %d", what, idx)
	}
	if r.remaining() < 8 {
		_, err := r.u64(name() + " length")
		return "", err
	}
	n, _ := r.u64("")
	if n > uint64(r.remaining()) {
		if r.end == len(r.b) {
			return "", fmt.Errorf("%w: %s: string length %d exceeds the %s", ErrTruncated, name(), n, r.room())
		}
		return "", fmt.Errorf("gguf: %s: string length %d exceeds the %s", name(), n, r.room())
	}
	s := string(r.b[r.off : r.off+int(n)])
	r.off += int(n)
	return s, nil
}

// Parse parses a whole GGUF file held in b. The tensors' Data alias b.
func Parse(b []byte) (*File, error) { return parse(b, false) }

// ParseHeader reads the header of a file's first bytes b (a download's
// start): metadata and tensor table, not the tensor data (Tensor.Data is
// nil). When b ends before the tensor table does, it returns what it read
// (the metadata before the cut, no tensors) with an error wrapping
// ErrTruncated.
func ParseHeader(b []byte) (*File, error) { return parse(b, true) }

func parse(b []byte, headerOnly bool) (*File, error) {
	r := &reader{b: b, end: len(b)}
	if len(b) < 4 || string(b[:4]) != Magic {
		return nil, ErrNotGGUF
	}
	r.off = 4
	version, err := r.u32("version")
	if err != nil {
		return nil, err
	}
	switch version {
	case 2, 3:
	case 1:
		return nil, errors.New("gguf: version 1 files are not supported (convert them with a current llama.cpp)")
	default:
		return nil, fmt.Errorf("gguf: unsupported version %d (want 2 or 3)", version)
	}
	nTensors, err := r.u64("tensor count")
	if err != nil {
		return nil, err
	}
	nKV, err := r.u64("metadata count")
	if err != nil {
		return nil, err
	}
	if nKV > MaxKV {
		return nil, fmt.Errorf("gguf: metadata count %d exceeds the limit of %d", nKV, MaxKV)
	}
	if nTensors > MaxTensors {
		return nil, fmt.Errorf("gguf: tensor count %d exceeds the limit of %d", nTensors, MaxTensors)
	}
	// Each KV needs at least 8+4 bytes (key length, type) plus a value byte;
	// each tensor at least 8+4+4+8 bytes.
	if !headerOnly && nKV > uint64(r.remaining())/13 {
		return nil, fmt.Errorf("gguf: metadata count %d cannot fit in %d bytes", nKV, r.remaining())
	}
	if !headerOnly && nTensors > uint64(r.remaining())/24 {
		return nil, fmt.Errorf("gguf: tensor count %d cannot fit in %d bytes", nTensors, r.remaining())
	}
	f := &File{
		Version:     version,
		KV:          make([]KV, 0, min(nKV, uint64(len(b))/13)),
		kvIndex:     make(map[string]int, min(nKV, uint64(len(b))/13)),
		tensorIndex: make(map[string]int, min(nTensors, uint64(len(b))/24)),
		data:        b,
		Alignment:   DefaultAlignment,
	}
	r.end = min(len(b), r.off+maxMetadata)
	for i := uint64(0); i < nKV; i++ {
		key, err := r.str("metadata key", int(i))
		if err != nil {
			if headerOnly && errors.Is(err, ErrTruncated) {
				return f, err
			}
			return nil, err
		}
		if _, dup := f.kvIndex[key]; dup {
			return nil, fmt.Errorf("gguf: duplicate metadata key %q", key)
		}
		t, err := r.u32(fmt.Sprintf("type of %q", key))
		if err != nil {
			if headerOnly && errors.Is(err, ErrTruncated) {
				return f, err
			}
			return nil, err
		}
		v, err := r.value(ValueType(t), key, 0)
		if err != nil {
			if headerOnly && errors.Is(err, ErrTruncated) {
				return f, err
			}
			return nil, err
		}
		f.kvIndex[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Value: v})
	}
	r.end = len(b)
	if v, ok := f.Value("general.alignment"); ok {
		a, isU32 := v.(uint32)
		if !isU32 {
			return nil, fmt.Errorf("gguf: general.alignment has type %T, want uint32", v)
		}
		if a == 0 || a&(a-1) != 0 || a > 1<<20 {
			return nil, fmt.Errorf("gguf: general.alignment %d is not a power of two up to 1 MiB", a)
		}
		f.Alignment = int(a)
	}
	f.Tensors = make([]Tensor, 0, min(nTensors, uint64(len(b))/24))
	for i := uint64(0); i < nTensors; i++ {
		t, err := r.tensorInfo(i)
		if err != nil {
			if headerOnly && errors.Is(err, ErrTruncated) {
				f.Tensors, f.tensorIndex = nil, map[string]int{}
				return f, err
			}
			return nil, err
		}
		if _, dup := f.tensorIndex[t.Name]; dup {
			return nil, fmt.Errorf("gguf: duplicate tensor name %q", t.Name)
		}
		if t.Offset%int64(f.Alignment) != 0 {
			return nil, fmt.Errorf("gguf: tensor %q: offset %d is not a multiple of the alignment %d", t.Name, t.Offset, f.Alignment)
		}
		f.tensorIndex[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	// The data section starts at the next aligned offset. A vocab-only file
	// may end right after the tensor table.
	start := alignUp(int64(r.off), int64(f.Alignment))
	f.DataOffset = start
	if len(f.Tensors) == 0 || headerOnly {
		return f, nil
	}
	if start > int64(len(b)) {
		return nil, fmt.Errorf("gguf: truncated: tensor data section would start at %d, file has %d bytes", start, len(b))
	}
	dataLen := int64(len(b)) - start
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset > dataLen || t.Size > dataLen-t.Offset {
			return nil, fmt.Errorf("gguf: tensor %q: data [%d, %d) runs past the end of the file (data section holds %d bytes; file truncated?)", t.Name, t.Offset, t.Offset+t.Size, dataLen)
		}
		t.Data = b[start+t.Offset : start+t.Offset+t.Size : start+t.Offset+t.Size]
	}
	sort.Slice(order, func(i, j int) bool { return f.Tensors[order[i]].Offset < f.Tensors[order[j]].Offset })
	for k := 1; k < len(order); k++ {
		p, q := &f.Tensors[order[k-1]], &f.Tensors[order[k]]
		if p.Size > 0 && q.Offset < p.Offset+p.Size {
			return nil, fmt.Errorf("gguf: tensors %q and %q overlap (offsets %d+%d and %d)", p.Name, q.Name, p.Offset, p.Size, q.Offset)
		}
	}
	return f, nil
}

func alignUp(x, a int64) int64 { return (x + a - 1) / a * a }

const maxNesting = 8

func (r *reader) value(t ValueType, key string, depth int) (any, error) {
	what := fmt.Sprintf("value of %q", key)
	switch t {
	case TypeString:
		return r.str(what, -1)
	case TypeArray:
		if depth >= maxNesting {
			return nil, fmt.Errorf("gguf: %q: arrays nested deeper than %d", key, maxNesting)
		}
		et, err := r.u32(what + " element type")
		if err != nil {
			return nil, err
		}
		n, err := r.u64(what + " element count")
		if err != nil {
			return nil, err
		}
		return r.array(ValueType(et), n, key, depth)
	}
	sz := t.size()
	if sz == 0 {
		return nil, fmt.Errorf("gguf: %q has unknown value type %d", key, uint32(t))
	}
	if err := r.need(sz, what); err != nil {
		return nil, err
	}
	v := decodeScalar(t, r.b[r.off:])
	if t == TypeBool {
		if b := r.b[r.off]; b > 1 {
			return nil, fmt.Errorf("gguf: %q: bool value %d is neither 0 nor 1", key, b)
		}
	}
	r.off += sz
	return v, nil
}

func decodeScalar(t ValueType, b []byte) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return b[0]
	case TypeInt8:
		return int8(b[0])
	case TypeBool:
		return b[0] != 0
	case TypeUint16:
		return le.Uint16(b)
	case TypeInt16:
		return int16(le.Uint16(b))
	case TypeUint32:
		return le.Uint32(b)
	case TypeInt32:
		return int32(le.Uint32(b))
	case TypeFloat32:
		return math.Float32frombits(le.Uint32(b))
	case TypeUint64:
		return le.Uint64(b)
	case TypeInt64:
		return int64(le.Uint64(b))
	case TypeFloat64:
		return math.Float64frombits(le.Uint64(b))
	}
	return nil
}

func (r *reader) array(et ValueType, n uint64, key string, depth int) (any, error) {
	// Every element takes at least one byte (strings: eight), so a count
	// larger than the remaining bytes is a lie; check before allocating.
	minSize := uint64(et.size())
	if et == TypeString || et == TypeArray {
		minSize = 8
	}
	if minSize == 0 {
		return nil, fmt.Errorf("gguf: %q: array of unknown element type %d", key, uint32(et))
	}
	if n > MaxArray {
		return nil, fmt.Errorf("gguf: %q: array of %d elements exceeds the limit of %d", key, n, MaxArray)
	}
	if n > uint64(r.remaining())/minSize {
		if r.end == len(r.b) {
			return nil, fmt.Errorf("%w: %q: array of %d %s elements exceeds the %s", ErrTruncated, key, n, et, r.room())
		}
		return nil, fmt.Errorf("gguf: %q: array of %d %s elements exceeds the %s", key, n, et, r.room())
	}
	cnt := int(n)
	le := binary.LittleEndian
	if sz := et.size(); sz > 0 {
		raw := r.b[r.off : r.off+cnt*sz]
		r.off += cnt * sz
		switch et {
		case TypeUint8:
			return append([]uint8(nil), raw...), nil
		case TypeInt8:
			out := make([]int8, cnt)
			for i := range out {
				out[i] = int8(raw[i])
			}
			return out, nil
		case TypeBool:
			out := make([]bool, cnt)
			for i := range out {
				if raw[i] > 1 {
					return nil, fmt.Errorf("gguf: %q: bool element %d has value %d", key, i, raw[i])
				}
				out[i] = raw[i] != 0
			}
			return out, nil
		case TypeUint16:
			out := make([]uint16, cnt)
			for i := range out {
				out[i] = le.Uint16(raw[2*i:])
			}
			return out, nil
		case TypeInt16:
			out := make([]int16, cnt)
			for i := range out {
				out[i] = int16(le.Uint16(raw[2*i:]))
			}
			return out, nil
		case TypeUint32:
			out := make([]uint32, cnt)
			for i := range out {
				out[i] = le.Uint32(raw[4*i:])
			}
			return out, nil
		case TypeInt32:
			out := make([]int32, cnt)
			for i := range out {
				out[i] = int32(le.Uint32(raw[4*i:]))
			}
			return out, nil
		case TypeFloat32:
			out := make([]float32, cnt)
			for i := range out {
				out[i] = math.Float32frombits(le.Uint32(raw[4*i:]))
			}
			return out, nil
		case TypeUint64:
			out := make([]uint64, cnt)
			for i := range out {
				out[i] = le.Uint64(raw[8*i:])
			}
			return out, nil
		case TypeInt64:
			out := make([]int64, cnt)
			for i := range out {
				out[i] = int64(le.Uint64(raw[8*i:]))
			}
			return out, nil
		case TypeFloat64:
			out := make([]float64, cnt)
			for i := range out {
				out[i] = math.Float64frombits(le.Uint64(raw[8*i:]))
			}
			return out, nil
		}
	}
	if et == TypeString {
		out := make([]string, cnt)
		what := fmt.Sprintf("%q element", key)
		for i := range out {
			s, err := r.str(what, i)
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	}
	out := make([]any, cnt)
	for i := range out {
		v, err := r.value(TypeArray, key, depth+1)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func (r *reader) tensorInfo(i uint64) (Tensor, error) {
	name, err := r.str("name of tensor", int(i))
	if err != nil {
		return Tensor{}, err
	}
	if len(name) == 0 || len(name) >= 64 {
		return Tensor{}, fmt.Errorf("gguf: tensor %d: name %q must have 1 to 63 bytes", i, truncateName(name))
	}
	nd, err := r.u32(fmt.Sprintf("tensor %q dimension count", name))
	if err != nil {
		return Tensor{}, err
	}
	if nd == 0 || nd > MaxDims {
		return Tensor{}, fmt.Errorf("gguf: tensor %q: %d dimensions (want 1 to %d)", name, nd, MaxDims)
	}
	t := Tensor{Name: name, Dims: make([]int64, nd)}
	elems := uint64(1)
	for d := range t.Dims {
		v, err := r.u64(fmt.Sprintf("tensor %q dimension %d", name, d))
		if err != nil {
			return Tensor{}, err
		}
		if v > math.MaxInt64 {
			return Tensor{}, fmt.Errorf("gguf: tensor %q: dimension %d is %d, out of range", name, d, v)
		}
		if v != 0 && elems > math.MaxInt64/v {
			return Tensor{}, fmt.Errorf("gguf: tensor %q: element count overflows (dimensions %v...)", name, t.Dims[:d+1])
		}
		elems *= v
		t.Dims[d] = int64(v)
	}
	typ, err := r.u32(fmt.Sprintf("tensor %q type", name))
	if err != nil {
		return Tensor{}, err
	}
	t.Type = quant.Type(typ)
	if !t.Type.Known() {
		return Tensor{}, fmt.Errorf("gguf: tensor %q: unknown tensor type %d", name, typ)
	}
	bs := int64(t.Type.BlockSize())
	if t.Dims[0]%bs != 0 {
		return Tensor{}, fmt.Errorf("gguf: tensor %q: row length %d is not a multiple of the %s block size %d", name, t.Dims[0], t.Type, bs)
	}
	blocks := elems / uint64(bs)
	ts := uint64(t.Type.TypeSize())
	if blocks > math.MaxInt64/ts {
		return Tensor{}, fmt.Errorf("gguf: tensor %q: byte size overflows", name)
	}
	t.Size = int64(blocks * ts)
	off, err := r.u64(fmt.Sprintf("tensor %q offset", name))
	if err != nil {
		return Tensor{}, err
	}
	if off > math.MaxInt64 {
		return Tensor{}, fmt.Errorf("gguf: tensor %q: offset %d out of range", name, off)
	}
	t.Offset = int64(off)
	return t, nil
}

func truncateName(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
