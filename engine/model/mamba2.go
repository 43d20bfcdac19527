package model

import (
	"fmt"
	"math"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/neon"
	"github.com/geisten/geist/quant"
)

// The Mamba-2 block (granitehybrid: Granite 4.0-H) and its recurrent
// state.
//
// A Mamba-2 layer projects its normed input to z (Inner), xBC (Inner +
// 2·Groups·State) and dt (Heads); xBC goes through a causal depthwise
// convolution over the current and the Conv-1 positions before it (with a
// bias) and SiLU, and splits into x (Inner: Heads heads of P = Inner/Heads),
// B and C (Groups × State each). Per head h, with dt = softplus(dt +
// dt_bias) and the decay dA = exp(dt·A_h), the state S_h (P × State) of the
// previous position becomes
//
//	S_h ← dA·S_h + (dt·x_h) ⊗ B_g,   y_h = S_h·C_g + D_h·x_h
//
// (g the head's group); y × SiLU(z), an RMS norm per group of Inner/Groups
// channels × ssm_norm, and the out-projection give the branch.
//
// Prefill, decoding, verification and trees run the same per-token step
// (ssmStep) in the same order, so a token's output is bit for bit the same
// in any batch. The layer is a recurrent layer of recurrent.go: its state
// (base, work, the log of per-token inputs, the convolution ring, tree
// slots, checkpoints and snapshots) is kept there; mamba2Step is its step.
// One token's recurrence input is x, B, C (after the convolution and
// SiLU), dt (after softplus) and the decay exp(dt·A) per head; its output
// is the scan's y (before the D skip, added by the block).

// SSM is the shape of the Mamba-2 layers.
type SSM struct {
	SSMInner  int // channels of x, z and y (ssm.inner_size)
	SSMState  int // state size N (ssm.state_size)
	SSMHeads  int // heads (ssm.time_step_rank)
	SSMGroups int // groups of B and C (ssm.group_count)
	SSMConv   int // convolution width, the current position included (ssm.conv_kernel)
}

// IsSSM reports whether layer l is a Mamba-2 layer.
// (the recurrent layers of a model with a Mamba-2 shape).
func (c *Config) IsSSM(l int) bool { return c.SSMInner > 0 && c.IsRec(l) }

// SSMLayerCount is the number of Mamba-2 layers.
func (c *Config) SSMLayerCount() int {
	if c.SSMInner == 0 {
		return 0
	}
	return c.RecLayers()
}

// ssmConvCh is the width of xBC, the convolution's channels.
func (c *Config) ssmConvCh() int { return c.SSMInner + 2*c.SSMGroups*c.SSMState }

// ssmInW is the width of the in-projection: z, xBC, dt.
func (c *Config) ssmInW() int { return c.SSMInner + c.ssmConvCh() + c.SSMHeads }

// SSMStateBytes is the memory of one position's recurrent state of every
// Mamba-2 layer (the scan's state and the convolution's rows): what a
// snapshot holds beside the attention layers' keys and values.
func (c *Config) SSMStateBytes() int64 {
	per := int64(c.SSMInner)*int64(c.SSMState) + int64(c.SSMConv-1)*int64(c.ssmConvCh())
	return 4 * per * int64(c.SSMLayerCount())
}

// SSMW holds a Mamba-2 layer's weights.
type SSMW struct {
	SSMIn    *quant.Matrix // [Inner + convCh + Heads × NEmbd]: z, xBC, dt
	SSMConvW []float32     // [Conv][convCh]: tap j of every channel
	SSMConvB []float32     // [convCh]
	SSMA     []float32     // [Heads] A (negative)
	SSMD     []float32     // [Heads] D
	SSMDtB   []float32     // [Heads] dt bias
	SSMNorm  []float32     // [Inner]
	SSMOut   *quant.Matrix // [NEmbd × Inner]
}

