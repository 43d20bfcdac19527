//go:build amd64 && !purego

package neon

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/geisten/geist/neon/ggml"
	"golang.org/x/sys/cpu"
)

// Tolerances of the AVX2 set against the generic one. Integer block sums
// are exact in both; the float work differs in order (8 float32 lanes and
// FMA against the generic lane or index order), so results agree within a
// few float32 roundings per accumulated term, measured against the sum of
// the magnitudes of the terms:
//
//	|avx2 - generic| <= tolTerms * (terms + tolSlack) * eps32 * avxMagnitude
//
// with terms the number of products added into one float32 lane.
const (
	eps32    = 1.0 / (1 << 24)
	tolTerms = 4
	tolSlack = 8
)

func avxNeed(t testing.TB) *Kernels {
	t.Helper()
	k := byName("avx2")
	if k == nil {
		t.Skip("avx2: this CPU lacks AVX2, FMA or F16C")
	}
	return k
}

// TestDispatchAMD64 asserts which set runs: "avx512vnni" on a CPU with
// AVX-512 VNNI, VL and BW besides the avx2 features, "avx2" on a CPU with
// AVX2, FMA and F16C (unless GEIST_KERNELS names another), generic
// otherwise.
func TestDispatchAMD64(t *testing.T) {
	t.Parallel()
	want := "generic"
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C {
		want = "avx2"
	}
	if hasVNNIFlags() {
		want = "avx512vnni"
	}
	if byName(want) == nil {
		t.Fatalf("set %q not available (have %v)", want, names())
	}
	if Available()[0].Name != want {
		t.Errorf("best available set is %q, want %q", Available()[0].Name, want)
	}
	if env := os.Getenv(EnvVar); env != "" {
		t.Logf("%s=%s: skipping the Active check", EnvVar, env)
		return
	}
	if got := chosen().Name; got != want {
		t.Errorf("dispatched %q, want %q", got, want)
	}
	t.Logf("dispatched %q; available %v", chosen().Name, names())
}

// avxQuantKind describes one weight type for the differential tests.
type avxQuantKind struct {
	name         string
	qk           int // values per block
	wSize, aSize int // bytes per weight / activation block
	genBlock     func(r *rand.Rand, b []byte)
	dot          func(k *Kernels) DotFunc
	quantize     func(dst []byte, x []float32) // activation quantizer (generic)
}

func avxPutF16(b []byte, f float32) { binary.LittleEndian.PutUint16(b, ggml.FP32ToFP16(f)) }

func avxScale(r *rand.Rand) float32 { return float32(r.NormFloat64() * 0.02) }

