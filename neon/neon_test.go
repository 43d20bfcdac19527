package neon

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"

	"github.com/geisten/geist/neon/ggml"
	"golang.org/x/sys/cpu"
)

// Tolerances for the kernels whose float reductions may differ from the
// generic order (relative to the sum of the magnitudes of the terms).
// Kernels not named here must match the generic ones bit for bit.
const (
	// kquantTol: k-quant dots combine exact integer sums per super-block,
	// where the generic code accumulates 8 float lanes.
	kquantTol = 2e-6
	// floatDotTol: float32 dots and sums of squares accumulate in float32
	// vector lanes (fused multiply-add) where the generic code sums in
	// index order (in float64 for the sums of squares).
	floatDotTol = 2e-6
)

// expectedBest is the kernel set this CPU should dispatch to, from the CPU
// feature flags.
func expectedBest() string {
	if purego {
		return "generic"
	}
	switch runtime.GOARCH {
	case "arm64":
		if cpu.ARM64.HasASIMD && cpu.ARM64.HasASIMDDP {
			return "neon-dotprod"
		}
		if cpu.ARM64.HasASIMD {
			return "neon"
		}
	case "amd64":
		if hasVNNIFlags() {
			return "avx512vnni"
		}
		if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
			return "avx2"
		}
	}
	return "generic"
}

func TestDispatch(t *testing.T) {
	want := expectedBest()
	if !compiledIn(want) {
		t.Skipf("this CPU should run %q, but no such kernel set is compiled in (have %v)", want, compiled)
	}
	if env := os.Getenv(EnvVar); env != "" && byName(env) != nil {
		want = env
	}
	if got := Active().Name; got != want {
		t.Errorf("Active() = %q, want %q (available %v, GOARCH %s)", got, want, names(), runtime.GOARCH)
	}
	if av := Available(); av[len(av)-1] != Generic() {
		t.Errorf("generic is not the last of %v", names())
	}
	t.Logf("dispatched %q; available %v", Active().Name, names())
}

func TestUse(t *testing.T) {
	before := Active()
	for _, k := range Available() {
		restore, err := Use(k.Name)
		if err != nil {
			t.Fatal(err)
		}
		if Active() != k {
			t.Errorf("Use(%q): active %q", k.Name, Active().Name)
		}
		restore()
		if Active() != before {
			t.Errorf("restore after Use(%q): active %q", k.Name, Active().Name)
		}
	}
	if _, err := Use("no-such-set"); err == nil {
		t.Error("Use(no-such-set) succeeded")
	}
}

// TestRegisterFillsNil checks that every field of every available set is
// set (register fills nil ones from generic).
func TestRegisterFillsNil(t *testing.T) {
	for _, k := range Available() {
		for name, f := range dotKernels(k) {
			if f == nil {
				t.Errorf("%s: %s is nil", k.Name, name)
			}
		}
		if k.QuantizeQ8_0 == nil || k.QuantizeQ8_K == nil || k.RMSNormScale == nil || k.DotF32F16 == nil || k.AxpyF16 == nil {
			t.Errorf("%s: a vector kernel is nil", k.Name)
		}
	}
}

