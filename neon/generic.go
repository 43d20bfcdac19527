package neon

import (
	"encoding/binary"
	"math"
)

// Block sizes in bytes (ggml-common.h); QK_K values per k-quant super-block.
const (
	qkK      = 256
	sizeQ4_0 = 2 + 16
	sizeQ4_1 = 2 + 2 + 16
	sizeQ5_0 = 2 + 4 + 16
	sizeQ5_1 = 2 + 2 + 4 + 16
	sizeQ8_0 = 2 + 32
	sizeQ8_1 = 2 + 2 + 32
	sizeQ2_K = qkK/16 + qkK/4 + 2 + 2
	sizeQ3_K = qkK/8 + qkK/4 + 12 + 2
	sizeQ4_K = 2 + 2 + 12 + qkK/2
	sizeQ5_K = 2 + 2 + 12 + qkK/8 + qkK/2
	sizeQ6_K = qkK/2 + qkK/4 + qkK/16 + 2
	sizeQ8_K = 4 + qkK + qkK/16*2
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

func f16at(b []byte, off int) float32 {
	return h2f(binary.LittleEndian.Uint16(b[off:]))
}

// h2f converts half-precision bits to float32 by table lookup.
func h2f(h uint16) float32 { return fp16Table[h] }

// fp16Table maps every half bit pattern to its float32 value (ggml's
// ggml_table_f32_f16): computed at initialisation, read-only after.
var fp16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = fp16ToF32(uint16(i))
	}
	return &t
}()

// fp16ToF32 converts IEEE half bits to float32 exactly.
func fp16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	}
	e := uint32(113)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
}

// f32ToFP16 converts f to half bits, round to nearest even (ggml's
// GGML_FP32_TO_FP16); a NaN becomes the quiet NaN 0x7E00 with f's sign.
func f32ToFP16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e >= 1 {
		h := uint32(e)<<10 | mant>>13
		rem := mant & 0x1fff
		if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	if exp == 0 {
		return sign
	}
	s := uint32(14 - e)
	if s > 24 {
		return sign
	}
	m24 := mant | 0x800000
	q := m24 >> s
	rem := m24 & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rem > half || (rem == half && q&1 == 1) {
		q++
	}
	return sign | uint16(q)
}

func bf16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// scaleMinK4 returns the j-th 6-bit scale and min of a Q4_K/Q5_K block
// (ggml's get_scale_min_k4).
func scaleMinK4(j int, q []byte) (sc, m byte) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// q3kScales unpacks Q3_K's twelve bytes of 6-bit scales into 16 values,
// already minus 32.
func q3kScales(s []byte, out *[16]int8) {
	const kmask1, kmask2 = 0x03030303, 0x0f0f0f0f
	a0 := binary.LittleEndian.Uint32(s[0:])
	a1 := binary.LittleEndian.Uint32(s[4:])
	tmp := binary.LittleEndian.Uint32(s[8:])
	var aux [4]uint32
	aux[2] = (a0>>4)&kmask2 | ((tmp>>4)&kmask1)<<4
	aux[3] = (a1>>4)&kmask2 | ((tmp>>6)&kmask1)<<4
	aux[0] = a0&kmask2 | ((tmp>>0)&kmask1)<<4
	aux[1] = a1&kmask2 | ((tmp>>2)&kmask1)<<4
	for i := 0; i < 16; i++ {
		out[i] = int8(aux[i/4]>>(8*uint(i%4))) - 32
	}
}

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
		binary.LittleEndian.PutUint16(y, f32ToFP16(d))
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
			qs[j] = byte(int8(min(127, nearestInt(float32(iscale*v)))))
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

// nearestInt is ggml's nearest_int (round half to even for |f| <= 4194303).
func nearestInt(f float32) int32 {
	v := float32(f) + 12582912
	return int32(math.Float32bits(v)&0x7fffff) - 0x400000
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