func avxFill(r *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

var avxQuantKinds = []avxQuantKind{
	{"Q4_0", 32, sizeQ4_0, sizeQ8_0, func(r *rand.Rand, b []byte) {
		avxPutF16(b, avxScale(r))
		avxFill(r, b[2:])
	}, func(k *Kernels) DotFunc { return k.DotQ4_0Q8_0 }, quantizeQ8_0},
	{"Q5_0", 32, sizeQ5_0, sizeQ8_0, func(r *rand.Rand, b []byte) {
		avxPutF16(b, avxScale(r))
		avxFill(r, b[2:])
	}, func(k *Kernels) DotFunc { return k.DotQ5_0Q8_0 }, quantizeQ8_0},
	{"Q8_0", 32, sizeQ8_0, sizeQ8_0, func(r *rand.Rand, b []byte) {
		avxPutF16(b, avxScale(r))
		avxFill(r, b[2:])
	}, func(k *Kernels) DotFunc { return k.DotQ8_0Q8_0 }, quantizeQ8_0},
	{"Q4_K", 256, sizeQ4_K, sizeQ8_K, func(r *rand.Rand, b []byte) {
		avxPutF16(b, avxScale(r))
		avxPutF16(b[2:], avxScale(r))
		avxFill(r, b[4:])
	}, func(k *Kernels) DotFunc { return k.DotQ4_KQ8_K }, quantizeQ8_K},
	{"Q6_K", 256, sizeQ6_K, sizeQ8_K, func(r *rand.Rand, b []byte) {
		avxFill(r, b[:208])
		avxPutF16(b[208:], avxScale(r))
	}, func(k *Kernels) DotFunc { return k.DotQ6_KQ8_K }, quantizeQ8_K},
}

// avxActs returns n activation rows of nb blocks each, aStride bytes
// apart (the gap filled with junk), quantized by the generic quantizer
// from random floats; some rows are all zeros or carry outliers.
func avxActs(r *rand.Rand, q avxQuantKind, nb, n, aStride int) []byte {
	a := make([]byte, (n-1)*aStride+nb*q.aSize)
	avxFill(r, a)
	x := make([]float32, nb*q.qk)
	for j := 0; j < n; j++ {
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		switch r.IntN(8) {
		case 0:
			clear(x)
		case 1:
			if len(x) > 0 {
				x[r.IntN(len(x))] = 1000
			}
		}
		if nb > 0 {
			q.quantize(a[j*aStride:j*aStride+nb*q.aSize], x)
		}
	}
	return a
}

// avxMagnitude is the sum of |weight * activation| over every product the
// dot adds (Q4_K's mins counted as their own terms): the scale of the
// tolerance, since partial sums in lanes can be far larger than the result.
func avxMagnitude(q avxQuantKind, w, a []byte, nb int) float64 {
	var m float64
	for ib := 0; ib < nb; ib++ {
		x := w[ib*q.wSize : (ib+1)*q.wSize]
		y := a[ib*q.aSize : (ib+1)*q.aSize]
		var ya [256]float64
		if q.qk == 32 {
			d := float64(f16at(y, 0))
			for i := 0; i < 32; i++ {
				ya[i] = math.Abs(d * float64(int8(y[2+i])))
			}
		} else {
			d := float64(math.Float32frombits(binary.LittleEndian.Uint32(y)))
			for i := 0; i < 256; i++ {
				ya[i] = math.Abs(d * float64(int8(y[4+i])))
			}
		}
		var wa [256]float64 // |weight| per element
		switch q.name {
		case "Q4_0":
			for j := 0; j < 16; j++ {
				wa[j], wa[j+16] = float64(int(x[2+j]&15)-8), float64(int(x[2+j]>>4)-8)
			}
		case "Q5_0":
			qh := binary.LittleEndian.Uint32(x[2:])
			for j := 0; j < 16; j++ {
				wa[j] = float64(int(x[6+j]&15|byte(qh>>j&1)<<4) - 16)
				wa[j+16] = float64(int(x[6+j]>>4|byte(qh>>(j+16)&1)<<4) - 16)
			}
		case "Q8_0":
			for j := 0; j < 32; j++ {
				wa[j] = float64(int8(x[2+j]))
			}
		case "Q4_K":
			d, dmin := float64(f16at(x, 0)), float64(f16at(x, 2))
			for j := 0; j < 8; j++ {
				sc, mn := ggml.ScaleMinK4(j, x[4:16])
				for l := 0; l < 32; l++ {
					qv := x[16+32*(j/2)+l]
					if j%2 == 0 {
						qv &= 15
					} else {
						qv >>= 4
					}
					wa[32*j+l] = math.Abs(d*float64(sc)*float64(qv)) + math.Abs(dmin*float64(mn))
				}
			}
		case "Q6_K":
			d := float64(f16at(x, 208))
			for h := 0; h < 2; h++ {
				ql, qh := x[64*h:], x[128+32*h:]
				for l := 0; l < 32; l++ {
					v := [4]int{
						int(ql[l]&15 | (qh[l]&3)<<4), int(ql[l+32]&15 | (qh[l]>>2&3)<<4),
						int(ql[l]>>4 | (qh[l]>>4&3)<<4), int(ql[l+32]>>4 | (qh[l]>>6&3)<<4),
					}
					for k := 0; k < 4; k++ {
						e := 128*h + 32*k + l
						wa[e] = d * float64(int8(x[192+e/16])) * float64(v[k]-32)
					}
				}
			}
		}
		if q.qk == 32 {
			for i := range wa[:32] {
				wa[i] *= float64(f16at(x, 0))
			}
		}
		for i := 0; i < q.qk; i++ {
			m += math.Abs(wa[i]) * ya[i]
		}
	}
	return m
}

// avxGuard returns a slice of n floats inside a larger buffer whose other
// elements hold a sentinel, and a check that the sentinels are intact.
func avxGuard(n int) ([]float32, func(t *testing.T)) {
	const g = 5
	buf := make([]float32, n+2*g)
	sentinel := math.Float32frombits(0x7fc0dead)
	for i := range buf {
		buf[i] = sentinel
	}
	return buf[g : g+n : g+n], func(t *testing.T) {
		t.Helper()
		for i, v := range buf {
			if (i < g || i >= g+n) && math.Float32bits(v) != 0x7fc0dead {
				t.Fatalf("guard element %d overwritten: %v", i, v)
			}
		}
	}
}

func avxCheckDot(t *testing.T, q avxQuantKind, avx *Kernels, w, a []byte, aStride, nb, n int) {
	t.Helper()
	gen, fast := q.dot(generic), q.dot(avx)
	want := make([]float32, n)
	gen(want, w, a, aStride, nb, n)
	got, guard := avxGuard(n)
	fast(got, w, a, aStride, nb, n)
	guard(t)
	single, guard1 := avxGuard(1)
	for j := 0; j < n; j++ {
		col := a[j*aStride:]
		fast(single, w, col, 0, nb, 1)
		guard1(t)
		if math.Float32bits(single[0]) != math.Float32bits(got[j]) {
			t.Fatalf("%s nb=%d n=%d column %d: %v in the batch, %v alone (batch invariance)", q.name, nb, n, j, got[j], single[0])
		}
		if q.qk == 32 {
			// The 32-value block dots equal the generic ones bit for bit.
			if math.Float32bits(got[j]) != math.Float32bits(want[j]) && !(got[j] != got[j] && want[j] != want[j]) {
				t.Fatalf("%s nb=%d n=%d column %d: avx2 %v, generic %v (must be bit-identical)", q.name, nb, n, j, got[j], want[j])
			}
			continue
		}
		mag := avxMagnitude(q, w, col, nb)
		terms := float64(nb*q.qk/32 + 1)
		tol := tolTerms * (terms + tolSlack) * eps32 * mag
		if d := math.Abs(float64(got[j]) - float64(want[j])); d > tol || math.IsNaN(float64(got[j])) {
			t.Fatalf("%s nb=%d n=%d column %d: avx2 %v, generic %v (diff %g > tol %g)", q.name, nb, n, j, got[j], want[j], d, tol)
		}
	}
}

// TestDotAVX2 compares every AVX2 block dot with the generic one over
// block counts around the vector and block widths, n = 1..9 and 17
// columns, unaligned slices and guarded outputs.
func TestDotAVX2(t *testing.T) {
	t.Parallel()
	avx := avxNeed(t)
	for _, q := range avxQuantKinds {
		t.Run(q.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(q.wSize)))
			nbs := []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 64, 65}
			if q.qk == 256 {
				nbs = []int{0, 1, 2, 3, 5, 8, 16, 17}
			}
			for _, nb := range nbs {
				for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 17} {
					off := r.IntN(7)
					aStride := nb*q.aSize + r.IntN(3)*17
					w := make([]byte, off+nb*q.wSize)[off:]
					for i := 0; i < nb; i++ {
						q.genBlock(r, w[i*q.wSize:(i+1)*q.wSize])
					}
					a := append(make([]byte, off), avxActs(r, q, nb, n, aStride)...)[off:]
					avxCheckDot(t, q, avx, w, a, aStride, nb, n)
				}
			}
		})
	}
}