// others are the non-generic sets under test.
func others(t *testing.T) []*Kernels {
	var ks []*Kernels
	for _, k := range Available() {
		if k != generic {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		t.Skipf("no kernel set but generic on %s (purego=%v)", runtime.GOARCH, purego)
	}
	return ks
}

func dotKernels(k *Kernels) map[string]DotFunc {
	return map[string]DotFunc{
		"Q4_0": k.DotQ4_0Q8_0, "Q5_0": k.DotQ5_0Q8_0, "Q8_0": k.DotQ8_0Q8_0,
		"Q4_K": k.DotQ4_KQ8_K, "Q6_K": k.DotQ6_KQ8_K,
		"Q4_1": k.DotQ4_1Q8_1, "Q5_1": k.DotQ5_1Q8_1, "Q2_K": k.DotQ2_KQ8_K,
		"Q3_K": k.DotQ3_KQ8_K, "Q5_K": k.DotQ5_KQ8_K, "Q8_K": k.DotQ8_KQ8_K,
		"F32": k.DotF32, "F16": k.DotF16, "BF16": k.DotBF16,
	}
}

// dotType describes one weight type's blocks for the tests.
type dotType struct {
	name         string
	wsize, asize int // bytes per block of weights / activations
	bs           int // values per block
	pick         func(*Kernels) DotFunc
	exact        bool    // bit-identical to generic
	tol          float64 // else the relative tolerance
	scales       []int   // offsets of F16 scales in a weight block
	actK         bool    // Q8_K activations (else Q8_0)
}

var dotTypes = []dotType{
	{"Q4_0", sizeQ4_0, sizeQ8_0, 32, func(k *Kernels) DotFunc { return k.DotQ4_0Q8_0 }, true, 0, []int{0}, false},
	{"Q5_0", sizeQ5_0, sizeQ8_0, 32, func(k *Kernels) DotFunc { return k.DotQ5_0Q8_0 }, true, 0, []int{0}, false},
	{"Q8_0", sizeQ8_0, sizeQ8_0, 32, func(k *Kernels) DotFunc { return k.DotQ8_0Q8_0 }, true, 0, []int{0}, false},
	{"Q4_K", sizeQ4_K, sizeQ8_K, 256, func(k *Kernels) DotFunc { return k.DotQ4_KQ8_K }, false, kquantTol, []int{0, 2}, true},
	{"Q6_K", sizeQ6_K, sizeQ8_K, 256, func(k *Kernels) DotFunc { return k.DotQ6_KQ8_K }, false, kquantTol, []int{208}, true},
	{"Q5_K", sizeQ5_K, sizeQ8_K, 256, func(k *Kernels) DotFunc { return k.DotQ5_KQ8_K }, false, kquantTol, []int{0, 2}, true},
}

// randWeights returns nb random weight blocks with finite, moderate F16
// scales, at an odd offset inside a larger buffer.
func randWeights(r *rand.Rand, dt dotType, nb, off int) []byte {
	buf := make([]byte, off+nb*dt.wsize+7)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	w := buf[off : off+nb*dt.wsize]
	for b := 0; b < nb; b++ {
		for _, s := range dt.scales {
			binary.LittleEndian.PutUint16(w[b*dt.wsize+s:], ggml.FP32ToFP16(float32(r.NormFloat64()*0.01)))
		}
	}
	return w
}

// randActs quantizes n rows of nb blocks of random floats with the generic
// quantizer, rows aStride bytes apart, at an offset.
func randActs(r *rand.Rand, dt dotType, nb, n, aStride, off int) []byte {
	buf := make([]byte, off+(n-1)*aStride+nb*dt.asize+5)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	a := buf[off:]
	x := make([]float32, nb*dt.bs)
	for j := 0; j < n; j++ {
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		if dt.actK {
			quantizeQ8_K(a[j*aStride:], x)
		} else {
			quantizeQ8_0(a[j*aStride:], x)
		}
	}
	return a
}

// magnitude is the scale the tolerances refer to: the sum over blocks of
// the magnitudes of the terms a block's float combination adds up
// (|d·yd|·Σ|scale·q·q8| + |dmin·yd|·Σ|min·bsum| for the k-quants), so that
// cancellation inside a block does not shrink it.
func magnitude(dt dotType, w, a []byte, nb int) float64 {
	var m float64
	for b := 0; b < nb; b++ {
		x, y := w[b*dt.wsize:(b+1)*dt.wsize], a[b*dt.asize:(b+1)*dt.asize]
		yd := float64(math.Float32frombits(binary.LittleEndian.Uint32(y)))
		q8 := func(i int) float64 { return math.Abs(float64(int8(y[4+i]))) }
		switch dt.name {
		case "Q4_K":
			var s, mins float64
			for j := 0; j < 8; j++ {
				sc, mn := ggml.ScaleMinK4(j, x[4:16])
				for l := 0; l < 32; l++ {
					q := x[16+32*(j/2)+l]
					if j%2 == 1 {
						q >>= 4
					}
					s += float64(sc) * float64(q&15) * q8(32*j+l)
				}
				mins += float64(mn) * math.Abs(float64(bsum(y[4+qkK:], 2*j)+bsum(y[4+qkK:], 2*j+1)))
			}
			m += math.Abs(float64(f16at(x, 0))*yd)*s + math.Abs(float64(f16at(x, 2))*yd)*mins
		case "Q5_K":
			var s, mins float64
			for j := 0; j < 8; j++ {
				sc, mn := ggml.ScaleMinK4(j, x[4:16])
				for l := 0; l < 32; l++ {
					q := x[48+32*(j/2)+l]
					if j%2 == 1 {
						q >>= 4
					}
					v := int(q&15) | int(x[16+l]>>uint(j)&1)<<4
					s += float64(sc) * float64(v) * q8(32*j+l)
				}
				mins += float64(mn) * math.Abs(float64(bsum(y[4+qkK:], 2*j)+bsum(y[4+qkK:], 2*j+1)))
			}
			m += math.Abs(float64(f16at(x, 0))*yd)*s + math.Abs(float64(f16at(x, 2))*yd)*mins
		case "Q6_K":
			var s float64
			for j := 0; j < 16; j++ {
				for l := 0; l < 16; l++ {
					s += math.Abs(float64(int8(x[192+j]))) * 32 * q8(16*j+l)
				}
			}
			m += math.Abs(float64(f16at(x, 208))*yd) * s
		default:
			panic("magnitude: " + dt.name)
		}
	}
	return m
}

func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

const guard = float32(-12345.678)

// TestDotMatchesGeneric compares every non-generic dot kernel with the
// generic one over block counts around the vector widths, 1..9 columns,
// odd offsets and strides, with guard values around the outputs, and
// checks batch invariance: out[j] with n columns equals the n == 1 result
// of column j bit for bit.
func TestDotMatchesGeneric(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for _, k := range others(t) {
		for _, dt := range dotTypes {
			f, g := dt.pick(k), dt.pick(generic)
			nbs := []int{1, 2, 3, 4, 5, 7, 8, 9, 16, 17}
			if dt.bs == 32 {
				nbs = append(nbs, 31, 33, 64, 128)
			}
			for _, nb := range nbs {
				for n := 1; n <= 9; n++ {
					off := 1 + (nb+n)%3
					aStride := nb*dt.asize + (n % 4)
					w := randWeights(r, dt, nb, off)
					a := randActs(r, dt, nb, n, aStride, off+1)
					out := make([]float32, n+2)
					for i := range out {
						out[i] = guard
					}
					f(out[1:n+1], w, a, aStride, nb, n)
					if out[0] != guard || out[n+1] != guard {
						t.Fatalf("%s %s nb=%d n=%d: guard overwritten: %v", k.Name, dt.name, nb, n, out)
					}
					for j := 0; j < n; j++ {
						aj := a[j*aStride:]
						var one, ref [1]float32
						f(one[:], w, aj, 0, nb, 1)
						g(ref[:], w, aj, 0, nb, 1)
						got := out[1+j]
						if !sameBits(got, one[0]) {
							t.Fatalf("%s %s nb=%d n=%d col %d: batch %v != single %v", k.Name, dt.name, nb, n, j, got, one[0])
						}
						if dt.exact {
							if !sameBits(got, ref[0]) {
								t.Fatalf("%s %s nb=%d n=%d col %d: %v, generic %v", k.Name, dt.name, nb, n, j, got, ref[0])
							}
							continue
						}
						mag := magnitude(dt, w, aj, nb)
						if d := math.Abs(float64(got) - float64(ref[0])); d > dt.tol*mag+1e-30 {
							t.Fatalf("%s %s nb=%d n=%d col %d: %v, generic %v (diff %g > %g·%g)", k.Name, dt.name, nb, n, j, got, ref[0], d, dt.tol, mag)
						}
					}
				}
			}
		}
	}
}

// TestFloatDotsMatchGeneric covers DotF32 and DotF16 over lengths around
// the vector width.
func TestFloatDotsMatchGeneric(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for _, k := range others(t) {
		for _, typ := range []struct {
			name string
			size int
			pick func(*Kernels) DotFunc
		}{
			{"F32", 4, func(k *Kernels) DotFunc { return k.DotF32 }},
			{"F16", 2, func(k *Kernels) DotFunc { return k.DotF16 }},
		} {
			for _, ne := range []int{1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 100, 255, 256, 1000} {
				for n := 1; n <= 5; n++ {
					stride := ne*typ.size + 2*(n%2)
					w := make([]byte, ne*typ.size+3)[1:]
					a := make([]byte, (n-1)*stride+ne*typ.size+3)[3:]
					wv := randFloats(r, ne)
					put(w, wv, typ.size)
					for j := 0; j < n; j++ {
						put(a[j*stride:], randFloats(r, ne), typ.size)
					}
					out := make([]float32, n+2)
					out[0], out[n+1] = guard, guard
					typ.pick(k)(out[1:n+1], w, a, stride, ne, n)
					if out[0] != guard || out[n+1] != guard {
						t.Fatalf("%s %s: guard overwritten", k.Name, typ.name)
					}
					for j := 0; j < n; j++ {
						var one, ref [1]float32
						typ.pick(k)(one[:], w, a[j*stride:], 0, ne, 1)
						typ.pick(generic)(ref[:], w, a[j*stride:], 0, ne, 1)
						if !sameBits(one[0], out[1+j]) {
							t.Fatalf("%s %s ne=%d: batch %v != single %v", k.Name, typ.name, ne, out[1+j], one[0])
						}
						mag := floatMag(w, a[j*stride:], ne, typ.size)
						if d := math.Abs(float64(one[0]) - float64(ref[0])); d > floatDotTol*mag {
							t.Fatalf("%s %s ne=%d: %v, generic %v", k.Name, typ.name, ne, one[0], ref[0])
						}
					}
				}
			}
		}
	}
}

func randFloats(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func put(b []byte, x []float32, size int) {
	for i, v := range x {
		if size == 4 {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		} else {
			binary.LittleEndian.PutUint16(b[2*i:], ggml.FP32ToFP16(v))
		}
	}
}

func floatMag(w, a []byte, ne, size int) float64 {
	var m float64
	for i := 0; i < ne; i++ {
		var x, y float32
		if size == 4 {
			x = math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:]))
			y = math.Float32frombits(binary.LittleEndian.Uint32(a[4*i:]))
		} else {
			x, y = f16at(w, 2*i), f16at(a, 2*i)
		}
		m += math.Abs(float64(x) * float64(y))
	}
	return m
}

