//go:build amd64 && !purego

package neon

import (
	"encoding/binary"
	"errors"
	"math"
)

// The AVX2 kernels (dot_amd64.s, float_amd64.s, quantize_amd64.s) work on
// whole blocks and at most maxCols activation columns; the wrappers here
// check every length, split larger n and do the float tails, so the
// assembly never reads or writes outside the slices.
//
// The Q4_0/Q5_0/Q8_0 dots and both quantizers equal the generic code bit
// for bit for any input bytes. One precondition the generic code does not
// have, as in ggml's AVX code: DotQ6_KQ8_K takes Q6_K's -32 offset through
// the Q8_K bsums, so they must be the sums of their quants (QuantizeQ8_K
// writes them so).

const (
	maxCols      = 8 // block dots: one accumulator per column, Y8..Y15
	maxFloatCols = 2 // float dots: four accumulators per column
)

var errShort = errors.New("neon: avx2: buffer too short for the kernel arguments")

//go:noescape
func dotQ4_0Q8_0AVX2(out *float32, w, a *byte, aStride, nb, n int)

//go:noescape
func dotQ5_0Q8_0AVX2(out *float32, w, a *byte, aStride, nb, n int)

//go:noescape
func dotQ8_0Q8_0AVX2(out *float32, w, a *byte, aStride, nb, n int)

//go:noescape
func dotQ4_0Q8_0x1AVX2(out *float32, w, a *byte, aStride, nb, n int)

//go:noescape
func dotQ5_0Q8_0x1AVX2(out *float32, w, a *byte, aStride, nb, n int)

//go:noescape
func dotQ8_0Q8_0x1AVX2(out *float32, w, a *byte, aStride, nb, n int)

//go:noescape
func dotQ4_KQ8_KAVX2(out *float32, w, a *byte, aStride, nb, n int)

//go:noescape
func dotQ6_KQ8_KAVX2(out *float32, w, a *byte, aStride, nb, n int)

//go:noescape
func dotF32AVX2(out *float32, w, a *byte, aStride, n8, n int)

//go:noescape
func dotF16AVX2(out *float32, w, a *byte, aStride, n8, n int)

//go:noescape
func dotF32F16AVX2(a *float32, b *uint16, n8 int) float32

//go:noescape
func axpyF16AVX2(out *float32, alpha float32, b *uint16, n8 int)

//go:noescape
func attnScoresAVX2(sc *float32, q *float32, k *uint16, n8, rows int, scale float32)

//go:noescape
func attnSumAVX2(out *float32, w *float32, v *uint16, n8, rows int)

//go:noescape
func siluMulAVX2(gate, up *float32, n8 int)

//go:noescape
func expSubAVX2(x *float32, n8 int, m float32)

//go:noescape
func addAVX2(dst, src *float32, n8 int)

//go:noescape
func scaleMulAVX2(out, x, w *float32, n8 int, scale float32)

//go:noescape
func toF16AVX2(dst *uint16, src *float32, n8 int)

//go:noescape
func sumSquaresAVX2(x *float32, n8 int) float64

//go:noescape
func quantizeQ8_0AVX2(dst *byte, x *float32, nb int)

//go:noescape
func quantizeQ8_KAVX2(dst *byte, x *float32, nb int)

type asmDot func(out *float32, w, a *byte, aStride, nb, n int)

// checkCols panics (a caller bug, like an index out of range) unless w
// holds wBytes bytes and a holds n columns of aBytes bytes aStride apart.
func checkCols(out []float32, w, a []byte, aStride, wBytes, aBytes, n int) {
	if n < 1 || len(out) < n || wBytes < 0 || len(w) < wBytes || (n > 1 && aStride < aBytes) ||
		(n > 1 && (len(a)-aBytes)/(n-1) < aStride) || len(a) < aBytes {
		panic(errShort)
	}
}

// blockDot runs a block kernel over n columns in groups of maxCols, and
// the one-column kernel k1 on a single column (the same results, fewer
// instructions).
func blockDot(k, k1 asmDot, out []float32, w, a []byte, aStride, nb, n, wSize, aSize int) {
	if nb < 0 || nb > math.MaxInt/aSize {
		panic(errShort)
	}
	checkCols(out, w, a, aStride, nb*wSize, nb*aSize, n)
	if nb == 0 {
		clear(out[:n])
		return
	}
	for j := 0; j < n; j += maxCols {
		if m := min(maxCols, n-j); m > 1 {
			k(&out[j], &w[0], &a[j*aStride], aStride, nb, m)
		} else {
			k1(&out[j], &w[0], &a[j*aStride], aStride, nb, 1)
		}
	}
}

