package neon

import (
	"math"
	"os"
	"sync/atomic"

	"github.com/geisten/geist/neon/ggml"
)

// Attention over an F16 cache in half-precision arithmetic (the
// AttnTileKernels fields KTH, ScoresRowsH and SumRowsH), for cores with
// FEAT_FP16 arithmetic (Cortex-A76, A78: FMLA on eight half lanes, twice
// the float32 lanes per instruction).
//
// The value sums are the default where the kernels exist; the scores
// are selectable (AttnF16Env "all"). A tile transposes each block of keys
// once as they are (KTH: halves, no conversion); each query row is rounded to half precision once per
// tile, times the attention scale (QH), so a score needs no multiply and
// the half sums stay small. A score is the float32 sum of runs of
// AttnRunH query dimensions, each run the half-precision fused
// multiply-adds of its terms from zero, widened (exactly) before it is
// added; a value sum likewise adds runs of AttnRunH keys, each key's
// softmax weight rounded to half precision, each run's half sums widened
// into the float32 output. The runs are fixed by the row's own keys (its
// first key in a block starts a run), so a row's bits do not depend on
// the tile or batch. llama.cpp's ARM builds with FP16 vector arithmetic
// do likewise in their own way: their F16 dots (GGML_F16_VEC) keep a
// row's products in 32 half lanes, reduced in half precision before one
// float32 sum, and their flash attention keeps the value sum of an F16
// cache in half precision across the whole sequence. Here a score's lane
// adds up to AttnRunH terms in a row (more than llama.cpp's few per lane
// at head size 64), a value sum's lane AttnRunH keys (far fewer than
// llama.cpp's whole sequence); the output, maximum and softmax sums stay
// float32. Runs of 32 rather than 16 halve the widening (projected 11.1
// against 13.1 cycles per row and key on an A76, scores and values).
//
// GenericAttnTile's KTH, ScoresRowsH and SumRowsH are the reference every
// set's kernels reproduce bit for bit: each half operation is one
// correctly rounded IEEE binary16 fused multiply-add (fmaH).

// AttnRunH is the number of terms of a half-precision run.
const AttnRunH = 32

// AttnF16Env names the environment variable that selects half-precision
// attention arithmetic over the F16 cache: "on"/"1" the value sums in
// half precision (SumRowsH; the scores stay float32), "all" the scores
// too (KTH, ScoresRowsH), "off"/"0" neither; unset (or "auto"), each
// kernel set's preference (AttnTileKernels.PreferH: the arm64 sets prefer
// the half value sums where the CPU has the arithmetic). Only a set whose
// CPU has the arithmetic has the kernels: elsewhere (the A72, amd64,
// generic) the choice changes nothing.
//
// The half scores are not the default anywhere: their runs of 32 terms
// took tiny-qwen3moe-Q4_0 past llama.cpp's tolerance (worst 3.77 against
// 2.85 over all its cases, an expert choice turned by a score; float32
// scores with half value sums: 1.77), where every other zoo file stayed
// within it.
const AttnF16Env = "GEIST_ATTN_F16"

// attnF16 is the choice: 0 each set's preference, 1 half value sums, 2
// off, 3 half scores and value sums.
var attnF16 atomic.Int32

func init() {
	switch os.Getenv(AttnF16Env) {
	case "on", "1":
		attnF16.Store(1)
	case "off", "0":
		attnF16.Store(2)
	case "all":
		attnF16.Store(3)
	}
}

// AttnF16 reports whether attention over an F16 cache sums the values in
// half precision with the active set's kernels: the set has them
// (AttnTileKernels.SumRowsH), and AttnF16Env or SetAttnF16 chose them, or
// the set prefers them.
func AttnF16() bool {
	t := Active().AttnTile
	if t == nil || t.SumRowsH == nil {
		return false
	}
	switch attnF16.Load() {
	case 1, 3:
		return true
	case 2:
		return false
	}
	return t.PreferH
}

// AttnF16Scores reports whether the scores are in half precision too
// (AttnF16Env "all", or SetAttnF16All): only with AttnF16.
func AttnF16Scores() bool {
	return attnF16.Load() == 3 && AttnF16()
}

// SetAttnF16 selects the half-precision value sums (true) or float32
// and returns a function restoring the previous choice (for tests and
// benchmarks; not while a forward pass runs).
func SetAttnF16(on bool) (restore func()) {
	v := int32(2)
	if on {
		v = 1
	}
	old := attnF16.Swap(v)
	return func() { attnF16.Store(old) }
}

