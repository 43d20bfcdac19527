package neon

import (
	"encoding/binary"
	"math"

	"github.com/geisten/geist/neon/ggml"
)

// Short names for the block sizes defined once in neon/ggml (the kernel
// files, assembly wrappers and the arm64 generator's output use them).
const (
	qkK      = ggml.QK_K
	sizeQ4_0 = ggml.SizeQ4_0
	sizeQ4_1 = ggml.SizeQ4_1
	sizeQ5_0 = ggml.SizeQ5_0
	sizeQ5_1 = ggml.SizeQ5_1
	sizeQ8_0 = ggml.SizeQ8_0
	sizeQ8_1 = ggml.SizeQ8_1
	sizeQ2_K = ggml.SizeQ2_K
	sizeQ3_K = ggml.SizeQ3_K
	sizeQ4_K = ggml.SizeQ4_K
	sizeQ5_K = ggml.SizeQ5_K
	sizeQ6_K = ggml.SizeQ6_K
	sizeQ8_K = ggml.SizeQ8_K
)

// generic is the pure-Go reference set.
var generic = &Kernels{
	Name:         "generic",
	DotQ4_0Q8_0:  func(out []float32, w, a []byte, s, nb, n int) { cols(dotQ4_0Q8_0, out, w, a, s, nb, n) },
	DotQ5_0Q8_0:  func(out []float32, w, a []byte, s, nb, n int) { cols(dotQ5_0Q8_0, out, w, a, s, nb, n) },
	DotQ8_0Q8_0:  func(out []float32, w, a []byte, s, nb, n int) { cols(dotQ8_0Q8_0, out, w, a, s, nb, n) },
	DotQ4_KQ8_K:  func(out []float32, w, a []byte, s, nb, n int) { cols(dotQ4_KQ8_K, out, w, a, s, nb, n) },
	DotQ6_KQ8_K:  func(out []float32, w, a []byte, s, nb, n int) { cols(dotQ6_KQ8_K, out, w, a, s, nb, n) },
	DotQ4_1Q8_1:  func(out []float32, w, a []byte, s, nb, n int) { cols(dotQ4_1Q8_1, out, w, a, s, nb, n) },
	DotQ5_1Q8_1:  func(out []float32, w, a []byte, s, nb, n int) { cols(dotQ5_1Q8_1, out, w, a, s, nb, n) },
	DotQ2_KQ8_K:  func(out []float32, w, a []byte, s, nb, n int) { cols(dotQ2_KQ8_K, out, w, a, s, nb, n) },
	DotQ3_KQ8_K:  func(out []float32, w, a []byte, s, nb, n int) { cols(dotQ3_KQ8_K, out, w, a, s, nb, n) },
	DotQ5_KQ8_K:  func(out []float32, w, a []byte, s, nb, n int) { cols(dotQ5_KQ8_K, out, w, a, s, nb, n) },
	DotQ8_KQ8_K:  func(out []float32, w, a []byte, s, nb, n int) { cols(dotQ8_KQ8_K, out, w, a, s, nb, n) },
	DotF32:       func(out []float32, w, a []byte, s, ne, n int) { cols(dotF32, out, w, a, s, ne, n) },
	DotF16:       func(out []float32, w, a []byte, s, ne, n int) { cols(dotF16, out, w, a, s, ne, n) },
	DotBF16:      func(out []float32, w, a []byte, s, ne, n int) { cols(dotBF16, out, w, a, s, ne, n) },
	QuantizeQ8_0: quantizeQ8_0,
	QuantizeQ8_K: quantizeQ8_K,
	RMSNormScale: rmsNormScale,
	DotF32F16:    dotF32F16,
	AxpyF16:      axpyF16,
	AttnScores:   attnScores,
	AttnSum:      attnSum,
	AttnSumF32:   attnSumF32,
	DequantQ8_0:  dequantQ8_0,
	ScoresQ8_0:   scoresQ8_0,
	TransposeV8:  transposeV8,
	SumV8:        sumV8,
	PreferV8:     true, // 3-4x the float sums' speed (BenchmarkAttnValuesQ8)
	SiLUMul:      siluMul,
	DeltaRow:     deltaRow,
	DeltaRows:    deltaRows,
	SSMStep:      ssmStep,
	Softmax:      softmaxGeneric,
	ExpSub:       expSub,
	Add:          add,
	ScaleMul:     scaleMul,
	ToF16:        toF16,
}

