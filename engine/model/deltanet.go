package model

import (
	"fmt"
	"math"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/neon"
)

// Qwen3.5 (qwen35): three gated DeltaNet layers to each gated full
// attention layer.
//
// A DeltaNet layer projects its normed input to Q, K and V (attn_qkv),
// convolves them causally over the current and the RecTaps positions
// before it (one kernel per channel, no bias), applies SiLU, normalizes Q
// and K per head to unit length (Q also × 1/sqrt(d_k)), and per value head
// runs the gated delta rule on a d_k×d_v state S:
//
//	S ← exp(g)·S;  S ← S + k ⊗ β·(v − Sᵀk);  o = Sᵀq
//
// with β = sigmoid(ssm_beta·x) and g = ssm_a·softplus(ssm_alpha·x + dt_bias).
// o is RMS-normalized per head, × ssm_norm, × SiLU(z) (z = attn_gate·x)
// and projected out (ssm_out). The state is kept as [head][d_v][d_k]: the
// row of value dimension j is contiguous, so a token's update of a row is
// one decay-and-dot pass and one update-and-dot pass over it.
//
// A full attention layer is the grouped-query block with per-head Q/K
// norms, NEOX rope on the first rope.dimension_count dimensions, and an
// output gate: attn_q holds per head its query rows then its gate rows,
// and the attention output is × sigmoid(gate) before attn_output.

// DeltaNet is the shape of a gated DeltaNet layer.
type DeltaNet struct {
	DNHeadsK int // key (and query) heads: ssm.group_count
	DNHeadsV int // value heads: ssm.time_step_rank
	DNHeadK  int // key head size: ssm.state_size
	DNHeadV  int // value head size: ssm.inner_size / value heads
	// NextN is the number of next-token prediction (MTP) blocks the file
	// appends after the main layers (NLayer does not count them).
	NextN int
}

// readQwen35: the DeltaNet shape, the layer pattern, the gated attention,
// the MTP block left out of the main pass, the rope sections.
func readQwen35(f *gguf.File, c *Config) (err error) {
	p := c.Arch + "."
	nextn, err := metaInt(f, p+"nextn_predict_layers", 0, false)
	if err != nil {
		return err
	}
	if nextn >= c.NLayer {
		return fmt.Errorf("model: %d next-token prediction layers of %d layers leave no main model", nextn, c.NLayer)
	}
	c.NLayer -= nextn // the MTP block (the last layers) is not run by the main pass
	c.NextN = nextn
	interval, err := metaInt(f, p+"full_attention_interval", 4, false)
	if err != nil {
		return err
	}
	if interval <= 0 {
		return fmt.Errorf("model: full_attention_interval %d must be positive", interval)
	}
	d := &c.DeltaNet
	keys := []struct {
		key string
		v   *int
	}{
		{"ssm.group_count", &d.DNHeadsK},
		{"ssm.time_step_rank", &d.DNHeadsV},
		{"ssm.state_size", &d.DNHeadK},
		{"ssm.conv_kernel", &c.RecTaps},
	}
	for _, k := range keys {
		if *k.v, err = metaInt(f, p+k.key, 0, true); err != nil {
			return err
		}
	}
	inner, err := metaInt(f, p+"ssm.inner_size", 0, true)
	if err != nil {
		return err
	}
	const maxDim = 1 << 14
	if d.DNHeadsK <= 0 || d.DNHeadsV <= 0 || d.DNHeadK <= 0 || d.DNHeadsV%d.DNHeadsK != 0 ||
		inner <= 0 || inner%d.DNHeadsV != 0 || d.DNHeadsK*d.DNHeadK > maxDim || inner > maxDim {
		return fmt.Errorf("model: DeltaNet shape: %d key heads of %d, %d value heads, inner size %d: want positive sizes, value heads a multiple of key heads dividing the inner size, widths at most %d", d.DNHeadsK, d.DNHeadK, d.DNHeadsV, inner, maxDim)
	}
	if c.RecTaps < 2 || c.RecTaps > 16 {
		return fmt.Errorf("model: ssm.conv_kernel %d must be in [2, 16]", c.RecTaps)
	}
	c.RecTaps--
	d.DNHeadV = inner / d.DNHeadsV
	c.RecConv = 2*d.DNHeadsK*d.DNHeadK + inner
	c.RecState = d.DNHeadsV * d.DNHeadV * d.DNHeadK
	c.RecIn = c.RecConv + 2*d.DNHeadsV
	c.RecOut = inner
	c.Rec = make([]bool, c.NLayer)
	for l := range c.Rec {
		c.Rec[l] = (l+1)%interval != 0
	}
	c.AttnGate = true
	// Interleaved multi-section rope: pair i takes the position component
	// i mod 3 while i < 3·sections[i mod 3], else the fourth, which is 0
	// for text (the pair is not rotated). llama.cpp's sections for text
	// cover every pair; a file whose do not is refused rather than
	// approximated.
	if v, ok := f.Value(p + "rope.dimension_sections"); ok {
		secs, ok := intArray(v)
		if !ok || len(secs) < 3 {
			return fmt.Errorf("model: rope.dimension_sections has type %T, want 4 integers", v)
		}
		for i := 0; i < c.RopeDim/2; i++ {
			if int64(i) >= 3*secs[i%3] {
				return fmt.Errorf("model: rope.dimension_sections %v leave rotated pair %d of %d at the fourth position component (not supported)", secs, i, c.RopeDim/2)
			}
		}
	}
	return nil
}