// readGraniteHybrid: Granite's multipliers, no rope unless the file says
// the rope was fine-tuned (llama.cpp's switch), the Mamba-2 shape. The
// mixture-of-experts variants (a router, experts and a shared expert) are
// refused.
func readGraniteHybrid(f *gguf.File, c *Config) error {
	if err := readGranite(f, c); err != nil {
		return err
	}
	p := c.Arch + "."
	if v, ok := f.Value(p + "rope.scaling.finetuned"); !ok || v != true {
		c.NoRope = make([]bool, c.NLayer)
		for l := range c.NoRope {
			c.NoRope[l] = true
		}
	}
	if n, err := metaInt(f, p+"expert_count", 0, false); err != nil {
		return err
	} else if n > 0 {
		return fmt.Errorf("model: granitehybrid with %d experts (Granite 4.0-H tiny/small) is not supported yet: geist runs the dense Granite 4.0-H models", n)
	}
	var err error
	for _, k := range []struct {
		key string
		v   *int
	}{
		{"ssm.inner_size", &c.SSMInner},
		{"ssm.state_size", &c.SSMState},
		{"ssm.time_step_rank", &c.SSMHeads},
		{"ssm.group_count", &c.SSMGroups},
		{"ssm.conv_kernel", &c.SSMConv},
	} {
		if *k.v, err = metaInt(f, p+k.key, 0, c.RecLayers() > 0); err != nil {
			return err
		}
	}
	if c.RecLayers() == 0 {
		c.SSMInner = 0
		return nil
	}
	switch {
	case c.SSMInner <= 0 || c.SSMInner > 1<<16 || c.SSMHeads <= 0 || c.SSMInner%c.SSMHeads != 0:
		return fmt.Errorf("model: ssm.inner_size %d must be a positive multiple of ssm.time_step_rank %d (at most 65536)", c.SSMInner, c.SSMHeads)
	case c.SSMState <= 0 || c.SSMState > 1024 || c.SSMState%8 != 0:
		return fmt.Errorf("model: ssm.state_size %d must be a positive multiple of 8 (at most 1024)", c.SSMState)
	case c.SSMGroups <= 0 || c.SSMHeads%c.SSMGroups != 0:
		return fmt.Errorf("model: ssm.group_count %d must divide the %d heads", c.SSMGroups, c.SSMHeads)
	case c.SSMConv < 2 || c.SSMConv > 16:
		return fmt.Errorf("model: ssm.conv_kernel %d must be in [2, 16]", c.SSMConv)
	}
	c.RecShape = RecShape{
		RecState: c.SSMInner * c.SSMState,
		RecConv:  c.ssmConvCh(),
		RecTaps:  c.SSMConv - 1,
		RecIn:    c.ssmConvCh() + 2*c.SSMHeads,
		RecOut:   c.SSMInner,
	}
	return nil
}

// mamba2Layer loads a Mamba-2 layer's weights.
func (l loader) mamba2Layer(L *Layer, p string, c *Config) (err error) {
	H, ch := c.SSMHeads, c.ssmConvCh()
	if L.SSMIn, err = l.matrix(p+"ssm_in.weight", c.ssmInW(), c.NEmbd); err != nil {
		return err
	}
	if L.SSMOut, err = l.matrix(p+"ssm_out.weight", c.NEmbd, c.SSMInner); err != nil {
		return err
	}
	if L.SSMConvW, err = l.convKernel(p+"ssm_conv1d.weight", ch, c.SSMConv); err != nil {
		return err
	}
	if L.SSMConvB, err = l.vector(p+"ssm_conv1d.bias", ch); err != nil {
		return err
	}
	// ssm_a and ssm_d are {1, Heads}; accept them 1-D too.
	if L.SSMA, err = l.headVector(p+"ssm_a", H); err != nil {
		return err
	}
	if L.SSMD, err = l.headVector(p+"ssm_d", H); err != nil {
		return err
	}
	if L.SSMDtB, err = l.vector(p+"ssm_dt.bias", H); err != nil {
		return err
	}
	// ssm_norm is {Inner/Groups, Groups}, 1-D in quantized files.
	if c.SSMGroups == 1 {
		L.SSMNorm, err = l.vector(p+"ssm_norm.weight", c.SSMInner)
	} else {
		L.SSMNorm, err = l.vector2(p+"ssm_norm.weight", c.SSMInner/c.SSMGroups, c.SSMGroups)
	}
	if err != nil {
		return err
	}
	for h, a := range L.SSMA {
		if !(a <= 0) || math.IsInf(float64(a), 0) {
			return fmt.Errorf("model: tensor %q: A of head %d is %v, want a finite value <= 0", p+"ssm_a", h, a)
		}
	}
	return nil
}