// TestDotAVX2Extremes uses weights and activations at the ends of their
// ranges (all nibbles 15 or 0, quants +-127, Q6_K scales -128) where the
// int16 pair sums of VPMADDUBSW come closest to saturating.
func TestDotAVX2Extremes(t *testing.T) {
	t.Parallel()
	avx := avxNeed(t)
	for _, q := range avxQuantKinds {
		for _, wb := range []byte{0x00, 0xff, 0x80, 0x7f, 0x88} {
			for _, av := range []float32{1, -1} {
				nb, n := 4, 3
				w := make([]byte, nb*q.wSize)
				for i := 0; i < nb; i++ {
					b := w[i*q.wSize : (i+1)*q.wSize]
					for k := range b {
						b[k] = wb
					}
					switch q.name {
					case "Q4_K":
						avxPutF16(b, 0.5)
						avxPutF16(b[2:], 0.25)
					case "Q6_K":
						avxPutF16(b[208:], 0.5)
					default:
						avxPutF16(b, 0.5)
					}
				}
				x := make([]float32, nb*q.qk)
				a := make([]byte, n*nb*q.aSize)
				for j := 0; j < n; j++ {
					for i := range x {
						x[i] = av
						if (i+j)%3 == 0 {
							x[i] = -av
						}
					}
					q.quantize(a[j*nb*q.aSize:(j+1)*nb*q.aSize], x)
				}
				t.Run(fmt.Sprintf("%s/%02x/%v", q.name, wb, av), func(t *testing.T) {
					avxCheckDot(t, q, avx, w, a, nb*q.aSize, nb, n)
				})
			}
		}
	}
}

