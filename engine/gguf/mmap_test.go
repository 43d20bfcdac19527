package gguf

import (
	"testing"
	"unsafe"

	"github.com/geisten/geist/engine/zoo"
)

// TestPageSpan: the advice ranges are whole pages inside the mapping,
// rounded outward (AdviseRandom, WillNeed: every page the bytes touch)
// or inward (Release: only pages wholly inside), and nothing is advised
// for bytes outside the mapping.
func TestPageSpan(t *testing.T) {
	const ps, base, size = 4096, 1 << 20, 10*4096 + 100 // the last page is partial
	cases := []struct {
		start, n uintptr
		out      bool
		lo, hi   uintptr
		ok       bool
	}{
		{base, 1, true, 0, ps, true},
		{base + 10, 5000, true, 0, 2 * ps, true},
		{base + 10, 5000, false, 0, 0, false}, // no whole page inside
		{base + 10, 3 * ps, false, ps, 3 * ps, true},
		{base + 4*ps, 2 * ps, true, 4 * ps, 6 * ps, true},
		{base + 4*ps, 2 * ps, false, 4 * ps, 6 * ps, true},
		{base + 10*ps + 50, 50, true, 10 * ps, size, true}, // clipped to the mapping's end
		{base + 10*ps + 50, 51, true, 0, 0, false},         // one byte past the end
		{base - 1, 10, true, 0, 0, false},
		{base + size, 1, true, 0, 0, false},
		{base, 0, true, 0, 0, false},
	}
	for _, c := range cases {
		lo, hi, ok := pageSpan(base, size, c.start, c.n, ps, c.out)
		if ok != c.ok || ok && (lo != c.lo || hi != c.hi) {
			t.Errorf("pageSpan(+%d, %d, out %v) = [%d, %d) %v, want [%d, %d) %v", c.start-base, c.n, c.out, lo, hi, ok, c.lo, c.hi, c.ok)
		}
		if ok && (lo%ps != 0 || (hi%ps != 0 && hi != size) || hi > size) {
			t.Errorf("pageSpan(+%d, %d): [%d, %d) not whole pages inside the mapping", c.start-base, c.n, lo, hi)
		}
	}
	// Every span of a mapped file's tensors, both ways.
	f, err := Open(zoo.Path(t, "new", "models", "tiny-qwen3moe-Q4_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b0 := uintptr(unsafe.Pointer(&f.data[0]))
	for _, tn := range f.Tensors {
		d := tn.Data
		if len(d) == 0 {
			continue
		}
		for _, out := range []bool{true, false} {
			lo, hi, ok := pageSpan(b0, uintptr(len(f.data)), uintptr(unsafe.Pointer(&d[0])), uintptr(len(d)), ps, out)
			if ok && (lo%ps != 0 || hi > uintptr(len(f.data))) {
				t.Errorf("%s: [%d, %d) of %d", tn.Name, lo, hi, len(f.data))
			}
		}
		f.AdviseRandom(d)
		f.WillNeed(d)
	}
}