// headVector loads a {1, n} (or {n}) tensor as n float32.
func (l loader) headVector(name string, n int) ([]float32, error) {
	if t, ok := l.f.Tensor(name); ok && len(t.Dims) >= 1 && t.Dims[0] == int64(n) {
		return l.vector(name, n)
	}
	return l.vector2(name, 1, n)
}

// mbBufs are the Mamba-2 block's batch buffers and the current step's
// job (its heads run on the pool).
type mbBufs struct {
	in  []float32 // [maxBatch][Inner+convCh+Heads] in-projection output: z, xBC, dt
	job struct {
		l                 int
		dst, src, in, out []float32
		n, longAt         int       // a pass's tokens (mamba2Run) and where base takes the state
		base              []float32 // the layer's base state
		log               []float32 // a replay's logged inputs
	}
	headsFn  func(lo, hi int)
	runFn    func(lo, hi int)
	replayFn func(lo, hi int)
	treeFn   func(w, lo, hi int)
	owner    [][]int32 // per worker: the node whose state each tree slot holds
}

// newMamba2 sizes the Mamba-2 block's buffers.
func (s *State) newMamba2() {
	c := &s.m.Config
	s.mb.in = make([]float32, s.maxBatch*c.ssmInW())
	s.mb.headsFn = s.mamba2Heads
	s.mb.runFn = s.mamba2RunHeads
	s.mb.replayFn = s.mamba2ReplayHeads
	s.mb.treeFn = s.mamba2TreeHeads
	s.mb.owner = make([][]int32, s.pool.n)
	for w := range s.mb.owner {
		s.mb.owner[w] = make([]int32, min(s.maxRows, s.maxBatch)) // the tree slots' depth (newRecState)
	}
}

// mamba2Tree runs a tree pass's recurrence of Mamba-2 layer l head by head
// (recState.runTree): per head, recTree's walk (a node from its parent's
// state in the slot of the parent's depth, a missing path recomputed) on
// the head's part of the slots.
func mamba2Tree(s *State, l, r, n int, start []float32) {
	j := &s.mb.job
	j.l, j.n, j.src = l, n, start
	s.pool.runWorker(s.mb.treeFn, s.m.SSMHeads, 1)
}

// mamba2TreeHeads runs heads [lo, hi) of the current tree pass on worker
// w's slot owners.
func (s *State) mamba2TreeHeads(w, lo, hi int) {
	c := &s.m.Config
	rs := &s.rec
	j := &s.mb.job
	H, N, G, inner := c.SSMHeads, c.SSMState, c.SSMGroups, c.SSMInner
	P := inner / H
	PN := P * N
	ch, In, Out := c.RecConv, c.RecIn, c.RecOut
	owner := s.mb.owner[w]
	for h := lo; h < hi; h++ {
		g := h / (H / G)
		step := func(dst, src []float32, a int, y []float32) {
			in := rs.in[a*In : (a+1)*In]
			var C []float32
			if y != nil {
				C = in[inner+(G+g)*N : inner+(G+g+1)*N]
			}
			ssmStep(dst[h*PN:(h+1)*PN], src[h*PN:(h+1)*PN], in[h*P:(h+1)*P], in[inner+g*N:inner+(g+1)*N], C, y, in[ch+h], in[ch+H+h])
		}
		for d := range owner {
			owner[d] = -1
		}
		for i := 0; i < j.n; i++ {
			_, anc := s.span(i, 0)
			d := len(anc) - 1
			k := d - 1
			for k >= 0 && owner[k] != anc[k] {
				k--
			}
			for ; k < d-1; k++ { // recompute the missing part of the path
				src := j.src
				if k >= 0 {
					src = rs.slots[k]
				}
				step(rs.slots[k+1], src, int(anc[k+1]), nil)
				owner[k+1] = anc[k+1]
			}
			src := j.src
			if d > 0 {
				src = rs.slots[d-1]
			}
			step(rs.slots[d], src, i, rs.out[i*Out+h*P:i*Out+(h+1)*P])
			owner[d] = int32(i)
			for e := d + 1; e < len(owner) && owner[e] >= 0; e++ {
				owner[e] = -1
			}
		}
	}
}