// TestQuantizeMatchesGeneric: activation quantization is bit-identical to
// the generic (ggml reference) code, including all-zero blocks and blocks
// where +max and -max tie.
func TestQuantizeMatchesGeneric(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	for _, k := range others(t) {
		for _, q := range []struct {
			name string
			bs   int
			size int
			f, g func([]byte, []float32)
		}{
			{"Q8_0", 32, sizeQ8_0, k.QuantizeQ8_0, generic.QuantizeQ8_0},
			{"Q8_K", 256, sizeQ8_K, k.QuantizeQ8_K, generic.QuantizeQ8_K},
		} {
			for nb := 1; nb <= 9; nb++ {
				for trial := 0; trial < 8; trial++ {
					x := randFloats(r, nb*q.bs+1)[1:]
					switch trial {
					case 1: // a zero block
						clear(x[:q.bs])
					case 2: // +max and -max tie, negative first
						x[3], x[q.bs-2] = -50, 50
					case 3: // positive first
						x[0], x[5] = 50, -50
					case 4: // halves that round differently by mode
						for i := range x {
							x[i] = float32(int(x[i]*8)) / 8
						}
					case 5: // large and tiny values
						for i := range x {
							x[i] *= float32(math.Pow(10, float64(i%9-4)))
						}
					}
					got := make([]byte, nb*q.size+2)
					want := make([]byte, nb*q.size+2)
					got[len(got)-1], want[len(want)-1] = 0xa5, 0xa5
					q.f(got[1:], x)
					q.g(want[1:], x)
					if string(got) != string(want) {
						for i := range got {
							if got[i] != want[i] {
								t.Fatalf("%s %s nb=%d trial %d: byte %d (block %d offset %d) = %#x, generic %#x", k.Name, q.name, nb, trial, i-1, (i-1)/q.size, (i-1)%q.size, got[i], want[i])
							}
						}
					}
				}
			}
		}
	}
}

