package neon

import (
	"math"

	"github.com/geisten/geist/neon/ggml"
)

// AttnBlock is the number of keys in a block of the tiled attention.
const AttnBlock = 64

// AttnTileKernels are a set's kernels for tiled attention over an F16
// cache: a tile converts each block of AttnBlock keys once to float32,
// transposed, and every query row of the tile scores all its keys with
// fused multiply-adds and adds the weighted values with fused
// multiply-adds, each output lane computed alone in one fixed order, so a
// row's results do not depend on the other rows or keys of the tile.
// GenericAttnTile gives the reference bits every set reproduces.
type AttnTileKernels struct {
	// KT sets kt[d*AttnBlock+t] = k[t*hd+d] (F16 to float32) for t <
	// AttnBlock and d < hd (a multiple of 8).
	KT func(kt []float32, k []uint16, hd int)
	// Scores sets sc[t] = s*scale for t < AttnBlock, s the fused
	// multiply-adds of q[d]*kt[d*AttnBlock+t] for d = 0, 1, ... len(q)-1
	// from 0.
	Scores func(sc, q, kt []float32, scale float32)
	// Sum sets out[i] = fma(w[t], v[t*len(out)+i], out[i]) for t = 0, 1,
	// ... len(w)-1 in order (len(out) a multiple of 64).
	Sum func(out, w, v []float32)
	// ToF32 converts F16 values to float32.
	ToF32 func(dst []float32, src []uint16)
	// Max is the largest of x (not empty, no NaN).
	Max func(x []float32) float32
	// ScoresRows is Scores for the len(q)/hd query rows q[r*hd:(r+1)*hd]
	// into sc[r*AttnBlock:(r+1)*AttnBlock], the bits of Scores for each
	// row: a set may score several rows against one load of kt.
	ScoresRows func(sc, q []float32, hd int, kt []float32, scale float32)
	// SumRows is Sum for the len(out)/hd rows out[r*hd:(r+1)*hd] with the
	// weights w[r*AttnBlock:r*AttnBlock+n] and the same values v, the bits
	// of Sum for each row (hd a multiple of 64).
	SumRows func(out []float32, hd int, w []float32, n int, v []float32)
	// ExpSum sets x[i] = e^(x[i]-m) as ExpSub and returns the sum of the
	// results in float64 in sumF64's order.
	ExpSum func(x []float32, m float32) float64
	// SumRowsF16, when the set has it, is SumRows over F16 values v (n
	// rows of hd), converted as they are read: the bits of SumRows over
	// ToF32(v), without the float32 copy. A tile of one token (decoding)
	// reads each value block once, so converting it first costs a pass
	// over the block and 16 KiB of first-level cache for nothing.
	SumRowsF16 func(out []float32, hd int, w []float32, n int, v []uint16)
	// SumRowsQ8_0, when the set has it, is SumRows over the values of a
	// Q8_0 cache, row t's hd/32 blocks at v[t*vStride:], each value
	// dequantized as DequantQ8_0 does it: the bits of DequantQ8_0 then
	// SumRows, without the float32 copy (hd a multiple of 64).
	SumRowsQ8_0 func(out []float32, hd int, w []float32, n int, v []byte, vStride int)

	// KTH, ScoresRowsH and SumRowsH, when the set has them, are attention
	// over an F16 cache in half-precision arithmetic (attnf16.go):
	// KTH sets kt[d*AttnBlock+t] = k[t*hd+d] (the halves as they are,
	// hd a multiple of 8); ScoresRowsH scores the len(q)/hd query rows of
	// q (halves, QH's: scaled) against kt into sc[r*AttnBlock:], no
	// scale; SumRowsH adds the weights w[r*AttnBlock:r*AttnBlock+n] times
	// the n value rows of v (halves, hd each) to out[r*hd:(r+1)*hd] (hd a
	// multiple of 64). Each row's bits are those of the row alone.
	KTH         func(kt, k []uint16, hd int)
	ScoresRowsH func(sc []float32, q []uint16, hd int, kt []uint16)
	SumRowsH    func(out []float32, hd int, w []float32, n int, v []uint16)
	// PreferH is whether attention over an F16 cache uses KTH,
	// ScoresRowsH and SumRowsH unless AttnF16Env says otherwise.
	PreferH bool
}

// GenericAttnTile returns the reference implementations of the tiled
// attention kernels (tests compare every set's with them).
func GenericAttnTile() *AttnTileKernels { return &genericAttnTile }

var genericAttnTile = AttnTileKernels{KT: attnKT, Scores: attnScoresT, Sum: attnSumFMA, ToF32: f16ToF32, Max: maxF32,
	ScoresRows: scoresRows(attnScoresT), SumRows: sumRows(attnSumFMA), ExpSum: expSum, SumRowsF16: sumRowsF16,
	SumRowsQ8_0: sumRowsQ8_0, KTH: attnKTH, ScoresRowsH: scoresRowsH, SumRowsH: sumRowsH}