// TestDotAVX2Short checks that the wrappers refuse buffers that are too
// short instead of reading past them.
func TestDotAVX2Short(t *testing.T) {
	t.Parallel()
	avx := avxNeed(t)
	for _, q := range avxQuantKinds {
		nb := 2
		w := make([]byte, nb*q.wSize)
		a := make([]byte, 2*nb*q.aSize)
		out := make([]float32, 2)
		cases := []struct {
			name string
			f    func()
		}{
			{"weights", func() { q.dot(avx)(out, w[:len(w)-1], a, nb*q.aSize, nb, 2) }},
			{"acts", func() { q.dot(avx)(out, w, a[:len(a)-1], nb*q.aSize, nb, 2) }},
			{"out", func() { q.dot(avx)(out[:1], w, a, nb*q.aSize, nb, 2) }},
			{"stride", func() { q.dot(avx)(out, w, a, nb*q.aSize-1, nb, 2) }},
			{"n", func() { q.dot(avx)(out, w, a, nb*q.aSize, nb, 0) }},
		}
		for _, c := range cases {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("%s: short %s did not panic", q.name, c.name)
					}
				}()
				c.f()
			}()
		}
	}
}

// avxFloatKind describes F32 and F16 rows.
type avxFloatKind struct {
	name string
	size int
	put  func(b []byte, f float32)
	get  func(b []byte, i int) float32
	dot  func(k *Kernels) DotFunc
}

var avxFloatKinds = []avxFloatKind{
	{"F32", 4, func(b []byte, f float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(f)) }, f32elem,
		func(k *Kernels) DotFunc { return k.DotF32 }},
	{"F16", 2, avxPutF16, f16elem, func(k *Kernels) DotFunc { return k.DotF16 }},
}

