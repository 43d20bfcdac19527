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
}

// GenericAttnTile returns the reference implementations of the tiled
// attention kernels (tests compare every set's with them).
func GenericAttnTile() *AttnTileKernels { return &genericAttnTile }

var genericAttnTile = AttnTileKernels{KT: attnKT, Scores: attnScoresT, Sum: attnSumFMA, ToF32: f16ToF32, Max: maxF32}

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
