package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/quant"
)

func TestOpenZoo(t *testing.T) {
	var files []string
	for _, dir := range []string{"models", "vocab"} {
		m, _ := filepath.Glob(zoo.Path(t, dir, "*.gguf"))
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatal("no GGUF files in the zoo")
	}
	for _, p := range files {
		f, err := Open(p)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(p), err)
			continue
		}
		if f.Arch() == "" {
			t.Errorf("%s: no general.architecture", filepath.Base(p))
		}
		if _, ok := f.Value("tokenizer.ggml.tokens"); !ok {
			t.Errorf("%s: no tokenizer.ggml.tokens", filepath.Base(p))
		}
		for _, tn := range f.Tensors {
			if int64(len(tn.Data)) != tn.Size {
				t.Errorf("%s: tensor %s: %d bytes, want %d", filepath.Base(p), tn.Name, len(tn.Data), tn.Size)
			}
		}
		f.Close()
	}
	t.Logf("parsed %d zoo files", len(files))
}

// TestRoundTripZoo re-encodes zoo files with the writer: the result parses
// to the same metadata and tensors (-short: the small files only).
func TestRoundTripZoo(t *testing.T) {
	var files []string
	for _, dir := range []string{"models", "vocab"} {
		m, _ := filepath.Glob(zoo.Path(t, dir, "*.gguf"))
		files = append(files, m...)
	}
	for _, p := range files {
		if st, err := os.Stat(p); err != nil || (testing.Short() && st.Size() > 2<<20) {
			continue
		}
		f, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		b := NewBuilder()
		b.Alignment = f.Alignment
		b.CopyKV(f)
		for _, tn := range f.Tensors {
			if err := b.AddTensor(tn.Name, tn.Type, tn.Dims, tn.Data); err != nil {
				t.Fatal(err)
			}
		}
		var buf bytes.Buffer
		if _, err := b.WriteTo(&buf); err != nil {
			t.Fatalf("%s: write: %v", filepath.Base(p), err)
		}
		g, err := Parse(buf.Bytes())
		if err != nil {
			t.Fatalf("%s: reparse: %v", filepath.Base(p), err)
		}
		if !reflect.DeepEqual(f.KV, g.KV) {
			t.Errorf("%s: metadata differs after a round trip", filepath.Base(p))
		}
		for i := range f.Tensors {
			a, c := f.Tensors[i], g.Tensors[i]
			if a.Name != c.Name || a.Type != c.Type || !reflect.DeepEqual(a.Dims, c.Dims) || !bytes.Equal(a.Data, c.Data) {
				t.Errorf("%s: tensor %s differs after a round trip", filepath.Base(p), a.Name)
			}
		}
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	}
	t.Logf("round-tripped %d zoo files", len(files))
}