// mamba2Replay steps Mamba-2 layer l's base through its first n logged
// inputs into work (recState.replay), head by head, without the outputs:
// the state's bits are those of the token loop.
func mamba2Replay(s *State, l, r, n int) {
	rs := &s.rec
	j := &s.mb.job
	j.l, j.n, j.src, j.dst, j.log = l, n, rs.base[r], rs.work[r], rs.log[r]
	s.pool.run(s.mb.replayFn, s.m.SSMHeads, 1)
}

// mamba2ReplayHeads replays heads [lo, hi) of the current replay.
func (s *State) mamba2ReplayHeads(lo, hi int) {
	c := &s.m.Config
	j := &s.mb.job
	H, N, G, inner := c.SSMHeads, c.SSMState, c.SSMGroups, c.SSMInner
	P := inner / H
	PN := P * N
	ch, In := c.RecConv, c.RecIn
	for h := lo; h < hi; h++ {
		g := h / (H / G)
		src := j.src[h*PN : (h+1)*PN]
		dst := j.dst[h*PN : (h+1)*PN]
		for e := 0; e < j.n; e++ {
			in := j.log[e*In : (e+1)*In]
			ssmStep(dst, src, in[h*P:(h+1)*P], in[inner+g*N:inner+(g+1)*N], nil, nil, in[ch+h], in[ch+H+h])
			src = dst
		}
	}
}

// mamba2 runs layer l's Mamba-2 block over the batch of n tokens at pos0,
// adding its output to the residual stream.
// Its three parts, as deltaNet's: the input projection, the rows' own
// work against this state's, the output projection.
func (s *State) mamba2(l, n, pos0 int) {
	s.mamba2In(l, n)
	s.mamba2Rows(l, n, pos0)
	s.mamba2Out(l, n)
}

// mamba2In computes the input projection of n rows of layer l.
func (s *State) mamba2In(l, n int) {
	c, L := &s.m.Config, &s.m.Layers[l]
	E := c.NEmbd
	for i := 0; i < n; i++ {
		RMSNorm(s.xb[i*E:(i+1)*E], s.x[i*E:(i+1)*E], L.AttnNorm, c.NormEps)
	}
	s.mul(s.xb, n, product{w: L.SSMIn, out: s.mb.in})
}

// mamba2Out projects the outputs of n rows (rec.out) and adds them to the
// residual stream.
func (s *State) mamba2Out(l, n int) {
	s.mul(s.rec.out, n, product{w: s.m.Layers[l].SSMOut, out: s.proj})
	s.residual(n)
}

// mamba2Rows runs the convolution, the scan and the gated norm of the
// rows from this state's, their outputs into rec.out.
func (s *State) mamba2Rows(l, n, pos0 int) {
	c, L := &s.m.Config, &s.m.Layers[l]
	rs := &s.rec
	ch, H, inner, inW, In := c.RecConv, c.SSMHeads, c.SSMInner, c.ssmInW(), c.RecIn
	for i := 0; i < n; i++ {
		copy(rs.xc[i*ch:(i+1)*ch], s.mb.in[i*inW+inner:i*inW+inner+ch])
	}
	// ggml_ssm_conv's order (recConv), then the bias, then SiLU.
	s.recConv(l, n, pos0, L.SSMConvW)
	for i := 0; i < n; i++ {
		in := rs.in[i*In : (i+1)*In]
		xbc := in[:ch]
		copy(xbc, rs.y[i*ch:(i+1)*ch])
		addTo(xbc, L.SSMConvB)
		SiLUMul(xbc, rs.ones) // x/(1+e^-x), × 1: the vector kernels' SiLU
		raw := s.mb.in[i*inW+inner+ch : (i+1)*inW]
		dt, dA := in[ch:ch+H], in[ch+H:ch+2*H]
		for h := range dt {
			dt[h] = softplus(raw[h] + L.SSMDtB[h])
			dA[h] = ssmDecay(dt[h], L.SSMA[h])
		}
	}
	s.recRun(l, n, pos0)
	P, G := inner/H, c.SSMGroups
	gs := inner / G
	for i := 0; i < n; i++ {
		y := rs.out[i*inner : (i+1)*inner]
		x := rs.in[i*In : i*In+inner]
		for h := 0; h < H; h++ {
			D := L.SSMD[h]
			for p := h * P; p < (h+1)*P; p++ {
				y[p] += float32(x[p] * D)
			}
		}
		z := s.mb.in[i*inW : i*inW+inner]
		SiLUMul(z, y) // z = SiLU(z)·y
		for g := 0; g < G; g++ {
			RMSNorm(y[g*gs:(g+1)*gs], z[g*gs:(g+1)*gs], L.SSMNorm[g*gs:(g+1)*gs], c.NormEps)
		}
	}
}