func TestDotFloatAVX2(t *testing.T) {
	t.Parallel()
	avx := avxNeed(t)
	r := rand.New(rand.NewPCG(2, 3))
	for _, fk := range avxFloatKinds {
		for _, ne := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 100, 255, 256, 257, 1000} {
			for _, n := range []int{1, 2, 3, 5, 8, 9, 17} {
				off := r.IntN(5)
				aStride := ne*fk.size + r.IntN(3)*6
				w := make([]byte, off+ne*fk.size)[off:]
				a := make([]byte, off+(n-1)*aStride+ne*fk.size)[off:]
				for i := 0; i < ne; i++ {
					fk.put(w[i*fk.size:], float32(r.NormFloat64()))
				}
				for j := 0; j < n; j++ {
					for i := 0; i < ne; i++ {
						fk.put(a[j*aStride+i*fk.size:], float32(r.NormFloat64()))
					}
				}
				want := make([]float32, n)
				fk.dot(generic)(want, w, a, aStride, ne, n)
				got, guard := avxGuard(n)
				fk.dot(avx)(got, w, a, aStride, ne, n)
				guard(t)
				var single [1]float32
				for j := 0; j < n; j++ {
					col := a[j*aStride:]
					fk.dot(avx)(single[:], w, col, 0, ne, 1)
					if math.Float32bits(single[0]) != math.Float32bits(got[j]) {
						t.Fatalf("%s ne=%d n=%d column %d: %v in the batch, %v alone", fk.name, ne, n, j, got[j], single[0])
					}
					var mag float64
					for i := 0; i < ne; i++ {
						mag += math.Abs(float64(fk.get(w, i) * fk.get(col, i)))
					}
					tol := tolTerms * (float64(ne/8+ne%8) + tolSlack) * eps32 * mag
					if d := math.Abs(float64(got[j] - want[j])); d > tol {
						t.Fatalf("%s ne=%d n=%d column %d: avx2 %v, generic %v (diff %g > tol %g)", fk.name, ne, n, j, got[j], want[j], d, tol)
					}
				}
			}
		}
	}
}

func avxHalfs(r *rand.Rand, n int) []uint16 {
	b := make([]uint16, n)
	for i := range b {
		b[i] = ggml.FP32ToFP16(float32(r.NormFloat64()))
	}
	return b
}

func avxFloats(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * scale)
	}
	return x
}

// TestVectorAVX2 covers the per-token kernels: AxpyF16 equals the generic
// code bit for bit (product rounded, then added), DotF32F16 and
// RMSNormScale agree within their tolerances.
func TestVectorAVX2(t *testing.T) {
	t.Parallel()
	avx := avxNeed(t)
	r := rand.New(rand.NewPCG(4, 5))
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 24, 32, 63, 64, 65, 128, 129, 2048} {
		off := r.IntN(3)
		a := avxFloats(r, n+off, 1)[off:]
		b := avxHalfs(r, n+off)[off:]

		want := generic.DotF32F16(a, b)
		got := avx.DotF32F16(a, b)
		var mag float64
		for i := range a {
			mag += math.Abs(float64(a[i] * h2f(b[i])))
		}
		// The generic sum runs sequentially: its own error grows with n.
		tol := tolTerms * (float64(n) + tolSlack) * eps32 * mag
		if d := math.Abs(float64(got - want)); d > tol {
			t.Errorf("DotF32F16 n=%d: avx2 %v, generic %v (diff %g > %g)", n, got, want, d, tol)
		}

		const g = 3
		base := avxFloats(r, n+2*g, 1)
		o1 := append([]float32(nil), base...)
		o2 := append([]float32(nil), base...)
		alpha := float32(r.NormFloat64())
		generic.AxpyF16(o1[g:g+n], alpha, b)
		avx.AxpyF16(o2[g:g+n], alpha, b)
		for i := range o1 {
			if math.Float32bits(o1[i]) != math.Float32bits(o2[i]) {
				t.Fatalf("AxpyF16 n=%d element %d: avx2 %v, generic %v", n, i-g, o2[i], o1[i])
			}
		}

		ws, gs := generic.RMSNormScale(a), avx.RMSNormScale(a)
		if d := math.Abs(ws - gs); d > 1e-12*ws {
			t.Errorf("RMSNormScale n=%d: avx2 %v, generic %v", n, gs, ws)
		}
	}
}