// attnScores and attnSum are the generic attention loops: the one-row
// kernels row after row.
func attnScores(sc, q []float32, k []uint16, scale float32) {
	hd := len(q)
	for t := range sc {
		sc[t] = dotF32F16(q, k[t*hd:(t+1)*hd]) * scale
	}
}

func attnSum(out, w []float32, v []uint16) {
	hd := len(out)
	for t, a := range w {
		axpyF16(out, a, v[t*hd:(t+1)*hd])
	}
}

func attnSumF32(out, w, v []float32) {
	hd := len(out)
	v = v[:len(w)*hd]
	for t, a := range w {
		row := v[t*hd : (t+1)*hd]
		for i, x := range row {
			out[i] += float32(a * x) // rounded before the addition: no fused multiply-add
		}
	}
}

// genericRows is the reference of a RowsFunc: the generic one-row dot for
// each of the RowGroup rows and n columns.
func genericRows(dot func(w, a []byte, nb int) float32) RowsFunc {
	return func(out []float32, ldo int, w []byte, wStride int, a []byte, aStride, nb, n int) {
		for j := 0; j < n; j++ {
			for r := 0; r < RowGroup; r++ {
				out[j*ldo+r] = dot(w[r*wStride:], a[j*aStride:], nb)
			}
		}
	}
}

// GenericRows returns the reference implementations of the row-group
// kernels, by weight type name ("Q4_0", "Q5_0", "Q8_0"), for tests.
func GenericRows(name string) RowsFunc {
	switch name {
	case "Q4_0":
		return genericRows(dotQ4_0Q8_0)
	case "Q5_0":
		return genericRows(dotQ5_0Q8_0)
	case "Q8_0":
		return genericRows(dotQ8_0Q8_0)
	}
	return nil
}

// cols applies a one-column dot product to n activation columns.
func cols(dot func(w, a []byte, nb int) float32, out []float32, w, a []byte, aStride, nb, n int) {
	out = out[:n]
	for j := range out {
		out[j] = dot(w, a[j*aStride:], nb)
	}
}

// f16at and h2f are neon's short names for ggml.F16At and
// ggml.FP16ToFP32.
func f16at(b []byte, off int) float32 { return ggml.F16At(b, off) }