// mamba2Step advances a Mamba-2 layer's state by one token (a recStep):
// every head by ssmStep, the heads split between the pool's workers.
func mamba2Step(s *State, l int, dst, src, in, out []float32) {
	j := &s.mb.job
	j.l, j.dst, j.src, j.in, j.out = l, dst, src, in, out
	s.pool.run(s.mb.headsFn, s.m.SSMHeads, 1)
}

// mamba2Run runs a causal pass's recurrence of Mamba-2 layer l head by
// head (recState.run): each head's state (P·N values) stays in cache over
// the pass's tokens instead of the layer's whole state streaming through
// memory once per token. Every head's steps are those of the token loop,
// in the same order: the same bits.
func mamba2Run(s *State, l, r, n int, src []float32) {
	rs := &s.rec
	j := &s.mb.job
	j.l, j.n, j.longAt, j.src, j.dst, j.base = l, n, rs.longAt, src, rs.work[r], rs.base[r]
	s.pool.run(s.mb.runFn, s.m.SSMHeads, 1)
}

// mamba2RunHeads runs heads [lo, hi) of the current pass.
func (s *State) mamba2RunHeads(lo, hi int) {
	c := &s.m.Config
	rs := &s.rec
	j := &s.mb.job
	H, N, G, inner := c.SSMHeads, c.SSMState, c.SSMGroups, c.SSMInner
	P := inner / H
	PN := P * N
	ch, In, Out := c.RecConv, c.RecIn, c.RecOut
	for h := lo; h < hi; h++ {
		g := h / (H / G)
		src := j.src[h*PN : (h+1)*PN]
		dst := j.dst[h*PN : (h+1)*PN]
		for i := 0; i < j.n; i++ {
			if i == j.longAt {
				copy(j.base[h*PN:(h+1)*PN], src)
			}
			in := rs.in[i*In : (i+1)*In]
			x := in[h*P : (h+1)*P]
			B := in[inner+g*N : inner+(g+1)*N]
			C := in[inner+(G+g)*N : inner+(G+g+1)*N]
			ssmStep(dst, src, x, B, C, rs.out[i*Out+h*P:i*Out+(h+1)*P], in[ch+h], in[ch+H+h])
			src = dst
		}
	}
}

// mamba2Heads steps heads [lo, hi) of the current step.
func (s *State) mamba2Heads(lo, hi int) {
	c := &s.m.Config
	j := &s.mb.job
	H, N, G, inner := c.SSMHeads, c.SSMState, c.SSMGroups, c.SSMInner
	P := inner / H
	PN := P * N
	ch := c.RecConv
	for h := lo; h < hi; h++ {
		g := h / (H / G)
		x := j.in[h*P : (h+1)*P]
		B := j.in[inner+g*N : inner+(g+1)*N]
		C := j.in[inner+(G+g)*N : inner+(G+g+1)*N]
		dt, dA := j.in[ch+h], j.in[ch+H+h]
		ssmStep(j.dst[h*PN:(h+1)*PN], j.src[h*PN:(h+1)*PN], x, B, C, j.out[h*P:(h+1)*P], dt, dA)
	}
}

// ssmDecay is exp(dt·A).
func ssmDecay(dt, A float32) float32 { return neon.Exp(float32(dt * A)) }

// ssmStep advances one head's state by one token with the active kernel
// set's SSMStep: dst[p][k] = src[p][k]·dA + B[k]·(x[p]·dt), each product
// rounded before the sum (no fused multiply-add: the same bits on every
// set and platform), and, with y, y[p] = Σ_k dst[p][k]·C[k] summed in
// eight lanes k mod 8, combined as ((l0+l4)+(l1+l5))+((l2+l6)+(l3+l7)).
// dst may be src; len(B) is the state size N (a multiple of 8).
func ssmStep(dst, src, x, B, C, y []float32, dt, dA float32) {
	neon.Active().SSMStep(dst, src, x, B, C, y, dt, dA)
}
