package model

import (
	"errors"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/quant"
)

// TestCheckSnapshot: a genuine snapshot passes CheckSnapshot (F16 and
// Q8_0); one with a key that is not finite, a value beyond
// MaxSnapshotValue, a Q8_0 scale that is not finite, the wrong size or
// another layout is refused with ErrSnapshot naming what is wrong.
func TestCheckSnapshot(t *testing.T) {
	m := openModel(t, zoo.Path(t, "models", "tiny-llama-Q4_0.gguf"))
	seq := make([]int32, 24)
	for i := range seq {
		seq[i] = int32(1 + i*7%(m.NVocab-1))
	}
	for _, kv := range []quant.Type{quant.F16, quant.Q8_0} {
		s, err := m.NewState(StateOptions{Ctx: 64, Batch: 8, KVType: kv})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for i := 0; i < len(seq); i += 8 {
			if _, err := s.Forward(seq[i:i+8], false); err != nil {
				t.Fatal(err)
			}
		}
		blob, err := s.Snapshot(24, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := s.CheckSnapshot(blob); err != nil || n != 24 {
			t.Fatalf("%s: a genuine snapshot: %d, %v", kv, n, err)
		}
		forge := func(f func(b []byte)) []byte {
			b := append([]byte(nil), blob...)
			f(b)
			return b
		}
		at := snapHeader + 2*34 // inside the first head's keys
		cases := map[string][]byte{
			"bad header":   forge(func(b []byte) { b[0] = 'X' }),
			"bytes":        blob[:len(blob)-1],
			"layout":       forge(func(b []byte) { b[8]++ }),
			"not finite":   forge(func(b []byte) { b[at], b[at+1] = 0x00, 0x7c }), // +Inf (a Q8_0 scale there)
			"not finite ":  forge(func(b []byte) { b[at], b[at+1] = 0x01, 0xfe }), // NaN
			"of magnitude": forge(func(b []byte) { b[at], b[at+1] = 0x00, 0xf8 }), // -32768 (a Q8_0 scale: 127 steps of it)
		}
		if kv == quant.Q8_0 {
			cases["scale of magnitude"] = cases["of magnitude"]
			delete(cases, "of magnitude")
			cases["scale is not finite"] = cases["not finite"]
			delete(cases, "not finite")
			cases["scale is not finite "] = cases["not finite "]
			delete(cases, "not finite ")
		}
		for want, b := range cases {
			_, err := s.CheckSnapshot(b)
			if !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), strings.TrimSpace(want)) {
				t.Errorf("%s: %s: %v", kv, want, err)
			}
		}
	}
}

// BenchmarkCheckF16: the plausibility scan of a put's keys and values
// (64 MiB of F16 a pass; SetBytes: the throughput).
func BenchmarkCheckF16(b *testing.B) {
	buf := make([]byte, 64<<20)
	for i := 1; i < len(buf); i += 2 {
		buf[i] = 0x3c // 1.0
	}
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if err := checkF16(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCheckF16Bound: every F16 value below MaxSnapshotValue passes and
// every other one (±2^14 and beyond, infinities, NaNs) is refused, at
// every position of a word.
func TestCheckF16Bound(t *testing.T) {
	for v := range 1 << 16 {
		e := v >> 10 & 0x1f
		for at := range 5 {
			b := make([]byte, 10)
			b[2*at], b[2*at+1] = byte(v), byte(v>>8)
			if err := checkF16(b); (err == nil) != (e < 29) {
				t.Fatalf("%#04x at %d: %v", v, at, err)
			}
		}
	}
}