func h2f(h uint16) float32 { return ggml.FP16ToFP32(h) }

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// quantizeQ8_0 is ggml's quantize_row_q8_0_ref: d = amax/127, q =
// roundf(x/d) (ties away from zero).
func quantizeQ8_0(dst []byte, src []float32) {
	nb := len(src) / 32
	_ = dst[nb*sizeQ8_0-1]
	for i := 0; i < nb; i++ {
		x := src[i*32 : i*32+32]
		y := dst[i*sizeQ8_0 : (i+1)*sizeQ8_0]
		var amax float32
		for _, v := range x {
			if a := abs32(v); a > amax {
				amax = a
			}
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(y, ggml.FP32ToFP16(d))
		for j := 0; j < 32; j++ {
			y[2+j] = byte(int8(math.Round(float64(float32(x[j] * id)))))
		}
	}
}

// quantizeQ8_K is ggml's quantize_row_q8_K_ref: iscale = -127/max,
// nearest_int rounding (ties to even), d = 1/iscale, and the sums of each
// 16 quants in bsums.
func quantizeQ8_K(dst []byte, src []float32) {
	nb := len(src) / qkK
	_ = dst[nb*sizeQ8_K-1]
	for i := 0; i < nb; i++ {
		x := src[i*qkK : (i+1)*qkK]
		y := dst[i*sizeQ8_K : (i+1)*sizeQ8_K]
		var max, amax float32
		for _, v := range x {
			if a := abs32(v); a > amax {
				amax, max = a, v
			}
		}
		if amax == 0 {
			clear(y)
			continue
		}
		iscale := -127 / max
		qs := y[4 : 4+qkK]
		for j, v := range x {
			qs[j] = byte(int8(min(127, ggml.NearestInt(float32(iscale*v)))))
		}
		for j := 0; j < qkK/16; j++ {
			var sum int32
			for _, q := range qs[16*j : 16*j+16] {
				sum += int32(int8(q))
			}
			binary.LittleEndian.PutUint16(y[4+qkK+2*j:], uint16(int16(sum)))
		}
		binary.LittleEndian.PutUint32(y, math.Float32bits(1/iscale))
	}
}

// rmsNormScale returns the sum of squares of x: each square rounded to
// float32, accumulated in float64 in index order (ggml's rms_norm).
func rmsNormScale(x []float32) float64 {
	var sum float64
	for _, v := range x {
		sum += float64(float32(v * v))
	}
	return sum
}

// dotF32F16 is the dot product of float32 a and F16 b (len(a) elements):
// each product rounded to float32, accumulated in float32 in index order.
func dotF32F16(a []float32, b []uint16) float32 {
	b = b[:len(a)]
	var sum float32
	for i, x := range a {
		sum += float32(x * h2f(b[i]))
	}
	return sum
}

// axpyF16 adds alpha·b (F16) to out: out[i] += float32(alpha*b[i]).
func axpyF16(out []float32, alpha float32, b []uint16) {
	b = b[:len(out)]
	for i := range out {
		out[i] += float32(alpha * h2f(b[i]))
	}
}

// GenericTile returns the reference implementation of the tile kernels, by
// weight type name ("Q4_0", "Q5_0", "Q8_0"), for tests: the packed format
// written and read in Go, the float steps those of the generic one-row
// dots.
func GenericTile(name string) *Tile {
	var o int32
	var wsize int
	var quants func(w []byte, u *[32]int32)
	switch name {
	case "Q4_0":
		wsize = sizeQ4_0
		o = 8
		quants = func(w []byte, u *[32]int32) {
			for j := 0; j < 16; j++ {
				u[j], u[j+16] = int32(w[2+j]&0x0f), int32(w[2+j]>>4)
			}
		}
	case "Q5_0":
		wsize = sizeQ5_0
		o = 16
		quants = func(w []byte, u *[32]int32) {
			qh := binary.LittleEndian.Uint32(w[2:])
			for j := 0; j < 16; j++ {
				u[j] = int32(w[6+j]&0x0f) | int32(qh>>uint(j)&1)<<4
				u[j+16] = int32(w[6+j]>>4) | int32(qh>>uint(j+16)&1)<<4
			}
		}
	case "Q8_0":
		wsize = sizeQ8_0
		o = 128
		quants = func(w []byte, u *[32]int32) {
			for j := 0; j < 32; j++ {
				u[j] = int32(w[2+j] ^ 0x80)
			}
		}
	default:
		return nil
	}
	pack := func(dst, a []byte, aStride, nb, n int) {
		for b := 0; b < nb; b++ {
			for j := 0; j < n; j++ {
				e, y := dst[(b*n+j)*TilePackSize:], a[j*aStride+b*sizeQ8_0:]
				copy(e[:32], y[2:34])
				var s int32
				for _, q := range y[2:34] {
					s += int32(int8(q))
				}
				binary.LittleEndian.PutUint32(e[32:], uint32(-o*s))
				binary.LittleEndian.PutUint32(e[36:], math.Float32bits(f16at(y, 0)))
			}
		}
	}
	mul := func(out []float32, ldo int, w []byte, wStride int, pack []byte, nb, n int) {
		var u [32]int32
		for j := 0; j < n; j++ {
			for r := 0; r < RowGroup; r++ {
				var sumf float32
				for b := 0; b < nb; b++ {
					x, e := w[r*wStride+b*wsize:], pack[(b*n+j)*TilePackSize:]
					quants(x, &u)
					sumi := int32(binary.LittleEndian.Uint32(e[32:]))
					for i := 0; i < 32; i++ {
						sumi += u[i] * int32(int8(e[i]))
					}
					dw, da := f16at(x, 0), math.Float32frombits(binary.LittleEndian.Uint32(e[36:]))
					if name == "Q4_0" {
						sumf += float32(float32(sumi) * dw * da)
					} else {
						sumf += float32(float32(sumi) * (dw * da))
					}
				}
				out[j*ldo+r] = sumf
			}
		}
	}
	return &Tile{Pack: pack, Mul: mul}
}