// SetAttnF16All selects half-precision scores and value sums, as
// SetAttnF16.
func SetAttnF16All() (restore func()) {
	old := attnF16.Swap(3)
	return func() { attnF16.Store(old) }
}

// QH sets dst[i] to q[i]*scale (a float32 product) rounded to half
// precision (a query row of ScoresRowsH).
func QH(dst []uint16, q []float32, scale float32) {
	dst = dst[:len(q)]
	for i, x := range q {
		dst[i] = ggml.FP32ToFP16(x * scale)
	}
}

// attnKTH is the reference KTH: kt[d*AttnBlock+t] = k[t*hd+d].
func attnKTH(kt, k []uint16, hd int) {
	k = k[:AttnBlock*hd]
	kt = kt[:AttnBlock*hd]
	for t := 0; t < AttnBlock; t++ {
		for d, h := range k[t*hd : (t+1)*hd] {
			kt[d*AttnBlock+t] = h
		}
	}
}

// scoresRowsH is the reference ScoresRowsH: for each row r of q (hd
// halves), sc[r*AttnBlock+t] = the float32 sum, run after run, of the
// run's half fused multiply-adds q[d]*kt[d*AttnBlock+t] from zero.
func scoresRowsH(sc []float32, q []uint16, hd int, kt []uint16) {
	kt = kt[:hd*AttnBlock]
	for r := 0; r < len(q)/hd; r++ {
		qr := q[r*hd : (r+1)*hd]
		s := sc[r*AttnBlock : (r+1)*AttnBlock]
		for t := range s {
			acc := float32(0)
			for d0 := 0; d0 < hd; d0 += AttnRunH {
				h := 0.0
				for d := d0; d < min(d0+AttnRunH, hd); d++ {
					h = fmaH(halfF64(qr[d]), halfF64(kt[d*AttnBlock+t]), h)
				}
				acc += float32(h)
			}
			s[t] = acc
		}
	}
}

// sumRowsH is the reference SumRowsH: for each row r of out (hd values),
// out[r*hd+i] += the float32 sums, run after run of keys t < n, of the
// run's half fused multiply-adds half(w[r*AttnBlock+t])*v[t*hd+i] from
// zero.
func sumRowsH(out []float32, hd int, w []float32, n int, v []uint16) {
	v = v[:n*hd]
	var wh [AttnBlock]float64
	var h []float64
	if hd > 0 {
		h = make([]float64, hd)
	}
	for r := 0; r < len(out)/hd; r++ {
		o := out[r*hd : (r+1)*hd]
		for t, a := range w[r*AttnBlock : r*AttnBlock+n] {
			wh[t] = halfF64(ggml.FP32ToFP16(a))
		}
		for t0 := 0; t0 < n; t0 += AttnRunH {
			clear(h)
			for t := t0; t < min(t0+AttnRunH, n); t++ {
				for i, x := range v[t*hd : (t+1)*hd] {
					h[i] = fmaH(wh[t], halfF64(x), h[i])
				}
			}
			for i := range o {
				o[i] += float32(h[i])
			}
		}
	}
}

// halfF64 is the value of half-precision bits (exact in float64).
func halfF64(h uint16) float64 { return float64(ggml.FP16ToFP32(h)) }

// fmaH is a*b+c for half-precision values a, b, c (held exactly in
// float64) rounded once to half precision, to nearest even, overflowing
// to infinity: IEEE binary16 FMA. The product is exact in float64 (22
// bits); the sum p+c is rounded to float64 with its error recovered
// exactly (TwoSum), and a float64 sum that is exactly halfway between two
// halves is moved one float64 step towards the error, so the rounding to
// half is that of the exact sum.
func fmaH(a, b, c float64) float64 {
	p := a * b
	s := p + c
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return s
	}
	bb := s - p
	e := (p - (s - bb)) + (c - bb)
	if e != 0 {
		s = math.Nextafter(s, s+e)
	}
	return roundH(s)
}

// roundH rounds x to half precision, to nearest even (subnormals below
// 2^-14 in steps of 2^-24, beyond 65504 to infinity).
func roundH(x float64) float64 {
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	_, e := math.Frexp(x) // |x| in [2^(e-1), 2^e)
	q := max(e-11, -24)   // the step of 11 significant bits
	r := math.Ldexp(math.RoundToEven(math.Ldexp(x, -q)), q)
	if math.Abs(r) > 65504 {
		return math.Copysign(math.Inf(1), x)
	}
	return r
}
