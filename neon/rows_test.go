package neon

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"
)

// rowsTypes are the row-group kernels with their reference.
var rowsTypes = []struct {
	dt   dotType
	pick func(*Kernels) RowsFunc
	tile func(*Kernels) *Tile
}{
	{dotTypes[0], func(k *Kernels) RowsFunc { return k.RowsQ4_0Q8_0 }, func(k *Kernels) *Tile { return k.TileQ4_0Q8_0 }},
	{dotTypes[1], func(k *Kernels) RowsFunc { return k.RowsQ5_0Q8_0 }, func(k *Kernels) *Tile { return k.TileQ5_0Q8_0 }},
	{dotTypes[2], func(k *Kernels) RowsFunc { return k.RowsQ8_0Q8_0 }, func(k *Kernels) *Tile { return k.TileQ8_0Q8_0 }},
}

// tileRows runs a Tile as a RowsFunc: Pack into a buffer with guard bytes
// after it (which must survive), then Mul.
func tileRows(t testing.TB, tl *Tile) RowsFunc {
	return func(out []float32, ldo int, w []byte, wStride int, a []byte, aStride, nb, n int) {
		size := TilePackSize * nb * n
		buf := make([]byte, size+16)
		for i := range buf {
			buf[i] = 0xa5
		}
		tl.Pack(buf[:size], a, aStride, nb, n)
		for i, b := range buf[size:] {
			if b != 0xa5 {
				t.Fatalf("tile Pack wrote past its %d bytes at %d", size, i)
			}
		}
		tl.Mul(out, ldo, w, wStride, buf[:size], nb, n)
	}
}

// rowsKernels returns a set's row-group kernel for a type and its tile
// kernel as a RowsFunc, those it has, with names for messages.
func rowsKernels(t testing.TB, k *Kernels, i int) (names []string, fs []RowsFunc) {
	if f := rowsTypes[i].pick(k); f != nil {
		names, fs = append(names, k.Name), append(fs, f)
	}
	if tl := rowsTypes[i].tile(k); tl != nil {
		names, fs = append(names, k.Name+"/tile"), append(fs, tileRows(t, tl))
	}
	return names, fs
}

// checkRows runs one row-group kernel on RowGroup rows wStride bytes apart
// and n columns, with guard values around and between the outputs (ldo >
// RowGroup leaves gaps that must stay untouched), and compares every
// output with the generic one-row dot bit for bit.
func checkRows(t *testing.T, kname, tname string, f RowsFunc, ref func(w, a []byte, nb int) float32, w []byte, wStride int, a []byte, aStride, nb, n, ldo int) {
	t.Helper()
	const pad = 5
	buf := make([]float32, pad+(n-1)*ldo+RowGroup+pad)
	for i := range buf {
		buf[i] = guard
	}
	out := buf[pad : pad+(n-1)*ldo+RowGroup]
	f(out, ldo, w, wStride, a, aStride, nb, n)
	for i, v := range buf {
		o := i - pad
		inside := o >= 0 && o < len(out) && o%ldo < RowGroup
		if !inside {
			if !sameBits(v, guard) {
				t.Fatalf("%s %s nb=%d n=%d ldo=%d: wrote outside its outputs at %d", kname, tname, nb, n, ldo, o)
			}
			continue
		}
		j, r := o/ldo, o%ldo
		want := ref(w[r*wStride:], a[j*aStride:], nb)
		if !sameBits(v, want) {
			t.Fatalf("%s %s nb=%d n=%d ldo=%d row %d col %d: %v, generic %v", kname, tname, nb, n, ldo, r, j, v, want)
		}
	}
}

func rowsRef(name string) func(w, a []byte, nb int) float32 {
	switch name {
	case "Q4_0":
		return dotQ4_0Q8_0
	case "Q5_0":
		return dotQ5_0Q8_0
	}
	return dotQ8_0Q8_0
}