// deltaNet loads a gated DeltaNet layer's weights.
func (l loader) deltaNet(L *Layer, p string, c *Config) (err error) {
	d := &c.DeltaNet
	inner := d.DNHeadsV * d.DNHeadV
	if L.RecQKV, err = l.matrix(p+"attn_qkv.weight", c.RecConv, c.NEmbd); err != nil {
		return err
	}
	if L.RecZ, err = l.matrix(p+"attn_gate.weight", inner, c.NEmbd); err != nil {
		return err
	}
	if L.RecBeta, err = l.matrix(p+"ssm_beta.weight", d.DNHeadsV, c.NEmbd); err != nil {
		return err
	}
	if L.RecAlpha, err = l.matrix(p+"ssm_alpha.weight", d.DNHeadsV, c.NEmbd); err != nil {
		return err
	}
	if L.RecOut, err = l.matrix(p+"ssm_out.weight", c.NEmbd, inner); err != nil {
		return err
	}
	if L.RecConvW, err = l.convKernel(p+"ssm_conv1d.weight", c.RecConv, c.RecTaps+1); err != nil {
		return err
	}
	if L.RecA, err = l.vector(p+"ssm_a", d.DNHeadsV); err != nil {
		return err
	}
	if L.RecDtB, err = l.vector(p+"ssm_dt.bias", d.DNHeadsV); err != nil {
		return err
	}
	if L.RecNorm, err = l.vector(p+"ssm_norm.weight", d.DNHeadV); err != nil {
		return err
	}
	for _, a := range L.RecA {
		if !(a <= 0) {
			return fmt.Errorf("model: tensor %q holds %v: the decay rates must not be positive", p+"ssm_a", a)
		}
	}
	return nil
}

// dnBufs are the DeltaNet block's batch buffers and the job of a pass,
// replay or tree pass of its recurrence (run on the pool by value heads).
type dnBufs struct {
	z     []float32 // [maxBatch][inner] the output gate
	beta  []float32 // [maxBatch][DNHeadsV]
	alpha []float32 // [maxBatch][DNHeadsV]
	job   struct {
		n, longAt      int
		src, dst, base []float32 // the layer's state: start, working, base
		in             []float32 // the inputs, RecIn per token (the batch's or the log's)
		out            []float32 // the outputs, RecOut per token (nil: a replay)
	}
	par    []int32     // [maxBatch] a tree pass's parents (-1: the pass's start)
	nodes  [][]float32 // per worker: [maxRows][dnBlock·DNHeadK] a block of rows' state after each tree node
	o      [][]float32 // per worker: [dnBlock] a replay's outputs (not kept)
	runFn  func(w, lo, hi int)
	treeFn func(w, lo, hi int)
}