// TestQuantizeAVX2 checks that the AVX2 quantizers write exactly the
// generic bytes, over random rows, zero blocks, ties (values that land on
// .5 after scaling), repeated maxima of both signs and tiny values.
func TestQuantizeAVX2(t *testing.T) {
	t.Parallel()
	avx := avxNeed(t)
	r := rand.New(rand.NewPCG(6, 7))
	rows := [][]float32{}
	for i := 0; i < 40; i++ {
		rows = append(rows, avxFloats(r, 1024, math.Pow(10, float64(r.IntN(9)-4))))
	}
	ties := make([]float32, 1024)
	for i := range ties {
		ties[i] = float32(i%255-127) / 2
	}
	rows = append(rows, ties, make([]float32, 1024))
	mixed := avxFloats(r, 1024, 1)
	for i := 0; i < len(mixed); i += 32 {
		mixed[i+5], mixed[i+9] = -3, 3 // equal magnitudes, opposite signs
		if i%256 == 0 {
			clear(mixed[i+100 : i+256])
		}
	}
	clear(mixed[512:768])
	rows = append(rows, mixed)
	tiny := avxFloats(r, 1024, 1e-30)
	rows = append(rows, tiny)
	for ri, x := range rows {
		for _, k := range []int{32, 64, 256, 512, 1024} {
			for _, c := range []struct {
				name  string
				size  int
				qk    int
				quant func(*Kernels) func([]byte, []float32)
			}{
				{"Q8_0", sizeQ8_0, 32, func(k *Kernels) func([]byte, []float32) { return k.QuantizeQ8_0 }},
				{"Q8_K", sizeQ8_K, 256, func(k *Kernels) func([]byte, []float32) { return k.QuantizeQ8_K }},
			} {
				if k%c.qk != 0 {
					continue
				}
				nb := k / c.qk
				want := make([]byte, nb*c.size+4)
				got := make([]byte, nb*c.size+4)
				for i := range want {
					want[i], got[i] = 0xa5, 0xa5
				}
				c.quant(generic)(want[:nb*c.size], x[:k])
				c.quant(avx)(got[:nb*c.size], x[:k])
				for i := range want {
					if want[i] != got[i] {
						t.Fatalf("%s row %d k=%d: byte %d (block %d offset %d) avx2 %#x, generic %#x", c.name, ri, k, i, i/c.size, i%c.size, got[i], want[i])
					}
				}
			}
		}
	}
}

// FuzzDotAVX2 derives weights and activations from the fuzz input and
// checks the AVX2 dots against the generic ones and batch invariance.
func FuzzDotAVX2(f *testing.F) {
	f.Add(uint8(0), uint8(1), uint8(1), []byte("seed"))
	f.Add(uint8(3), uint8(2), uint8(5), []byte{0xff, 0x00, 0x80, 0x7f})
	f.Fuzz(func(t *testing.T, kind, nbs, ns uint8, data []byte) {
		avx := byName("avx2")
		if avx == nil {
			t.Skip("no avx2")
		}
		q := avxQuantKinds[int(kind)%len(avxQuantKinds)]
		nb := int(nbs) % 9
		n := 1 + int(ns)%10
		if len(data) == 0 {
			data = []byte{0}
		}
		byteAt := func(i int) byte { return data[i%len(data)] ^ byte(i*131) }
		w := make([]byte, nb*q.wSize)
		for i := range w {
			w[i] = byteAt(i)
		}
		// Keep the F16 scales finite.
		for i := 0; i < nb; i++ {
			b := w[i*q.wSize:]
			switch q.name {
			case "Q4_K":
				b[1] &= 0x3b
				b[3] &= 0x3b
			case "Q6_K":
				b[209] &= 0x3b
			default:
				b[1] &= 0x3b
			}
		}
		x := make([]float32, nb*q.qk)
		aStride := nb * q.aSize
		a := make([]byte, n*aStride)
		for j := 0; j < n; j++ {
			for i := range x {
				x[i] = float32(int8(byteAt(len(w)+j*len(x)+i))) / 16
			}
			if nb > 0 {
				q.quantize(a[j*aStride:(j+1)*aStride], x)
			}
		}
		avxCheckDot(t, q, avx, w, a, aStride, nb, n)
	})
}