// TestRowsMatchGeneric checks every row-group kernel of every set (the
// generic reference included) against the generic one-row dots: block
// counts around the vector widths, 1..17 and 64 columns, odd offsets,
// padded row and column strides, gaps between output rows.
func TestRowsMatchGeneric(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(21, 22))
	sets := append(Available(), &Kernels{Name: "reference", RowsQ4_0Q8_0: GenericRows("Q4_0"),
		RowsQ5_0Q8_0: GenericRows("Q5_0"), RowsQ8_0Q8_0: GenericRows("Q8_0"),
		TileQ4_0Q8_0: GenericTile("Q4_0"), TileQ5_0Q8_0: GenericTile("Q5_0"), TileQ8_0Q8_0: GenericTile("Q8_0")})
	ran := 0
	for _, k := range sets {
		for ti, rt := range rowsTypes {
			names, fs := rowsKernels(t, k, ti)
			for fi, f := range fs {
				ran++
				dt := rt.dt
				ns := []int{1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13, 16, 17, 24, 25, 64}
				if testing.Short() {
					ns = []int{1, 2, 3, 4, 8, 9}
				}
				for _, nb := range []int{1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 64} {
					for _, n := range ns {
						wStride := nb*dt.wsize + r.IntN(3)*dt.wsize + r.IntN(2)
						off := r.IntN(7)
						wbuf := make([]byte, off+(RowGroup-1)*wStride+nb*dt.wsize+3)
						for i := range wbuf {
							wbuf[i] = byte(r.Uint32())
						}
						w := wbuf[off:]
						for row := 0; row < RowGroup; row++ {
							copy(w[row*wStride:], randWeights(r, dt, nb, 0))
						}
						aStride := nb*dt.asize + r.IntN(2)*dt.asize + r.IntN(3)
						a := randActs(r, dt, nb, n, aStride, r.IntN(5))
						ldo := RowGroup + r.IntN(3)*RowGroup + r.IntN(2)
						checkRows(t, names[fi], dt.name, f, rowsRef(dt.name), w, wStride, a, aStride, nb, n, ldo)
					}
				}
			}
		}
	}
	if ran == 0 {
		t.Skip("no row-group kernels")
	}
}

// FuzzRowsExact feeds arbitrary bytes (NaN and infinite scales, -128
// quants) as weights and activations to every row-group kernel.
func FuzzRowsExact(f *testing.F) {
	f.Add(make([]byte, 9*3*sizeQ8_0), uint8(1))
	f.Add([]byte("geist geist geist geist geist geist geist geist geist geist geist geist geist geist geist geist geist geist geist geist geist geist geist geist geist geist geist"), uint8(2))
	f.Fuzz(checkRowsBytes)
}

// TestRowsExactRandomBytes runs the fuzz check over random bytes, for the
// platforms where the fuzzer cannot run (qemu).
func TestRowsExactRandomBytes(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(23, 24))
	for i := 0; i < 300; i++ {
		data := make([]byte, r.IntN(6000))
		for j := range data {
			data[j] = byte(r.Uint32())
			if i%4 == 0 && r.IntN(3) == 0 {
				data[j] = 0x80
			}
		}
		checkRowsBytes(t, data, uint8(i))
	}
}

func checkRowsBytes(t *testing.T, data []byte, ncol uint8) {
	n := int(ncol%13) + 1
	for _, k := range Available() {
		for ti, rt := range rowsTypes {
			names, fs := rowsKernels(t, k, ti)
			for fi, f := range fs {
				dt := rt.dt
				nb := len(data) / (RowGroup*dt.wsize + n*dt.asize)
				if nb == 0 {
					continue
				}
				ws := nb * dt.wsize
				checkRows(t, names[fi], dt.name, f, rowsRef(dt.name), data[:RowGroup*ws], ws, data[RowGroup*ws:], nb*dt.asize, nb, n, RowGroup)
			}
		}
	}
}

// needRows skips a test of the row-group kernels themselves when they are
// switched off (RowGroupsEnv).
func needRows(t testing.TB) {
	t.Helper()
	if os.Getenv(RowGroupsEnv) == "off" {
		t.Skipf("%s=off: no row-group kernels", RowGroupsEnv)
	}
}

// TestTilePackMatchesGeneric: every set's tile Pack writes the reference
// packed bytes (quants, -o*sum, float32 scale) for random activations,
// odd strides and offsets included.
func TestTilePackMatchesGeneric(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(25, 26))
	ran := 0
	for _, k := range Available() {
		for _, rt := range rowsTypes {
			tl := rt.tile(k)
			if tl == nil {
				continue
			}
			ran++
			ref := GenericTile(rt.dt.name)
			for _, nb := range []int{1, 2, 7, 64} {
				for _, n := range []int{1, 2, 3, 8, 9, 32} {
					aStride := nb*sizeQ8_0 + r.IntN(3)
					a := randActs(r, rt.dt, nb, n, aStride, r.IntN(5))
					want := make([]byte, TilePackSize*nb*n)
					got := make([]byte, len(want))
					ref.Pack(want, a, aStride, nb, n)
					tl.Pack(got, a, aStride, nb, n)
					if !bytes.Equal(got, want) {
						t.Fatalf("%s %s nb=%d n=%d: packed bytes differ from the reference", k.Name, rt.dt.name, nb, n)
					}
				}
			}
		}
	}
	if ran == 0 {
		t.Skip("no tile kernels in this build or on this CPU")
	}
}