// TestVectorMatchesGeneric covers DotF32F16, AxpyF16 (bit-identical) and
// RMSNormScale over lengths around the vector widths.
func TestVectorMatchesGeneric(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	for _, k := range others(t) {
		for _, n := range []int{0, 1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 100, 128, 129, 4096} {
			a := randFloats(r, n+1)[1:]
			b := make([]uint16, n+1)[1:]
			var mag, sq float64
			for i := range b {
				b[i] = ggml.FP32ToFP16(float32(r.NormFloat64()))
				mag += math.Abs(float64(a[i]) * float64(h2f(b[i])))
				sq += float64(a[i]) * float64(a[i])
			}
			got, want := k.DotF32F16(a, b), generic.DotF32F16(a, b)
			if d := math.Abs(float64(got) - float64(want)); d > floatDotTol*mag {
				t.Errorf("%s DotF32F16 n=%d: %v, generic %v", k.Name, n, got, want)
			}
			gs, ws := k.RMSNormScale(a), generic.RMSNormScale(a)
			if d := math.Abs(gs - ws); d > floatDotTol*sq {
				t.Errorf("%s RMSNormScale n=%d: %v, generic %v", k.Name, n, gs, ws)
			}
			outG := make([]float32, n+2)
			outW := make([]float32, n+2)
			for i := range outG {
				outG[i] = float32(r.NormFloat64())
				outW[i] = outG[i]
			}
			alpha := float32(r.NormFloat64())
			k.AxpyF16(outG[1:n+1], alpha, b)
			generic.AxpyF16(outW[1:n+1], alpha, b)
			for i := range outG {
				if !sameBits(outG[i], outW[i]) {
					t.Fatalf("%s AxpyF16 n=%d: out[%d] = %v, generic %v", k.Name, n, i-1, outG[i], outW[i])
				}
			}
		}
	}
}