// BenchmarkDotAVX2 measures each block dot per implementation, row width
// (values) and column count; the bytes are the weight bytes read.
func BenchmarkDotAVX2(b *testing.B) {
	avx := avxNeed(b)
	for _, q := range avxQuantKinds {
		for _, cols := range []int{2048, 8192} {
			for _, n := range []int{1, 4, 8} {
				nb := cols / q.qk
				r := rand.New(rand.NewPCG(8, 9))
				w := make([]byte, nb*q.wSize)
				for i := 0; i < nb; i++ {
					q.genBlock(r, w[i*q.wSize:(i+1)*q.wSize])
				}
				a := avxActs(r, q, nb, n, nb*q.aSize)
				out := make([]float32, n)
				for _, k := range []*Kernels{generic, avx} {
					dot := q.dot(k)
					b.Run(fmt.Sprintf("%s/%s/%d/n=%d", q.name, k.Name, cols, n), func(b *testing.B) {
						b.SetBytes(int64(len(w)))
						for b.Loop() {
							dot(out, w, a, nb*q.aSize, nb, n)
						}
					})
				}
			}
		}
	}
}

// BenchmarkVectorAVX2 measures quantization and the per-token kernels.
func BenchmarkVectorAVX2(b *testing.B) {
	avx := avxNeed(b)
	r := rand.New(rand.NewPCG(10, 11))
	x := avxFloats(r, 2048, 1)
	h := avxHalfs(r, 2048)
	q0 := make([]byte, 2048/32*sizeQ8_0)
	qk := make([]byte, 2048/256*sizeQ8_K)
	for _, k := range []*Kernels{generic, avx} {
		b.Run("QuantizeQ8_0/"+k.Name+"/2048", func(b *testing.B) {
			b.SetBytes(4 * 2048)
			for b.Loop() {
				k.QuantizeQ8_0(q0, x)
			}
		})
		b.Run("QuantizeQ8_K/"+k.Name+"/2048", func(b *testing.B) {
			b.SetBytes(4 * 2048)
			for b.Loop() {
				k.QuantizeQ8_K(qk, x)
			}
		})
		b.Run("RMSNormScale/"+k.Name+"/2048", func(b *testing.B) {
			b.SetBytes(4 * 2048)
			for b.Loop() {
				k.RMSNormScale(x)
			}
		})
		b.Run("DotF32F16/"+k.Name+"/64", func(b *testing.B) {
			b.SetBytes(2 * 64)
			for b.Loop() {
				k.DotF32F16(x[:64], h[:64])
			}
		})
		b.Run("AxpyF16/"+k.Name+"/64", func(b *testing.B) {
			b.SetBytes(2 * 64)
			for b.Loop() {
				k.AxpyF16(x[:64], 1e-9, h[:64])
			}
		})
	}
}

// BenchmarkRowsAVX2 measures the row-group kernels (RowGroup rows × n
// columns per call, "rows") against the one-row kernels called once per
// row ("dot"), 64 blocks (2048 values) per row; the bytes are the weight
// bytes read.
func BenchmarkRowsAVX2(b *testing.B) {
	needRows(b)
	avx := avxNeed(b)
	const nb = 64
	for _, rt := range rowsTypes {
		dt := rt.dt
		rows := rt.pick(avx)
		dot := dt.pick(avx)
		r := rand.New(rand.NewPCG(12, 13))
		wStride := nb * dt.wsize
		w := make([]byte, 0, RowGroup*wStride)
		for row := 0; row < RowGroup; row++ {
			w = append(w, randWeights(r, dt, nb, 0)...)
		}
		for _, n := range []int{1, 2, 4, 8, 16, 64} {
			aStride := nb * dt.asize
			a := randActs(r, dt, nb, n, aStride, 0)
			out := make([]float32, n*RowGroup)
			b.Run(fmt.Sprintf("%s/rows/n=%d", dt.name, n), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					rows(out, RowGroup, w, wStride, a, aStride, nb, n)
				}
			})
			b.Run(fmt.Sprintf("%s/dot/n=%d", dt.name, n), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					for row := 0; row < RowGroup; row++ {
						dot(out[row*n:], w[row*wStride:], a, aStride, nb, n)
					}
				}
			})
		}
	}
}