// sumRowsQ8_0 is the reference SumRowsQ8_0: each value row dequantized,
// then each row's fused multiply-adds in Sum's order.
func sumRowsQ8_0(out []float32, hd int, w []float32, n int, v []byte, vStride int) {
	var x [32]float32
	for t := range n {
		for c := 0; c < hd/32; c++ {
			dequantQ8_0(x[:], v[t*vStride+c*sizeQ8_0:])
			for r := 0; r < len(out)/hd; r++ {
				a := w[r*AttnBlock+t]
				o := out[r*hd+c*32 : r*hd+c*32+32]
				for i, y := range x {
					o[i] = fma32(a, y, o[i])
				}
			}
		}
	}
}

// sumRowsF16 is the reference SumRowsF16: each row's fused multiply-adds
// in Sum's order over the converted values.
func sumRowsF16(out []float32, hd int, w []float32, n int, v []uint16) {
	v = v[:n*hd]
	for r := 0; r < len(out)/hd; r++ {
		o := out[r*hd : (r+1)*hd]
		for t, a := range w[r*AttnBlock : r*AttnBlock+n] {
			for i, h := range v[t*hd : (t+1)*hd] {
				o[i] = fma32(a, ggml.FP16ToFP32(h), o[i])
			}
		}
	}
}

// scoresRows is ScoresRows as one call of scores per row.
func scoresRows(scores func(sc, q, kt []float32, scale float32)) func(sc, q []float32, hd int, kt []float32, scale float32) {
	return func(sc, q []float32, hd int, kt []float32, scale float32) {
		for r := 0; r < len(q)/hd; r++ {
			scores(sc[r*AttnBlock:(r+1)*AttnBlock], q[r*hd:(r+1)*hd], kt, scale)
		}
	}
}

// sumRows is SumRows as one call of sum per row.
func sumRows(sum func(out, w, v []float32)) func(out []float32, hd int, w []float32, n int, v []float32) {
	return func(out []float32, hd int, w []float32, n int, v []float32) {
		for r := 0; r < len(out)/hd; r++ {
			sum(out[r*hd:(r+1)*hd], w[r*AttnBlock:r*AttnBlock+n], v)
		}
	}
}

// ExpSubSum sets x[i] = e^(x[i]-m) as ExpSub and returns their sum in
// float64 in sumF64's order (one online-softmax block's weights and their
// sum; the same bits on every set).
func ExpSubSum(x []float32, m float32) float64 {
	if a := Active().AttnTile; a != nil && a.ExpSum != nil {
		return a.ExpSum(x, m)
	}
	return expSubThenSum(x, m)
}

// expSubThenSum is ExpSum as the active set's ExpSub and sumF64.
func expSubThenSum(x []float32, m float32) float64 {
	ExpSub(x, m)
	return sumF64(x)
}

func expSum(x []float32, m float32) float64 {
	expSub(x, m)
	return sumF64(x)
}

// sumF64 is the sum of x in float64: four running sums of every fourth
// element, the tail into the first, combined as (s0+s1)+(s2+s3), one order
// for a given length.
func sumF64(x []float32) float64 {
	var s [4]float64
	return sumF64From(&s, x)
}

// sumF64From is sumF64 continued from the running sums s.
func sumF64From(s *[4]float64, x []float32) float64 {
	i := 0
	for ; i+4 <= len(x); i += 4 {
		s[0] += float64(x[i])
		s[1] += float64(x[i+1])
		s[2] += float64(x[i+2])
		s[3] += float64(x[i+3])
	}
	for ; i < len(x); i++ {
		s[0] += float64(x[i])
	}
	return (s[0] + s[1]) + (s[2] + s[3])
}

func maxF32(x []float32) float32 {
	m := x[0]
	for _, v := range x[1:] {
		m = max(m, v)
	}
	return m
}

func attnKT(kt []float32, k []uint16, hd int) {
	k = k[:AttnBlock*hd]
	kt = kt[:AttnBlock*hd]
	for t := 0; t < AttnBlock; t++ {
		for d, h := range k[t*hd : (t+1)*hd] {
			kt[d*AttnBlock+t] = ggml.FP16ToFP32(h)
		}
	}
}

func attnScoresT(sc, q, kt []float32, scale float32) {
	sc = sc[:AttnBlock]
	kt = kt[:len(q)*AttnBlock]
	var acc [AttnBlock]float32
	for d, x := range q {
		row := kt[d*AttnBlock : (d+1)*AttnBlock]
		for t := range acc {
			acc[t] = fma32(x, row[t], acc[t])
		}
	}
	for t := range sc {
		sc[t] = acc[t] * scale
	}
}

// fma32 is a float32 fused multiply-add through float64 (the product of
// float32 operands is exact there; rounding the float64 sum again to
// float32 can differ from a single rounding only when the float64 result
// falls exactly halfway between two float32 values, which the reference's
// tests do not meet). No set runs these loops: they are the reference.
func fma32(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }

func attnSumFMA(out, w, v []float32) {
	hd := len(out)
	v = v[:len(w)*hd]
	for t, a := range w {
		row := v[t*hd : (t+1)*hd]
		for i, x := range row {
			out[i] = fma32(a, x, out[i])
		}
	}
}

func f16ToF32(dst []float32, src []uint16) {
	src = src[:len(dst)]
	for i, h := range src {
		dst[i] = ggml.FP16ToFP32(h)
	}
}