func (s *State) newDeltaNet() {
	c := &s.m.Config
	d := &c.DeltaNet
	B := s.maxBatch
	s.dn = dnBufs{
		z:     make([]float32, B*d.DNHeadsV*d.DNHeadV),
		beta:  make([]float32, B*d.DNHeadsV),
		alpha: make([]float32, B*d.DNHeadsV),
		par:   make([]int32, B),
		nodes: make([][]float32, s.pool.n),
		o:     make([][]float32, s.pool.n),
	}
	for w := range s.dn.nodes {
		s.dn.nodes[w] = make([]float32, min(s.maxRows, B)*dnBlock*d.DNHeadK)
		s.dn.o[w] = make([]float32, dnBlock)
	}
	s.dn.runFn = s.deltaRunHeads
	s.dn.treeFn = s.deltaTreeHeads
}

// deltaNet runs layer l's gated DeltaNet block over the batch of n tokens
// at pos0, adding its output to the residual stream.
// Its three parts: the input projections (shared weights, every row), the
// rows' convolution and recurrence against this state's, and the output
// projection; a ForwardBatch pass runs the middle one per sequence.
func (s *State) deltaNet(l, n, pos0 int) {
	s.deltaNetIn(l, n)
	s.deltaNetRows(l, n, pos0)
	s.deltaNetOut(l, n)
}

// deltaNetIn computes the projections of n rows of layer l.
func (s *State) deltaNetIn(l, n int) {
	c, L := &s.m.Config, &s.m.Layers[l]
	E := c.NEmbd
	for i := 0; i < n; i++ {
		RMSNorm(s.xb[i*E:(i+1)*E], s.x[i*E:(i+1)*E], L.AttnNorm, c.NormEps)
	}
	s.mul(s.xb, n, product{w: L.RecQKV, out: s.rec.xc}, product{w: L.RecZ, out: s.dn.z})
	s.mul(s.xb, n, product{w: L.RecBeta, out: s.dn.beta}, product{w: L.RecAlpha, out: s.dn.alpha})
}

// deltaNetOut projects the gated outputs of n rows and adds them to the
// residual stream.
func (s *State) deltaNetOut(l, n int) {
	s.mul(s.dn.z, n, product{w: s.m.Layers[l].RecOut, out: s.proj})
	s.residual(n)
}

// deltaNetRows runs the convolution and the recurrence of the rows, from
// this state's, and gates their outputs (into dn.z).
func (s *State) deltaNetRows(l, n, pos0 int) {
	c, L := &s.m.Config, &s.m.Layers[l]
	d := &c.DeltaNet
	rs := &s.rec
	C, hv := c.RecConv, d.DNHeadsV
	inner := hv * d.DNHeadV
	s.recConv(l, n, pos0, L.RecConvW)
	qk := d.DNHeadsK * d.DNHeadK
	qs := 1 / float32(math.Sqrt(float64(d.DNHeadK)))
	for i := 0; i < n; i++ {
		in := rs.in[i*c.RecIn : (i+1)*c.RecIn]
		y := rs.y[i*C : (i+1)*C]
		copy(in[:C], y)
		SiLUMul(in[:C], s.rec.ones) // x/(1+e^-x), × 1: the vector kernels' SiLU
		for h := 0; h < d.DNHeadsK; h++ {
			l2Norm(in[h*d.DNHeadK:(h+1)*d.DNHeadK], c.NormEps)
			l2Norm(in[qk+h*d.DNHeadK:qk+(h+1)*d.DNHeadK], c.NormEps)
		}
		for j := range in[:qk] {
			in[j] *= qs
		}
		beta, decay := in[C:C+hv], in[C+hv:C+2*hv]
		for h := 0; h < hv; h++ {
			beta[h] = sigmoid(s.dn.beta[i*hv+h])
			g := L.RecA[h] * softplus(s.dn.alpha[i*hv+h]+L.RecDtB[h])
			decay[h] = neon.Exp(g)
		}
	}
	s.recRun(l, n, pos0)
	for i := 0; i < n; i++ {
		o := rs.out[i*inner : (i+1)*inner]
		for h := 0; h < hv; h++ {
			oh := o[h*d.DNHeadV : (h+1)*d.DNHeadV]
			RMSNorm(oh, oh, L.RecNorm, c.NormEps)
		}
		SiLUMul(s.dn.z[i*inner:(i+1)*inner], o) // z ← SiLU(z)·norm(o)
	}
}