// FuzzDotExact feeds arbitrary bytes as weights and activations to the
// kernels that must equal the generic ones bit for bit.
func FuzzDotExact(f *testing.F) {
	f.Add(make([]byte, 3*sizeQ8_0), uint8(1))
	f.Add([]byte("geist geist geist geist geist geist geist geist geist geist geist geist geist geist"), uint8(3))
	f.Fuzz(checkExact)
}

// TestDotExactRandomBytes runs the fuzz target's check over random bytes
// (extreme quants such as -128 and NaN or infinite scales included), for
// the platforms where the fuzzer cannot run (under qemu it cannot fork
// its workers).
func TestDotExactRandomBytes(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(15, 16))
	for i := 0; i < 400; i++ {
		data := make([]byte, r.IntN(3000))
		for j := range data {
			data[j] = byte(r.Uint32())
			if i%4 == 0 && r.IntN(3) == 0 {
				data[j] = 0x80
			}
		}
		checkExact(t, data, uint8(i))
	}
}

func checkExact(t *testing.T, data []byte, ncol uint8) {
	n := int(ncol%6) + 1
	for _, k := range Available() {
		if k == generic {
			continue
		}
		for _, dt := range dotTypes {
			if !dt.exact {
				continue
			}
			nb := len(data) / (dt.wsize + n*dt.asize)
			if nb == 0 {
				continue
			}
			w := data[:nb*dt.wsize]
			a := data[nb*dt.wsize:]
			stride := nb * dt.asize
			out := make([]float32, n)
			dt.pick(k)(out, w, a, stride, nb, n)
			for j := 0; j < n; j++ {
				var ref [1]float32
				dt.pick(generic)(ref[:], w, a[j*stride:], 0, nb, 1)
				if !sameBits(out[j], ref[0]) {
					t.Fatalf("%s %s nb=%d col %d: %v, generic %v", k.Name, dt.name, nb, j, out[j], ref[0])
				}
			}
		}
	}
}

