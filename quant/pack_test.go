package quant

import (
	"bytes"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"unsafe"

	"github.com/geisten/geist/neon"
)

var packTypes = []Type{Q4_0, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K}

// TestPackedMatchesGeneric: a matrix packed in the reference layout
// (groups of 8 and 16 rows, with and without prepared activations) gives,
// for every row range (groups cut by it included) and column count, the
// generic set's bits of the same matrix in ggml layout; Row gives back
// every row in ggml layout; and after a switch to another set the packed
// matrix falls back to its ggml data.
func TestPackedMatchesGeneric(t *testing.T) {
	restore, err := neon.Use("generic")
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	r := rand.New(rand.NewPCG(21, 22))
	const rows, cols = 45, 2 * QK_K
	for _, typ := range packTypes {
		plain := newTestMatrix(t, typ, rows, cols, r)
		nmax := 2*groupCols + 5
		x := randRow(r, nmax*cols, 1)
		for _, R := range []int{8, 16} {
			for _, prep := range []bool{false, true} {
				m := newTestMatrix(t, typ, rows, cols, r)
				m.Data = plain.Data
				p := neon.GenericPacking(typ.String(), R, prep)
				m.packWith(p, neon.Generic(), make([]byte, packedSize(m, p)), nil)
				if m.Packed() != p.Name {
					t.Fatalf("%s: Packed() = %q", typ, m.Packed())
				}
				row := make([]byte, m.RowBytes())
				for i := 0; i < rows; i++ {
					if got := m.Row(i, row); !bytes.Equal(got, plain.Data[i*m.rowSize:(i+1)*m.rowSize]) {
						t.Fatalf("%s R=%d: Row(%d) differs from the ggml row", typ, R, i)
					}
				}
				for _, n := range []int{1, 2, 9, nmax} {
					want := make([]float32, n*rows)
					plain.Mul(want, x, n, nil)
					act := make([]byte, m.ActBytes(n))
					m.QuantizeActs(act, x, n)
					got := make([]float32, n*rows)
					for _, cut := range [][2]int{{0, 5}, {5, 16}, {16, 19}, {19, 40}, {40, rows}} {
						m.MulRows(got, rows, act, n, cut[0], cut[1])
					}
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s R=%d prep=%v n=%d: row %d column %d: packed %v, ggml layout %v", typ, R, prep, n, i%rows, i/rows, got[i], want[i])
						}
					}
				}
				// Under another set the packing is not used: Data is.
				if len(neon.Available()) > 1 {
					restore2, _ := neon.Use(neon.Available()[0].Name)
					act := make([]byte, m.ActBytes(3))
					m.QuantizeActs(act, x, 3)
					got, want := make([]float32, 3*rows), make([]float32, 3*rows)
					m.MulRows(got, rows, act, 3, 0, rows)
					plain.MulRows(want, rows, act, 3, 0, rows)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s under %s: packed matrix gives %v, ggml %v", typ, neon.Active().Name, got[i], want[i])
						}
					}
					restore2()
				}
			}
		}
	}
}

// TestSameActs: matrices share activations when their activation type,
// width and prepared form agree.
func TestSameActs(t *testing.T) {
	restore, err := neon.Use("generic")
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	r := rand.New(rand.NewPCG(3, 4))
	mk := func(typ Type, cols int, p *neon.Packing) *Matrix {
		m := newTestMatrix(t, typ, 16, cols, r)
		if p != nil {
			m.packWith(p, neon.Generic(), make([]byte, packedSize(m, p)), nil)
		}
		return m
	}
	q40, q80, q4k := mk(Q4_0, 256, nil), mk(Q8_0, 256, nil), mk(Q4_K, 256, nil)
	q40p := mk(Q4_0, 256, neon.GenericPacking("Q4_0", 16, false))
	q40pp := mk(Q4_0, 256, neon.GenericPacking("Q4_0", 16, true))
	q80pp := mk(Q8_0, 256, neon.GenericPacking("Q8_0", 8, true))
	q4kpp := mk(Q4_K, 256, neon.GenericPacking("Q4_K", 8, true))
	for _, c := range []struct {
		a, b *Matrix
		want bool
	}{
		{q40, q80, true}, {q40, q4k, false}, {q40, mk(Q4_0, 512, nil), false},
		{q40, q40p, true}, {q40, q40pp, false}, {q40pp, q80pp, true}, {q40pp, q4kpp, false},
	} {
		if got := c.a.SameActs(c.b); got != c.want || c.b.SameActs(c.a) != c.want {
			t.Errorf("SameActs(%s %q, %s %q) = %v, want %v", c.a.Type, c.a.Packed(), c.b.Type, c.b.Packed(), got, c.want)
		}
	}
	if q40pp.ActBytes(3) != 3*2*q40pp.ActRowSize() || q40p.ActBytes(3) != 3*q40p.ActRowSize() {
		t.Errorf("ActBytes: %d, %d", q40pp.ActBytes(3), q40p.ActBytes(3))
	}
}