// TestRowsAVX2Extremes runs the avx2 row-group kernels on constant quant
// bytes at the edges of the int16 ranges their sums rely on, one column
// (the n == 1 kernels) and three (see checkRowsExtremes).
func TestRowsAVX2Extremes(t *testing.T) {
	t.Parallel()
	needRows(t)
	avx := avxNeed(t)
	for _, rt := range rowsTypes {
		checkRowsExtremes(t, avx.Name, rt.dt, rt.pick(avx), []int{1, 3})
	}
}

// checkRowsExtremes runs a row-group kernel (or a tile as one) on
// constant quant bytes at the edges of the ranges (0x00, 0xff, 0x80, 0x7f,
// 0x88 weights; -128, 127, 0, -1, -127 activations: the largest sums and
// offset corrections), 1, 3 and 64 blocks and ns columns, against the
// generic dots.
func checkRowsExtremes(t *testing.T, name string, dt dotType, f RowsFunc, ns []int) {
	t.Helper()
	for _, wb := range []byte{0x00, 0xff, 0x80, 0x7f, 0x88} {
		for _, ab := range []byte{0x80, 0x7f, 0x00, 0xff, 0x81} {
			for _, nb := range []int{1, 3, 64} {
				for _, n := range ns {
					w := make([]byte, RowGroup*nb*dt.wsize)
					for i := range w {
						w[i] = wb
					}
					a := make([]byte, n*nb*dt.asize)
					for i := range a {
						a[i] = ab
					}
					for b := 0; b < RowGroup*nb; b++ {
						binary.LittleEndian.PutUint16(w[b*dt.wsize:], 0x3c00) // 1.0
					}
					for b := 0; b < n*nb; b++ {
						binary.LittleEndian.PutUint16(a[b*dt.asize:], 0x3c00)
					}
					checkRows(t, name, dt.name, f, rowsRef(dt.name), w, nb*dt.wsize, a, nb*dt.asize, nb, n, RowGroup)
				}
			}
		}
	}
}

// TestRowsAVX2Short checks the wrappers' length checks (checkRowsShort).
func TestRowsAVX2Short(t *testing.T) {
	t.Parallel()
	needRows(t)
	avx := avxNeed(t)
	for _, rt := range rowsTypes {
		checkRowsShort(t, avx.Name, rt.dt, rt.pick(avx), []int{1, 4})
	}
}

// checkRowsShort checks a row-group kernel's length checks for ns
// columns: exact-size buffers run, one element short of out, w or a
// panics with errShort.
func checkRowsShort(t *testing.T, name string, dt dotType, f RowsFunc, ns []int) {
	t.Helper()
	for _, n := range ns {
		nb, ldo, ws, as := 3, 9, 3*dt.wsize+1, 3*dt.asize+2
		outLen := (n-1)*ldo + RowGroup
		wLen := (RowGroup-1)*ws + nb*dt.wsize
		aLen := (n-1)*as + nb*dt.asize
		run := func(o, wl, al int) (err any) {
			defer func() { err = recover() }()
			f(make([]float32, o), ldo, make([]byte, wl), ws, make([]byte, al), as, nb, n)
			return nil
		}
		if err := run(outLen, wLen, aLen); err != nil {
			t.Fatalf("%s %s n=%d: exact-size buffers panicked: %v", name, dt.name, n, err)
		}
		for i, err := range []any{run(outLen-1, wLen, aLen), run(outLen, wLen-1, aLen), run(outLen, wLen, aLen-1)} {
			if err != errShort {
				t.Errorf("%s %s n=%d: buffer %d one short: got %v, want errShort", name, dt.name, n, i, err)
			}
		}
	}
}