// Benchmarks: BenchmarkDot/Q4_0/neon-dotprod/4096x1 is one weight row of
// 4096 values against 1 activation column; SetBytes counts the weight
// bytes, so MB/s reads as weight streaming speed.
func BenchmarkDot(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, dt := range dotTypes {
		for _, cols := range []int{4096} {
			nb := cols / dt.bs
			for _, n := range []int{1, 4, 8} {
				w := randWeights(r, dt, nb*64, 0)
				a := randActs(r, dt, nb, n, nb*dt.asize, 0)
				out := make([]float32, n)
				for _, k := range Available() {
					f := dt.pick(k)
					b.Run(fmt.Sprintf("%s/%s/%dx%d", dt.name, k.Name, cols, n), func(b *testing.B) {
						b.SetBytes(int64(nb * dt.wsize))
						for i := 0; i < b.N; i++ {
							row := i % 64
							f(out, w[row*nb*dt.wsize:], a, nb*dt.asize, nb, n)
						}
					})
				}
			}
		}
	}
}

func BenchmarkQuantize(b *testing.B) {
	x := randFloats(rand.New(rand.NewPCG(11, 12)), 4096)
	dst := make([]byte, 4096/256*sizeQ8_K)
	for _, k := range Available() {
		b.Run("Q8_0/"+k.Name+"/4096", func(b *testing.B) {
			b.SetBytes(4 * 4096)
			for i := 0; i < b.N; i++ {
				k.QuantizeQ8_0(dst, x)
			}
		})
		b.Run("Q8_K/"+k.Name+"/4096", func(b *testing.B) {
			b.SetBytes(4 * 4096)
			for i := 0; i < b.N; i++ {
				k.QuantizeQ8_K(dst, x)
			}
		})
	}
}

func BenchmarkVector(b *testing.B) {
	r := rand.New(rand.NewPCG(13, 14))
	x := randFloats(r, 4096)
	h := make([]uint16, 4096)
	for i := range h {
		h[i] = ggml.FP32ToFP16(x[i])
	}
	wb := make([]byte, 4*4096)
	ab := make([]byte, 4*4096)
	put(wb, x, 4)
	put(ab, x, 4)
	out := make([]float32, 4096)
	for _, k := range Available() {
		b.Run("DotF32F16/"+k.Name+"/128", func(b *testing.B) {
			b.SetBytes(2 * 128)
			for i := 0; i < b.N; i++ {
				k.DotF32F16(x[:128], h[:128])
			}
		})
		b.Run("AxpyF16/"+k.Name+"/128", func(b *testing.B) {
			b.SetBytes(2 * 128)
			for i := 0; i < b.N; i++ {
				k.AxpyF16(out[:128], 0.5, h[:128])
			}
		})
		b.Run("RMSNormScale/"+k.Name+"/4096", func(b *testing.B) {
			b.SetBytes(4 * 4096)
			for i := 0; i < b.N; i++ {
				k.RMSNormScale(x)
			}
		})
		b.Run("DotF32/"+k.Name+"/4096", func(b *testing.B) {
			b.SetBytes(4 * 4096)
			var o [1]float32
			for i := 0; i < b.N; i++ {
				k.DotF32(o[:], wb, ab, 0, 4096, 1)
			}
		})
		b.Run("DotF16/"+k.Name+"/4096", func(b *testing.B) {
			b.SetBytes(2 * 4096)
			var o [1]float32
			for i := 0; i < b.N; i++ {
				k.DotF16(o[:], wb, ab, 0, 4096, 1)
			}
		})
	}
}