// deltaStep advances a DeltaNet layer's state by one token (see
// recStep): per value head h (reading key head h mod DNHeadsK) and value
// dimension j, the row S[h][j] of d_k values is decayed while its dot with
// k is summed, then updated by k·β(v_j − that dot) while its dot with q is
// summed: o[h][j] (q carries the 1/sqrt(d_k)). The active kernel set's
// DeltaRow does a row in one fixed order (SIMD on amd64 and arm64), and
// its DeltaRows the rows of a head with exactly those bits, so a token's
// step is the same bits in every pass, batch, tree and replay. The heads
// are split between the pool's workers (deltaRunHeads over one token).
func deltaStep(s *State, l int, dst, src, in, out []float32) {
	j := &s.dn.job
	j.n, j.longAt, j.src, j.dst, j.base, j.in, j.out = 1, -1, src, dst, nil, in, out
	s.pool.runWorker(s.dn.runFn, s.m.DNHeadsV, 1)
}

// dnBlock is how many rows of a head (value dimensions, d_k values each)
// deltaRun, deltaReplay and deltaTree take through the tokens together:
// 8 rows of 128 values are 4 KiB, kept in the first-level cache over the
// tokens, and one DeltaRows call per token and block.
const dnBlock = 8

// deltaRun runs a causal pass's recurrence of DeltaNet layer l (index r)
// block of rows by block (recState.run): the rows of the state (a value
// dimension of a head, d_k values) are independent, so a block of rows
// takes the pass's tokens one after the other while it stays in the
// first-level cache, instead of the layer's whole state (1 MiB on
// Qwen3.5-0.8B) streaming through memory once per token. Every row's
// steps are deltaStep's, in the same order and from the same values: the
// same bits.
func deltaRun(s *State, l, r, n int, src []float32) {
	rs := &s.rec
	j := &s.dn.job
	j.n, j.longAt, j.src, j.dst, j.base = n, rs.longAt, src, rs.work[r], rs.base[r]
	j.in, j.out = rs.in, rs.out
	s.pool.runWorker(s.dn.runFn, s.m.DNHeadsV, 1)
}

// deltaReplay steps layer l's base through its first n logged inputs into
// work (recState.replay), block by block as deltaRun.
func deltaReplay(s *State, l, r, n int) {
	rs := &s.rec
	j := &s.dn.job
	j.n, j.longAt, j.src, j.dst, j.base = n, -1, rs.base[r], rs.work[r], nil
	j.in, j.out = rs.log[r], nil
	s.pool.runWorker(s.dn.runFn, s.m.DNHeadsV, 1)
}

// deltaRunHeads runs value heads [lo, hi) of the current pass or replay
// on worker w.
func (s *State) deltaRunHeads(w, lo, hi int) {
	c := &s.m.Config
	d := &c.DeltaNet
	j := &s.dn.job
	dk, dv, hk, hv := d.DNHeadK, d.DNHeadV, d.DNHeadsK, d.DNHeadsV
	qk := hk * dk
	In, Out := c.RecIn, c.RecOut
	vAt, bAt, gAt := 2*qk, 2*qk+hv*dv, 2*qk+hv*dv+hv
	rows := neon.Active().DeltaRows
	tmp := s.dn.o[w]
	for h := lo; h < hi; h++ {
		kh := h % hk
		for e := 0; e < dv; e += dnBlock {
			b := min(dnBlock, dv-e)
			at := (h*dv + e) * dk
			src, dst := j.src[at:at+b*dk], j.dst[at:at+b*dk]
			for i := 0; i < j.n; i++ {
				if i == j.longAt {
					copy(j.base[at:at+b*dk], src)
				}
				in := j.in[i*In : (i+1)*In]
				o := tmp[:b]
				if j.out != nil {
					o = j.out[i*Out+h*dv+e : i*Out+h*dv+e+b]
				}
				rows(dst, src, in[kh*dk:(kh+1)*dk], in[qk+kh*dk:qk+(kh+1)*dk], in[vAt+h*dv+e:vAt+h*dv+e+b], o, in[bAt+h], in[gAt+h])
				src = dst
			}
		}
	}
}