func dotQ4_0Q8_0avx2(out []float32, w, a []byte, aStride, nb, n int) {
	blockDot(dotQ4_0Q8_0AVX2, dotQ4_0Q8_0x1AVX2, out, w, a, aStride, nb, n, sizeQ4_0, sizeQ8_0)
}

func dotQ5_0Q8_0avx2(out []float32, w, a []byte, aStride, nb, n int) {
	blockDot(dotQ5_0Q8_0AVX2, dotQ5_0Q8_0x1AVX2, out, w, a, aStride, nb, n, sizeQ5_0, sizeQ8_0)
}

func dotQ8_0Q8_0avx2(out []float32, w, a []byte, aStride, nb, n int) {
	blockDot(dotQ8_0Q8_0AVX2, dotQ8_0Q8_0x1AVX2, out, w, a, aStride, nb, n, sizeQ8_0, sizeQ8_0)
}

func dotQ4_KQ8_Kavx2(out []float32, w, a []byte, aStride, nb, n int) {
	blockDot(dotQ4_KQ8_KAVX2, dotQ4_KQ8_KAVX2, out, w, a, aStride, nb, n, sizeQ4_K, sizeQ8_K)
}

func dotQ6_KQ8_Kavx2(out []float32, w, a []byte, aStride, nb, n int) {
	blockDot(dotQ6_KQ8_KAVX2, dotQ6_KQ8_KAVX2, out, w, a, aStride, nb, n, sizeQ6_K, sizeQ8_K)
}

// floatDot runs a float kernel over the 8-element chunks of n columns and
// adds each column's tail (nelem%8 elements) in index order.
func floatDot(k asmDot, elem func(b []byte, i int) float32, out []float32, w, a []byte, aStride, nelem, n, size int) {
	if nelem < 0 || nelem > math.MaxInt/size {
		panic(errShort)
	}
	checkCols(out, w, a, aStride, nelem*size, nelem*size, n)
	n8 := nelem / 8
	if n8 == 0 {
		clear(out[:n])
	} else {
		for j := 0; j < n; j += maxFloatCols {
			k(&out[j], &w[0], &a[j*aStride], aStride, n8, min(maxFloatCols, n-j))
		}
	}
	for j := 0; j < n; j++ {
		col := a[j*aStride:]
		s := out[j]
		for i := 8 * n8; i < nelem; i++ {
			s += float32(elem(w, i) * elem(col, i))
		}
		out[j] = s
	}
}

func f32elem(b []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
}

func f16elem(b []byte, i int) float32 { return h2f(binary.LittleEndian.Uint16(b[2*i:])) }

func dotF32avx2(out []float32, w, a []byte, aStride, nelem, n int) {
	floatDot(dotF32AVX2, f32elem, out, w, a, aStride, nelem, n, 4)
}

func dotF16avx2(out []float32, w, a []byte, aStride, nelem, n int) {
	floatDot(dotF16AVX2, f16elem, out, w, a, aStride, nelem, n, 2)
}

func dotF32F16avx2(a []float32, b []uint16) float32 {
	b = b[:len(a)]
	n8 := len(a) / 8
	var sum float32
	if n8 > 0 {
		sum = dotF32F16AVX2(&a[0], &b[0], n8)
	}
	for i := 8 * n8; i < len(a); i++ {
		sum += float32(a[i] * h2f(b[i]))
	}
	return sum
}

func axpyF16avx2(out []float32, alpha float32, b []uint16) {
	b = b[:len(out)]
	n8 := len(out) / 8
	if n8 > 0 {
		axpyF16AVX2(&out[0], alpha, &b[0], n8)
	}
	for i := 8 * n8; i < len(out); i++ {
		out[i] += float32(alpha * h2f(b[i]))
	}
}

func rmsNormScaleavx2(x []float32) float64 {
	n8 := len(x) / 8
	var sum float64
	if n8 > 0 {
		sum = sumSquaresAVX2(&x[0], n8)
	}
	for _, v := range x[8*n8:] {
		sum += float64(float32(v * v))
	}
	return sum
}

func quantizeQ8_0avx2(dst []byte, x []float32) {
	nb := len(x) / 32
	if nb == 0 {
		return
	}
	_ = dst[nb*sizeQ8_0-1]
	quantizeQ8_0AVX2(&dst[0], &x[0], nb)
}

func quantizeQ8_Kavx2(dst []byte, x []float32) {
	nb := len(x) / qkK
	if nb == 0 {
		return
	}
	_ = dst[nb*sizeQ8_K-1]
	quantizeQ8_KAVX2(&dst[0], &x[0], nb)
}

