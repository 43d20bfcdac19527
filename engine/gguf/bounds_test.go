package gguf

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// ggufHeader is a GGUF v3 header claiming nTensors tensors and nKV entries,
// followed by rest.
func ggufHeader(nTensors, nKV uint64, rest ...[]byte) []byte {
	b := []byte(Magic)
	b = binary.LittleEndian.AppendUint32(b, 3)
	b = binary.LittleEndian.AppendUint64(b, nTensors)
	b = binary.LittleEndian.AppendUint64(b, nKV)
	for _, r := range rest {
		b = append(b, r...)
	}
	return b
}

func kvHead(key string, t ValueType) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(key)))
	b = append(b, key...)
	return binary.LittleEndian.AppendUint32(b, uint32(t))
}

// TestMetadataBounds: counts and lengths past the limits or past the bytes
// that remain are refused before anything is allocated for them, with an
// error naming what is wrong.
func TestMetadataBounds(t *testing.T) {
	pad := make([]byte, 4096)
	arr := func(et ValueType, n uint64) []byte {
		b := kvHead("a", TypeArray)
		b = binary.LittleEndian.AppendUint32(b, uint32(et))
		return binary.LittleEndian.AppendUint64(b, n)
	}
	str := func(n uint64) []byte {
		return binary.LittleEndian.AppendUint64(kvHead("s", TypeString), n)
	}
	for _, c := range []struct {
		name string
		file []byte
		want string
	}{
		{"kv count over the limit", ggufHeader(0, MaxKV+1, pad), "metadata count 65537 exceeds the limit"},
		{"kv count past the file", ggufHeader(0, 1000, pad), "metadata count 1000 cannot fit"},
		{"tensor count over the limit", ggufHeader(MaxTensors+1, 0, pad), "tensor count 1048577 exceeds the limit"},
		{"tensor count past the file", ggufHeader(1<<40, 0, pad), "exceeds the limit"},
		{"tensor count past the file (small)", ggufHeader(1000, 0, pad), "tensor count 1000 cannot fit"},
		{"key length past the file", ggufHeader(0, 1, binary.LittleEndian.AppendUint64(nil, 1<<62), pad), "string length 4611686018427387904 exceeds the"},
		{"string length past the file", ggufHeader(0, 1, str(1<<40), pad), `value of "s": string length 1099511627776 exceeds`},
		{"array over the limit", ggufHeader(0, 1, arr(TypeUint8, MaxArray+1), pad), `"a": array of 16777217 elements exceeds the limit`},
		{"array past the file", ggufHeader(0, 1, arr(TypeUint32, 2000), pad), `"a": array of 2000 uint32 elements exceeds`},
		{"string array past the file", ggufHeader(0, 1, arr(TypeString, 600), pad), `"a": array of 600 string elements exceeds`},
		{"nested arrays past the file", ggufHeader(0, 1, arr(TypeArray, 600), pad), `"a": array of 600 array elements exceeds`},
		{"unknown type", ggufHeader(0, 1, kvHead("k", 99), pad), `"k" has unknown value type 99`},
	} {
		_, err := Parse(c.file)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestMetadataLimit: metadata larger than the limit is refused even where
// the file holds it (a multi-gigabyte file could otherwise ask for
// gigabytes of heap), and names the limit.
func TestMetadataLimit(t *testing.T) {
	defer func(m int) { maxMetadata = m }(maxMetadata)
	maxMetadata = 1 << 16
	b := NewBuilder()
	b.Set("general.architecture", "llama")
	b.Set("big", strings.Repeat("x", 1<<15))
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(buf.Bytes()); err != nil {
		t.Fatalf("32 KiB of metadata under a 64 KiB limit: %v", err)
	}
	b.Set("big", strings.Repeat("x", 1<<16))
	buf.Reset()
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	_, err := Parse(buf.Bytes())
	if err == nil || !strings.Contains(err.Error(), "metadata limit") {
		t.Fatalf("64 KiB string under a 64 KiB limit: got %v", err)
	}
	tokens := make([]string, 20000)
	for i := range tokens {
		tokens[i] = "tok"
	}
	b.Set("big", tokens)
	buf.Reset()
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	_, err = Parse(buf.Bytes())
	if err == nil || !strings.Contains(err.Error(), "metadata limit") {
		t.Fatalf("20000 strings under a 64 KiB limit: got %v", err)
	}
}