// deltaTree runs a tree pass's recurrence of DeltaNet layer l from start
// (recState.runTree) block of rows by block: a block's state after each
// node is kept in the worker's node blocks, a node steps from its
// parent's (or from start's block), so any tree order is one step per
// node, each deltaStep's step from the same values: the same bits.
func deltaTree(s *State, l, r, n int, start []float32) {
	rs := &s.rec
	dn := &s.dn
	for i := 0; i < n; i++ {
		_, anc := s.span(i, 0)
		dn.par[i] = -1
		if len(anc) > 1 {
			dn.par[i] = anc[len(anc)-2]
		}
	}
	j := &dn.job
	j.n, j.src, j.in, j.out = n, start, rs.in, rs.out
	s.pool.runWorker(dn.treeFn, s.m.DNHeadsV, 1)
}

// deltaTreeHeads runs value heads [lo, hi) of the current tree pass on
// worker w's node blocks.
func (s *State) deltaTreeHeads(w, lo, hi int) {
	c := &s.m.Config
	d := &c.DeltaNet
	j := &s.dn.job
	dk, dv, hk, hv := d.DNHeadK, d.DNHeadV, d.DNHeadsK, d.DNHeadsV
	qk := hk * dk
	In, Out := c.RecIn, c.RecOut
	vAt, bAt, gAt := 2*qk, 2*qk+hv*dv, 2*qk+hv*dv+hv
	nodes, par := s.dn.nodes[w], s.dn.par
	rows := neon.Active().DeltaRows
	for h := lo; h < hi; h++ {
		kh := h % hk
		for e := 0; e < dv; e += dnBlock {
			b := min(dnBlock, dv-e)
			at, bk := (h*dv+e)*dk, b*dk
			for i := 0; i < j.n; i++ {
				src := j.src[at : at+bk]
				if p := int(par[i]); p >= 0 {
					src = nodes[p*bk : (p+1)*bk]
				}
				in := j.in[i*In : (i+1)*In]
				rows(nodes[i*bk:(i+1)*bk], src, in[kh*dk:(kh+1)*dk], in[qk+kh*dk:qk+(kh+1)*dk], in[vAt+h*dv+e:vAt+h*dv+e+b],
					j.out[i*Out+h*dv+e:i*Out+h*dv+e+b], in[bAt+h], in[gAt+h])
			}
		}
	}
}

// splitGate separates the gated attention's queries from its gates (per
// head hd query rows, then hd gate rows) for n tokens.
func (s *State) splitGate(n, qDim, hd int) {
	for i := 0; i < n; i++ {
		qg := s.qg[i*2*qDim : (i+1)*2*qDim]
		for h := 0; h < qDim/hd; h++ {
			copy(s.q[i*qDim+h*hd:i*qDim+(h+1)*hd], qg[2*h*hd:(2*h+1)*hd])
			copy(s.qgate[i*qDim+h*hd:i*qDim+(h+1)*hd], qg[(2*h+1)*hd:(2*h+2)*hd])
		}
	}
}

// gateAttention multiplies the attention output of n tokens (w values
// each) by the sigmoid of their gates.
func (s *State) gateAttention(n, w int) {
	for i := 0; i < n*w; i++ {
		s.att[i] *= sigmoid(s.qgate[i])
	}
}

func sigmoid(x float32) float32 { return 1 / (1 + neon.Exp(-x)) }

// softplus is log(1+e^x), x itself above 20 (ggml's threshold).
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log1p(float64(neon.Exp(x))))
}

// l2Norm scales x to unit length (ggml_l2_norm: the sum of squares in
// float64 as RMSNorm's, the scale 1/max(norm, eps)).
func l2Norm(x []float32, eps float32) {
	sum := float32(neon.RMSNormScale(x))
	scale := 1 / max(float32(math.Sqrt(float64(sum))), eps)
	for i := range x {
		x[i] *= scale
	}
}