// sample builds a small valid file with every metadata type.
func sample(t testing.TB) []byte {
	b := NewBuilder()
	b.Set("general.architecture", "llama")
	b.Set("u8", uint8(7))
	b.Set("i8", int8(-7))
	b.Set("u16", uint16(700))
	b.Set("i16", int16(-700))
	b.Set("u32", uint32(70000))
	b.Set("i32", int32(-70000))
	b.Set("u64", uint64(1<<40))
	b.Set("i64", int64(-1<<40))
	b.Set("f32", float32(1.5))
	b.Set("f64", 2.25)
	b.Set("bool", true)
	b.Set("strs", []string{"a", "bc", ""})
	b.Set("f32s", []float32{1, 2, 3})
	b.Set("i32s", []int32{-1, 2})
	b.Set("nested", []any{[]int32{1}, []string{"x"}})
	w := make([]byte, 4*8*2)
	for i := range w {
		w[i] = byte(i)
	}
	if err := b.AddTensor("a.weight", quant.F32, []int64{8, 2}, w[:64]); err != nil {
		t.Fatal(err)
	}
	if err := b.AddTensor("b.weight", quant.Q8_0, []int64{32, 1}, make([]byte, 34)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestAllTypesRoundTrip(t *testing.T) {
	f, err := Parse(sample(t))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"u8": uint8(7), "i8": int8(-7), "u16": uint16(700), "i16": int16(-700), "u32": uint32(70000),
		"i32": int32(-70000), "u64": uint64(1 << 40), "i64": int64(-1 << 40), "f32": float32(1.5), "f64": 2.25,
		"bool": true, "strs": []string{"a", "bc", ""}, "f32s": []float32{1, 2, 3}, "i32s": []int32{-1, 2},
		"nested": []any{[]int32{1}, []string{"x"}},
	}
	for k, v := range want {
		got, ok := f.Value(k)
		if !ok || !reflect.DeepEqual(got, v) {
			t.Errorf("%s = %#v, want %#v", k, got, v)
		}
	}
	if n, ok := f.Int("u32"); !ok || n != 70000 {
		t.Errorf("Int(u32) = %d %v", n, ok)
	}
	tn, ok := f.Tensor("b.weight")
	if !ok || tn.Type != quant.Q8_0 || tn.Size != 34 || tn.Offset%32 != 0 {
		t.Errorf("b.weight = %+v", tn)
	}
}

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func header(nt, nkv uint64) []byte {
	b := []byte(Magic)
	b = append(b, le32(3)...)
	b = append(b, le64(nt)...)
	return append(b, le64(nkv)...)
}

func gstr(s string) []byte { return append(le64(uint64(len(s))), s...) }

func tensorEntry(name string, dims []uint64, typ uint32, off uint64) []byte {
	b := gstr(name)
	b = append(b, le32(uint32(len(dims)))...)
	for _, d := range dims {
		b = append(b, le64(d)...)
	}
	b = append(b, le32(typ)...)
	return append(b, le64(off)...)
}

func pad32(b []byte) []byte {
	for len(b)%32 != 0 {
		b = append(b, 0)
	}
	return b
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestHostile(t *testing.T) {
	good := sample(t)
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "bad magic"},
		{"not gguf", []byte("PK\x03\x04 this is a zip file..."), "bad magic"},
		{"version 1", cat([]byte(Magic), le32(1), le32(0), le32(0)), "version 1"},
		{"version 99", cat([]byte(Magic), le32(99), le64(0), le64(0)), "unsupported version 99"},
		{"truncated header", []byte(Magic + "\x03\x00\x00\x00\x00"), "truncated"},
		{"huge kv count", header(0, 1<<62), "metadata count"},
		{"huge tensor count", header(1<<62, 0), "tensor count"},
		{"huge string length", cat(header(0, 1), le64(1<<62), []byte("key"), make([]byte, 32)), "string length"},
		{"huge array count", cat(header(0, 1), gstr("k"), le32(uint32(TypeArray)), le32(uint32(TypeUint32)), le64(1<<61)), "exceeds"},
		{"huge string array", cat(header(0, 1), gstr("k"), le32(uint32(TypeArray)), le32(uint32(TypeString)), le64(1<<40)), "exceeds"},
		{"unknown value type", cat(header(0, 1), gstr("k"), le32(77), le64(0)), "unknown value type"},
		{"bad bool", cat(header(0, 1), gstr("k"), le32(uint32(TypeBool)), []byte{5}, make([]byte, 20)), "bool"},
		{"duplicate key", cat(header(0, 2), gstr("k"), le32(uint32(TypeUint8)), []byte{1}, gstr("k"), le32(uint32(TypeUint8)), []byte{1}, make([]byte, 24)), "duplicate metadata key"},
		{"bad alignment", cat(header(0, 1), gstr("general.alignment"), le32(uint32(TypeUint32)), le32(3), make([]byte, 24)), "power of two"},
		{"deep nesting", cat(header(0, 1), gstr("k"), le32(uint32(TypeArray)), bytes.Repeat(cat(le32(uint32(TypeArray)), le64(1)), 20), make([]byte, 64)), "nested"},
		{"absurd dims", cat(header(1, 0), tensorEntry("t", []uint64{1 << 40, 1 << 40}, 0, 0), make([]byte, 64)), "overflows"},
		{"too many dims", cat(header(1, 0), tensorEntry("t", []uint64{1, 1, 1, 1, 1}, 0, 0), make([]byte, 64)), "dimensions"},
		{"zero dims", cat(header(1, 0), tensorEntry("t", nil, 0, 0), make([]byte, 64)), "dimensions"},
		{"unknown tensor type", cat(header(1, 0), tensorEntry("t", []uint64{32}, 200, 0), make([]byte, 64)), "unknown tensor type"},
		{"row not whole blocks", cat(header(1, 0), tensorEntry("t", []uint64{33}, uint32(quant.Q4_0), 0), make([]byte, 64)), "block size"},
		{"misaligned offset", cat(header(1, 0), tensorEntry("t", []uint64{4}, 0, 3), make([]byte, 64)), "alignment"},
		{"data past end", pad32(cat(header(1, 0), tensorEntry("t", []uint64{1024}, 0, 0))), "past the end"},
		{"offset past end", cat(pad32(cat(header(1, 0), tensorEntry("t", []uint64{4}, 0, 1<<40))), make([]byte, 16)), "past the end"},
		{"overlap", cat(pad32(cat(header(2, 0), tensorEntry("a", []uint64{16}, 0, 0), tensorEntry("b", []uint64{16}, 0, 32))), make([]byte, 128)), "overlap"},
		{"duplicate tensor", cat(pad32(cat(header(2, 0), tensorEntry("a", []uint64{8}, 0, 0), tensorEntry("a", []uint64{8}, 0, 32))), make([]byte, 128)), "duplicate tensor"},
		{"empty tensor name", cat(header(1, 0), tensorEntry("", []uint64{8}, 0, 0), make([]byte, 64)), "name"},
		{"truncated sample", good[:len(good)-40], "past the end"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.data)
			if err == nil {
				t.Fatalf("no error")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
		})
	}
	// Every prefix of a valid file fails cleanly (or parses, for prefixes that
	// end exactly where nothing more is required).
	g, _ := Parse(good)
	end := g.DataOffset
	for _, tn := range g.Tensors {
		end = max(end, g.DataOffset+tn.Offset+tn.Size)
	}
	for n := 0; n < int(end); n++ {
		if _, err := Parse(good[:n]); err == nil {
			t.Fatalf("prefix of %d/%d bytes parsed without error", n, len(good))
		}
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing.gguf")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	p := filepath.Join(dir, "text.gguf")
	os.WriteFile(p, []byte("hello, this is not a model file at all"), 0o644)
	if _, err := Open(p); !errors.Is(err, ErrNotGGUF) {
		t.Errorf("text file: %v", err)
	}
	os.WriteFile(p, []byte("hi"), 0o644)
	if _, err := Open(p); err == nil {
		t.Errorf("2-byte file: no error")
	}
	if _, err := Open(dir); err == nil {
		t.Errorf("directory: no error")
	}
	os.WriteFile(p, sample(t), 0o644)
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func FuzzParse(f *testing.F) {
	f.Add(sample(f))
	seeds, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "gguf", "*.gguf"))
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := Parse(b)
		if err != nil {
			return
		}
		for _, tn := range g.Tensors {
			if int64(len(tn.Data)) != tn.Size {
				t.Fatalf("tensor %s: %d bytes, want %d", tn.Name, len(tn.Data), tn.Size)
			}
		}
	})
}