// attnScoresavx2 is AttnScores for heads of a multiple of 8 values (else
// the one-row loop).
func attnScoresavx2(sc, q []float32, k []uint16, scale float32) {
	hd := len(q)
	if hd%8 != 0 || hd == 0 {
		for t := range sc {
			sc[t] = dotF32F16avx2(q, k[t*hd:(t+1)*hd]) * scale
		}
		return
	}
	if len(sc) == 0 {
		return
	}
	_ = k[len(sc)*hd-1]
	attnScoresAVX2(&sc[0], &q[0], &k[0], hd/8, len(sc), scale)
}

// attnSumavx2 is AttnSum for heads of a multiple of 8 values (else the
// one-row loop).
func attnSumavx2(out, w []float32, v []uint16) {
	hd := len(out)
	if hd%8 != 0 || hd == 0 {
		for t, a := range w {
			axpyF16avx2(out, a, v[t*hd:(t+1)*hd])
		}
		return
	}
	if len(w) == 0 {
		return
	}
	_ = v[len(w)*hd-1]
	attnSumAVX2(&out[0], &w[0], &v[0], hd/8, len(w))
}

func siluMulavx2(gate, up []float32) {
	up = up[:len(gate)]
	n8 := len(gate) / 8
	if n8 > 0 {
		siluMulAVX2(&gate[0], &up[0], n8)
	}
	siluMul(gate[8*n8:], up[8*n8:])
}

func softmaxavx2(x []float32) { softmax(x, expSubavx2) }

func expSubavx2(x []float32, m float32) {
	n8 := len(x) / 8
	if n8 > 0 {
		expSubAVX2(&x[0], n8, m)
	}
	expSub(x[8*n8:], m)
}

func addavx2(dst, src []float32) {
	src = src[:len(dst)]
	if n8 := len(dst) / 8; n8 > 0 {
		addAVX2(&dst[0], &src[0], n8)
	}
	add(dst[len(dst)/8*8:], src[len(dst)/8*8:])
}

func scaleMulavx2(out, x, w []float32, scale float32) {
	x, w = x[:len(out)], w[:len(out)]
	if n8 := len(out) / 8; n8 > 0 {
		scaleMulAVX2(&out[0], &x[0], &w[0], n8, scale)
	}
	t := len(out) / 8 * 8
	scaleMul(out[t:], x[t:], w[t:], scale)
}

func toF16avx2(dst []uint16, src []float32) {
	src = src[:len(dst)]
	if n8 := len(dst) / 8; n8 > 0 {
		toF16AVX2(&dst[0], &src[0], n8)
	}
	toF16(dst[len(dst)/8*8:], src[len(dst)/8*8:])
}

//go:noescape
func deltaRowAVX2(S, R, q, k *float32, n int, v, beta, decay float32) float32

// deltaRowavx2 is DeltaRow with AVX2 and FMA for rows of a multiple of 16
// values (the generic order otherwise).
func deltaRowavx2(S, R, q, k []float32, v, beta, decay float32) float32 {
	n := len(S)
	if n == 0 || n%16 != 0 {
		return deltaRow(S, R, q, k, v, beta, decay)
	}
	R, q, k = R[:n], q[:n], k[:n]
	return deltaRowAVX2(&S[0], &R[0], &q[0], &k[0], n, v, beta, decay)
}

//go:noescape
func deltaRow4AVX2(S, R, q, k *float32, n int, v *float32, beta, decay float32, o *float32)

// deltaRowsavx2 is DeltaRows with AVX2 and FMA: four rows at a time by
// deltaRow4AVX2 (each row deltaRowAVX2's bits), the rest one by one.
func deltaRowsavx2(S, R, q, k, v, o []float32, beta, decay float32) {
	n, rows := len(q), len(v)
	if n == 0 || n%16 != 0 {
		rowsOf(deltaRow, S, R, q, k, v, o, beta, decay)
		return
	}
	S, R, k, o = S[:rows*n], R[:rows*n], k[:n], o[:rows]
	r := 0
	for ; r+4 <= rows; r += 4 {
		deltaRow4AVX2(&S[r*n], &R[r*n], &q[0], &k[0], n, &v[r], beta, decay, &o[r])
	}
	for ; r < rows; r++ {
		o[r] = deltaRowAVX2(&S[r*n], &R[r*n], &q[0], &k[0], n, v[r], beta, decay)
	}
}

//go:noescape
func ssmStepAVX2(dst, src, x, B, C, y *float32, rows, n int, dt, dA float32)

//go:noescape
func ssmDecayAVX2(dst, src, x, B *float32, rows, n int, dt, dA float32)

// ssmStepavx2 is SSMStep with AVX2 (no FMA: the generic bits); see
// ssmRows.
func ssmStepavx2(dst, src, x, B, C, y []float32, dt, dA float32) {
	ssmRows(dst, src, x, B, C, y, dt, dA, ssmStepAVX2, ssmDecayAVX2)
}