// TestPackActiveSet: Pack uses the active set's layout, and PackedSize is
// 0 (Pack a no-op) for types the set keeps in ggml layout.
func TestPackActiveSet(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, ks := range neon.Available() {
		restore, err := neon.Use(ks.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, typ := range append(packTypes, F16, Q4_1) {
			m := newTestMatrix(t, typ, 40, QK_K, r)
			size := m.PackedSize()
			var p *neon.Packing
			if m.pack != nil {
				p = m.pack(ks)
			}
			if (size == 0) != (p == nil) {
				t.Errorf("%s %s: PackedSize %d with packing %v", ks.Name, typ, size, p != nil)
			}
			if err := m.Pack(make([]byte, size)); err != nil {
				t.Fatal(err)
			}
			if p != nil && m.Packed() != p.Name {
				t.Errorf("%s %s: packed as %q, want %q", ks.Name, typ, m.Packed(), p.Name)
			}
			if p != nil {
				if err := m.Pack(make([]byte, size+1)); err == nil {
					t.Errorf("%s %s: Pack into a buffer of the wrong size succeeded", ks.Name, typ)
				}
			}
		}
		restore()
	}
}

// TestPackReleasing: the stretches PackReleasing hands back follow each
// other from the start of Data to the end of its last whole group, each at
// most packChunk plus one group, and the packed matrix is Pack's.
func TestPackReleasing(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, typ := range packTypes {
		m := newTestMatrix(t, typ, 4099, 4*QK_K, r) // 16 MiB and 3 leftover rows in Q8_0
		size := m.PackedSize()
		if size == 0 {
			continue
		}
		p := m.pack(neon.Active())
		group := p.Rows * m.rowSize
		var next, calls int
		got := make([]byte, size)
		err := m.PackReleasing(got, func(src []byte) {
			calls++
			if off := int(uintptr(unsafe.Pointer(&src[0])) - uintptr(unsafe.Pointer(&m.Data[0]))); off != next {
				t.Errorf("%s: stretch %d starts at %d, want %d", typ, calls, off, next)
			}
			if len(src) > packChunk+group {
				t.Errorf("%s: stretch %d has %d bytes", typ, calls, len(src))
			}
			next += len(src)
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := m.Rows / p.Rows * group; next != want {
			t.Errorf("%s: released %d bytes of Data in %d stretches, want %d", typ, next, calls, want)
		}
		want := make([]byte, size)
		if err := m.Pack(want); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: PackReleasing packs differently from Pack", typ)
		}
	}
}

// packedSize is PackedSize for the packing p.
func packedSize(m *Matrix, p *neon.Packing) int {
	return m.Rows/p.Rows*p.GroupSize(m.nb) + m.Rows%p.Rows*m.rowSize
}

// BenchmarkPacked compares products of a 4096×2048 matrix (beyond L2, as a
// model's are) in ggml layout and packed for the active set, 1 to 64
// columns: BenchmarkPacked/Q4_0/packed/n=8. SetBytes counts the weight
// bytes, so MB/s reads as weight streaming speed.
func BenchmarkPacked(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	const rows, cols = 4096, 2048
	for _, typ := range packTypes {
		plain := newTestMatrix(b, typ, rows, cols, r)
		if plain.PackedSize() == 0 {
			continue
		}
		m := newTestMatrix(b, typ, 16, cols, r)
		*m = *plain
		if err := m.Pack(make([]byte, m.PackedSize())); err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{1, 4, 8, 16, 64} {
			x := randRow(r, n*cols, 1)
			for _, mm := range []*Matrix{plain, m} {
				name := "ggml"
				if mm.Packed() != "" {
					name = "packed"
				}
				act := make([]byte, mm.ActBytes(n))
				mm.QuantizeActs(act, x, n)
				out := make([]float32, n*rows)
				b.Run(typ.String()+"/"+name+"/n="+strconv.Itoa(n), func(b *testing.B) {
					b.SetBytes(int64(len(plain.Data)))
					cpuLoop(b, func() { mm.MulRows(out, rows, act, n, 0, rows) })
				})
			}
		}
	}
}

// cpuLoop runs f b.N times on one locked OS thread and reports the
// thread's CPU time per call (cpu-ns/op): on a machine other programs
// load, wall time swings, the thread's own CPU time much less.
func cpuLoop(b *testing.B, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0 := threadCPU()
	for b.Loop() {
		f()
	}
	b.ReportMetric(float64(threadCPU()-t0)/float64(b.N), "cpu-ns/op")
}

func threadCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
