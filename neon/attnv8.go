package neon

import (
	"math"
	"os"
	"sync/atomic"

	"github.com/geisten/geist/neon/ggml"
)

// The value sum of attention over a Q8_0 cache in integer arithmetic.
//
// A block of AttnBlock positions of values (Q8_0 rows: per position and
// per 32 channels a half-precision scale dv and 32 int8 quants) is
// transposed once per tile by TransposeV8 into groups of 32 positions:
// for group g and channel block c, eight quads of four positions, each
// quad 32 channels of four consecutive positions' quants (128 bytes, the
// operand of a four-way integer dot product: SDOT, VPDPBUSD), and the 32
// positions' scales as float32 (dv, zero past the block's end).
//
// SumV8 then adds one query row's weighted values: for each group and
// channel block, the row's softmax weights times the values' scales,
// p[t] = w[t]*dv[t] (float32 products, w zero outside the row's keys
// [lo, hi)), are quantized to int8 with one scale per group and channel
// block: amax = the largest p, d = amax*float32(1/127) (a product: one
// division per group, the other's cost saved), q[t] = round-to-even(p[t] *
// (127/amax)) clamped to [0, 127] (a weight is never negative, nor a
// scale QuantizeQ8_0 writes). The 32 integer sums acc[i] = Σ_t q[t]*v[t][i]
// are exact (|acc| < 2^24) whatever the order, so every set has the
// same bits: out[i] += float32(d*float32(acc[i])), group after group,
// a group whose amax is not positive adding nothing.
//
// Folding the values' scale into the weights before quantizing rounds
// each term once, relative to the largest term of its group: the error
// of a row's output is at most half a step (amax/254) times the sum of
// the magnitudes of the group's quants, the same order as the Q8_0
// rounding of the values themselves. Quantizing the weights alone would
// need the values re-quantized to a common scale per group (a second
// rounding of every value, worse for a position whose scale is far below
// its group's largest, as an attention sink's often is).
//
// A row's result depends only on its weights, its keys' values and the
// block boundaries (multiples of AttnBlock of its own key sequence): the
// groups are fixed halves of a block, so the sums are batch invariant.

// V8Group is the number of positions per quantization group of SumV8.
const V8Group = 32

// V8Size returns the bytes TransposeV8 writes for a block of n positions
// of hd channels, and the number of scales.
func V8Size(n, hd int) (bytes, scales int) {
	ng := (n + V8Group - 1) / V8Group
	return ng * hd * V8Group, ng * hd
}

// AttnV8Env names the environment variable that selects the integer
// value sum for the Q8_0 cache: "on" or "off"; unset (or "auto"), each
// kernel set's preference (Kernels.PreferV8).
const AttnV8Env = "GEIST_ATTN_V8"

// attnV8 is the choice: 0 each set's preference, 1 on, 2 off.
var attnV8 atomic.Int32

func init() {
	switch os.Getenv(AttnV8Env) {
	case "on", "1":
		attnV8.Store(1)
	case "off", "0":
		attnV8.Store(2)
	}
}

// AttnV8 reports whether attention over a Q8_0 cache sums the values in
// integer arithmetic (TransposeV8, SumV8) rather than dequantized float:
// the choice of AttnV8Env or SetAttnV8, else the active set's preference.
func AttnV8() bool {
	switch attnV8.Load() {
	case 1:
		return true
	case 2:
		return false
	}
	return Active().PreferV8
}

// SetAttnV8 selects the integer value sum (true) or the float one and
// returns a function restoring the previous choice (for tests and
// benchmarks; not while a forward pass runs).
func SetAttnV8(on bool) (restore func()) {
	v := int32(2)
	if on {
		v = 1
	}
	old := attnV8.Swap(v)
	return func() { attnV8.Store(old) }
}

// transposeV8 is the reference TransposeV8: n <= AttnBlock rows of hd/32
// Q8_0 blocks (v[t*vStride:]) into vt and dv, zero past n up to the
// group's end.
func transposeV8(vt []byte, dv []float32, v []byte, vStride, n, hd int) {
	if n < 0 || n > AttnBlock || hd%32 != 0 || hd <= 0 {
		panic("neon: TransposeV8 takes 0..AttnBlock rows of a positive multiple of 32 channels")
	}
	nbv := hd / 32
	nvt, nd := V8Size(n, hd)
	vt, dv = vt[:nvt], dv[:nd]
	if n > 0 {
		_ = v[(n-1)*vStride+nbv*sizeQ8_0-1]
	}
	for g := range nvt / (hd * V8Group) {
		for c := range nbv {
			o := vt[(g*nbv+c)*1024 : (g*nbv+c+1)*1024]
			d := dv[(g*nbv+c)*32 : (g*nbv+c+1)*32]
			for t := range 32 {
				p := g*32 + t
				q := o[t/4*128+t%4:]
				if p >= n {
					d[t] = 0
					for i := range 32 {
						q[i*4] = 0
					}
					continue
				}
				blk := v[p*vStride+c*sizeQ8_0 : p*vStride+(c+1)*sizeQ8_0]
				d[t] = ggml.FP16ToFP32(uint16(blk[0]) | uint16(blk[1])<<8)
				for i := range 32 {
					q[i*4] = blk[2+i]
				}
			}
		}
	}
}

// v8Tiny is the largest amax of a group that SumV8 skips: below about
// 3.7e-37, 127/amax overflows to infinity, which the reference would
// turn into quants of 127, FCVTNU into 0xffffffff (the byte -1) and
// VCVTPS2DQ into the integer indefinite; such a group (every one of its
// 32 weights times scales under 2^-120) adds at most 2^-127·127·127·32
// per channel, so every set leaves it out alike.
const v8Tiny = 0x1p-120

// sumV8 is the reference SumV8: the row's weights w[lo:hi] (relative to
// the block's first position; hi <= the n of the transposed block) times
// the transposed values, added to out (len(out) = hd).
func sumV8(out, w []float32, lo, hi int, vt []byte, dv []float32) {
	hd := len(out)
	if hd%32 != 0 || lo < 0 || hi > AttnBlock {
		panic("neon: SumV8 takes a multiple of 32 channels and keys within a block")
	}
	if lo >= hi {
		return
	}
	nbv := hd / 32
	w = w[:hi]
	for g := lo / 32; g <= (hi-1)/32; g++ {
		for c := range nbv {
			d := dv[(g*nbv+c)*32 : (g*nbv+c+1)*32]
			o := vt[(g*nbv+c)*1024 : (g*nbv+c+1)*1024]
			var p [32]float32
			amax := float32(0)
			for t := range p {
				a := float32(0)
				if j := g*32 + t; j >= lo && j < hi {
					a = w[j]
				}
				p[t] = a * d[t]
				amax = max(amax, p[t])
			}
			if !(amax > v8Tiny) {
				continue
			}
			dd, id := amax*(1.0/127), 127/amax
			var acc [32]int32
			for t, x := range p {
				q := math.RoundToEven(float64(x * id))
				if !(q > 0) {
					continue
				}
				qi := int32(min(q, 127))
				quad := o[t/4*128+t%4:]
				for i := range acc {
					acc[i] += qi * int32(int8(quad[i*4]))
				}
			}
			oc := out[c*32 : (c+1)*32]
			for i, s := range acc {
				oc[i] = oc[i] + float32(dd*float32(s))
			}
		}
	}
}
