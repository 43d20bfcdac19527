package model

import (
	"fmt"
	"math"
	"unsafe"

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
// in any batch.
//
// The state under speculation. A State keeps per Mamba-2 layer
//   - two state buffers: st[cur] is the state at position base (committed),
//     st[1-cur] the state after the last causal pass (at tip, or no
//     position: tip -1);
//   - a log of the scan's per-token inputs (x, B, C after the convolution
//     and dt after softplus: Inner+2·Groups·State+Heads values) of the
//     positions [base, logEnd), at most R = MaxLogitRows of them;
//   - a ring of the convolution's input rows of the last R+Conv-1
//     positions (like the short convolution's ring, shortconv.go).
//
// A pass at pos0 first brings the committed state to pos0: when the last
// pass ended there (every token kept: plain decoding, a fully accepted
// draft) the buffers swap roles and nothing is computed; otherwise the
// logged inputs of [base, pos0) are replayed onto st[cur] (the accepted
// part of a verification pass: one step per accepted token). The pass then
// steps from st[cur] into st[1-cur] (a tree: each node from its parent's
// state, in per-worker scratch), logs its inputs and leaves st[cur] alone
// (a prefill chunk longer than R commits the state R tokens before its
// end). A rejected draft thus costs nothing: Truncate only moves logEnd.
// Truncate reaches any position in [base, logEnd] (ExactPrefix), Compact
// moves the kept path's log and ring rows as it moves keys and values, and
// a snapshot holds the convolution rows and the state at its end.

// SSM is the shape of the Mamba-2 layers.
type SSM struct {
	SSMLayers []bool // layer l is a Mamba-2 layer (head_count_kv 0); nil: none
	SSMInner  int    // channels of x, z and y (ssm.inner_size)
	SSMState  int    // state size N (ssm.state_size)
	SSMHeads  int    // heads (ssm.time_step_rank)
	SSMGroups int    // groups of B and C (ssm.group_count)
	SSMConv   int    // convolution width, the current position included (ssm.conv_kernel)
}

// IsSSM reports whether layer l is a Mamba-2 layer.
func (c *Config) IsSSM(l int) bool { return c.SSMLayers != nil && c.SSMLayers[l] }

// SSMLayerCount is the number of Mamba-2 layers.
func (c *Config) SSMLayerCount() int {
	n := 0
	for _, b := range c.SSMLayers {
		if b {
			n++
		}
	}
	return n
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
	if c.SSMLayers == nil {
		c.SSMLayers = make([]bool, c.NLayer) // a single head_count_kv: attention only
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
		if *k.v, err = metaInt(f, p+k.key, 0, c.SSMLayerCount() > 0); err != nil {
			return err
		}
	}
	if c.SSMLayerCount() == 0 {
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

// snapVersionSSM is the version of blobs with a Mamba-2 state.
const snapVersionSSM = 6

// ssmState is the recurrent state of a State's Mamba-2 layers.
type ssmState struct {
	H, P, N, G int            // heads, head size, state size, groups
	inner, ch  int            // channels of x, of xBC
	taps, inW  int            // convolution rows before the current one; in-projection width
	R          int            // log rows (positions a pass may rewind over)
	Rc         int            // ring rows: R + taps
	st         [2][][]float32 // per layer (nil for others): [H][P][N]
	cur        int            // st[cur] is the committed state
	base       int            // position of st[cur]
	tip        int            // position of st[1-cur] (-1: none)
	// tipDraft: st[1-cur] is a self-speculative draft's state (passes
	// that skip blocks), which only another draft pass continues; tipOK[l]
	// says layer l computed it (a layer the drafts skipped so far still
	// has the state at the drafts' start: st[cur]).
	tipDraft bool
	tipOK    []bool
	srcTip   bool // the current pass continues the draft in st[1-cur]
	lastTree int  // pos0 of the last target tree pass (-1: none since)
	// A checkpoint (KeepAt): the state at position ckPos (-1: none) of
	// the tokens the State holds, and the convolution rows before it.
	keep   int
	ckPos  int
	ck     [][]float32 // per layer: [H][P][N] state, then [taps][ch] rows
	logEnd int         // the log holds the inputs of [base, logEnd)
	log    [][]float32 // per layer: [R][ch+H] x, B, C, dt of position p in row p%R
	ring   [][]float32 // per layer: [Rc][ch] convolution input of position p in row p%Rc
	lo     int         // the ring holds the rows of positions [lo, Len())
	in     []float32   // [maxBatch][inW] in-projection output
	xbc    []float32   // [maxBatch][ch+H] the batch's scan inputs (log row layout)
	dA     []float32   // [maxBatch][H] decays
	y      []float32   // [maxBatch][Inner] scan output, then the gated, normed y
	ones   []float32   // [ch] SiLU(x) = SiLUMul(x, 1)
	sc     [][]float32 // per worker: [R][P·N] tree nodes' states
	// the current job
	jl, jn, jpos0 int
	jtree         bool
	scanFn        func(w, lo, hi int)
	replayFn      func(w, lo, hi int)
	layers        []int // the Mamba-2 layers
}

// hasSSM reports whether the model has Mamba-2 layers.
func (s *State) hasSSM() bool { return s.ssm.st[0] != nil }

// newSSMState sizes the Mamba-2 state (nothing without Mamba-2 layers).
func (s *State) newSSMState() {
	c := &s.m.Config
	if c.SSMLayerCount() == 0 {
		return
	}
	ss := &s.ssm
	ss.H, ss.N, ss.G, ss.inner = c.SSMHeads, c.SSMState, c.SSMGroups, c.SSMInner
	ss.P = ss.inner / ss.H
	ss.ch, ss.taps, ss.inW = c.ssmConvCh(), c.SSMConv-1, c.ssmInW()
	ss.R = s.maxRows
	ss.Rc = ss.R + ss.taps
	for b := range ss.st {
		ss.st[b] = make([][]float32, c.NLayer)
	}
	ss.log = make([][]float32, c.NLayer)
	ss.ring = make([][]float32, c.NLayer)
	for l := range c.NLayer {
		if c.IsSSM(l) {
			ss.st[0][l] = make([]float32, ss.inner*ss.N)
			ss.st[1][l] = make([]float32, ss.inner*ss.N)
			ss.log[l] = make([]float32, ss.R*(ss.ch+ss.H))
			ss.ring[l] = make([]float32, ss.Rc*ss.ch)
			ss.layers = append(ss.layers, l)
		}
	}
	B := s.maxBatch
	ss.in = make([]float32, B*ss.inW)
	ss.xbc = make([]float32, B*(ss.ch+ss.H))
	ss.dA = make([]float32, B*ss.H)
	ss.y = make([]float32, B*ss.inner)
	ss.ones = make([]float32, ss.ch)
	for i := range ss.ones {
		ss.ones[i] = 1
	}
	ss.sc = make([][]float32, s.pool.n)
	for w := range ss.sc {
		ss.sc[w] = make([]float32, ss.R*ss.P*ss.N)
	}
	ss.scanFn = s.ssmScanUnits
	ss.replayFn = s.ssmReplayUnits
	ss.tip, ss.lastTree, ss.ckPos = -1, -1, -1
	ss.tipOK = make([]bool, c.NLayer)
}

// SSMMemory is the memory the State holds for the Mamba-2 layers' state:
// two states, the log and the ring of every layer, and the per-worker
// scratch of tree passes.
func (s *State) SSMMemory() int64 {
	if !s.hasSSM() {
		return 0
	}
	ss := &s.ssm
	n := int64(0)
	for _, l := range ss.layers {
		n += int64(len(ss.st[0][l]) + len(ss.st[1][l]) + len(ss.log[l]) + len(ss.ring[l]))
	}
	for _, b := range ss.sc {
		n += int64(len(b))
	}
	return 4 * n
}

// ssmReset empties the state (position 0: zeros).
func (s *State) ssmReset() {
	ss := &s.ssm
	for _, l := range ss.layers {
		clear(ss.st[ss.cur][l])
	}
	ss.base, ss.logEnd, ss.tip, ss.lo, ss.ckPos, ss.lastTree = 0, 0, -1, 0, -1, -1
	ss.tipDraft = false
}

// KeepAt asks the State to keep the recurrent state at position k (a
// prefix worth a snapshot: the system prompt's) when a pass crosses it,
// so that Truncate and Snapshot reach it later (ExactPrefix). Models
// without Mamba-2 layers need nothing. The checkpoint's memory (one
// state, SSMStateBytes) is taken at the first call.
func (s *State) KeepAt(k int) {
	if !s.hasSSM() || k <= 0 {
		return
	}
	ss := &s.ssm
	if ss.ck == nil {
		ss.ck = make([][]float32, len(ss.st[0]))
		for _, l := range ss.layers {
			ss.ck[l] = make([]float32, ss.inner*ss.N+ss.taps*ss.ch)
		}
	}
	ss.keep = k
}

// ssmCheck refuses a pass that would continue from positions whose state
// the State does not hold (after a tree pass that was not compacted, or a
// self-speculative draft that was not truncated).
func (s *State) ssmCheck(skip *Skip) error {
	if !s.hasSSM() {
		return nil
	}
	ss := &s.ssm
	if s.n > ss.logEnd && !(s.n == ss.tip && (!ss.tipDraft || skip != nil)) {
		return fmt.Errorf("model: the Mamba-2 state is exact up to position %d, the cache holds %d (compact a tree or truncate a draft first)", s.ssm.logEnd, s.n)
	}
	return nil
}

// ssmExact is ExactPrefix for the Mamba-2 state.
func (s *State) ssmExact(n int) int {
	ss := &s.ssm
	switch {
	case n == 0 || (n == ss.tip && !ss.tipDraft) || (n >= ss.base && n <= ss.logEnd):
		return n
	case ss.ckPos > 0 && ss.ckPos <= n:
		return ss.ckPos
	}
	return 0
}

// ssmTruncate rewinds to position n, which ssmExact returned.
func (s *State) ssmTruncate(n int) {
	ss := &s.ssm
	if n == 0 {
		s.ssmReset()
		return
	}
	if n < ss.ckPos {
		ss.ckPos = -1
	}
	if n != ss.tip || ss.tipDraft {
		ss.tip, ss.tipDraft = -1, false
	}
	if n == ss.tip || (n >= ss.base && n <= ss.logEnd) {
		ss.logEnd = min(ss.logEnd, n)
		return
	}
	// Back to the checkpoint (n == ckPos, before base).
	E := ss.inner * ss.N
	for _, l := range ss.layers {
		copy(ss.st[ss.cur][l], ss.ck[l][:E])
		for j := 0; j < ss.taps; j++ {
			if p := n - ss.taps + j; p >= 0 {
				r := p % ss.Rc
				copy(ss.ring[l][r*ss.ch:(r+1)*ss.ch], ss.ck[l][E+j*ss.ch:E+(j+1)*ss.ch])
			}
		}
	}
	ss.base, ss.logEnd, ss.lo = n, n, max(0, n-ss.taps)
}

// ssmPassBegin brings the committed state to pos0: the other buffer when
// the last pass ended there, else a replay of the logged inputs.
func (s *State) ssmPassBegin(pos0 int) {
	ss := &s.ssm
	ss.srcTip = false
	switch {
	case pos0 == ss.tip && ss.tipDraft:
		ss.srcTip = true // a draft continues its own state (ssmCheck allowed it)
		return
	case pos0 == ss.base:
	case pos0 == ss.tip:
		ss.cur, ss.base = 1-ss.cur, pos0
	default:
		s.ssmReplay(pos0)
	}
	ss.tip, ss.tipDraft = -1, false
	clear(ss.tipOK)
}

// ssmReplay steps st[cur] of every layer over the logged positions
// [base, to).
func (s *State) ssmReplay(to int) {
	ss := &s.ssm
	ss.jn = to
	s.pool.kind = JobAttention
	s.pool.runWorker(ss.replayFn, len(ss.layers)*ss.H, 1)
	ss.base = to
}

// ssmReplayUnits replays units (layer, head) [lo, hi).
func (s *State) ssmReplayUnits(w, lo, hi int) {
	ss := &s.ssm
	P, N, H := ss.P, ss.N, ss.H
	for u := lo; u < hi; u++ {
		l, h := ss.layers[u/H], u%H
		A := s.m.Layers[l].SSMA[h]
		st := ss.st[ss.cur][l][h*P*N : (h+1)*P*N]
		for p := ss.base; p < ss.jn; p++ {
			row := ss.log[l][(p%ss.R)*(ss.ch+H) : (p%ss.R+1)*(ss.ch+H)]
			dt := row[ss.ch+h]
			x, B, _ := ss.headIO(row, h)
			ssmStep(st, st, x, B, nil, nil, dt, ssmDecay(dt, A), N)
		}
	}
}

// headIO is head h's x, B and C in a scan-input row.
func (ss *ssmState) headIO(row []float32, h int) (x, B, C []float32) {
	g := h / (ss.H / ss.G)
	x = row[h*ss.P : (h+1)*ss.P]
	B = row[ss.inner+g*ss.N : ss.inner+(g+1)*ss.N]
	C = row[ss.inner+(ss.G+g)*ss.N : ss.inner+(ss.G+g+1)*ss.N]
	return
}

// ssmDecay is exp(dt·A).
func ssmDecay(dt, A float32) float32 { return neon.Exp(float32(dt * A)) }

// softplus as ggml computes it: log(1+exp(x)), x itself above 20.
func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log1p(float64(neon.Exp(x))))
}

// ssmStep advances one head's state by one token: dst[p][k] = src[p][k]·dA
// + B[k]·(x[p]·dt), each product rounded before the sum (no fused
// multiply-add: the same bits on every platform), and, with y, y[p] =
// Σ_k dst[p][k]·C[k] summed in eight lanes k mod 8, combined as
// ((l0+l4)+(l1+l5))+((l2+l6)+(l3+l7)). dst may be src.
func ssmStep(dst, src, x, B, C, y []float32, dt, dA float32, N int) {
	B = B[:N]
	for p := range x {
		xdt := float32(x[p] * dt)
		d := dst[p*N : (p+1)*N : (p+1)*N]
		s := src[p*N : (p+1)*N : (p+1)*N]
		if y == nil {
			for k := range d {
				d[k] = float32(s[k]*dA) + float32(B[k]*xdt)
			}
			continue
		}
		C := C[:N]
		var a0, a1, a2, a3, a4, a5, a6, a7 float32
		for k := 0; k+8 <= N; k += 8 {
			s8, b8, c8, d8 := s[k:k+8:k+8], B[k:k+8:k+8], C[k:k+8:k+8], d[k:k+8:k+8]
			v0 := float32(s8[0]*dA) + float32(b8[0]*xdt)
			v1 := float32(s8[1]*dA) + float32(b8[1]*xdt)
			v2 := float32(s8[2]*dA) + float32(b8[2]*xdt)
			v3 := float32(s8[3]*dA) + float32(b8[3]*xdt)
			v4 := float32(s8[4]*dA) + float32(b8[4]*xdt)
			v5 := float32(s8[5]*dA) + float32(b8[5]*xdt)
			v6 := float32(s8[6]*dA) + float32(b8[6]*xdt)
			v7 := float32(s8[7]*dA) + float32(b8[7]*xdt)
			d8[0], d8[1], d8[2], d8[3], d8[4], d8[5], d8[6], d8[7] = v0, v1, v2, v3, v4, v5, v6, v7
			a0 += float32(v0 * c8[0])
			a1 += float32(v1 * c8[1])
			a2 += float32(v2 * c8[2])
			a3 += float32(v3 * c8[3])
			a4 += float32(v4 * c8[4])
			a5 += float32(v5 * c8[5])
			a6 += float32(v6 * c8[6])
			a7 += float32(v7 * c8[7])
		}
		y[p] = ((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7))
	}
}

// ssmHist is the convolution input row that batch token i reads back
// positions before its own in layer l: an ancestor's (or an earlier
// token's) row of this batch, else the ring's (nil before position 0).
func (s *State) ssmHist(l, i, back, pos0 int) []float32 {
	ss := &s.ssm
	row := func(j int) []float32 { return ss.in[j*ss.inW+ss.inner : j*ss.inW+ss.inner+ss.ch] }
	ringRow := func(p int) []float32 {
		if p < 0 {
			return nil
		}
		r := p % ss.Rc
		return ss.ring[l][r*ss.ch : (r+1)*ss.ch]
	}
	if !s.lay.on {
		if i-back >= 0 {
			return row(i - back)
		}
		return ringRow(pos0 + i - back)
	}
	vis, anc := s.span(i, pos0)
	if k := len(anc) - 1; back <= k {
		return row(int(anc[k-back]))
	} else {
		return ringRow(vis - (back - k))
	}
}

// mamba2 runs layer l's Mamba-2 block over the batch of n tokens at pos0,
// adding its output to the residual stream, and keeps what the next
// passes read.
func (s *State) mamba2(l, n, pos0 int) {
	c, L := &s.m.Config, &s.m.Layers[l]
	ss := &s.ssm
	E, ch, H, inW, lw := c.NEmbd, ss.ch, ss.H, ss.inW, ss.ch+ss.H
	for i := 0; i < n; i++ {
		RMSNorm(s.xb[i*E:(i+1)*E], s.x[i*E:(i+1)*E], L.AttnNorm, c.NormEps)
	}
	s.mul(s.xb, n, product{w: L.SSMIn, out: ss.in})
	for i := 0; i < n; i++ {
		// ggml_ssm_conv's order: the oldest tap first, summed from zero;
		// then the bias, then SiLU.
		xbc := ss.xbc[i*lw : i*lw+ch]
		clear(xbc)
		for j := 0; j <= ss.taps; j++ {
			var r []float32
			if j == ss.taps {
				r = ss.in[i*inW+ss.inner : i*inW+ss.inner+ch]
			} else {
				r = s.ssmHist(l, i, ss.taps-j, pos0)
			}
			if r != nil {
				convTap(xbc, L.SSMConvW[j*ch:(j+1)*ch], r)
			}
		}
		addTo(xbc, L.SSMConvB)
		SiLUMul(xbc, ss.ones)
		dt := ss.xbc[i*lw+ch : (i+1)*lw]
		raw := ss.in[i*inW+ss.inner+ch : (i+1)*inW]
		for h := range dt {
			dt[h] = softplus(raw[h] + L.SSMDtB[h])
			ss.dA[i*H+h] = ssmDecay(dt[h], L.SSMA[h])
		}
	}
	ss.jl, ss.jn, ss.jpos0, ss.jtree = l, n, pos0, s.lay.on
	s.pool.kind = JobAttention
	s.pool.runWorker(ss.scanFn, H, 1)
	P, G := ss.P, ss.G
	gs := ss.inner / G
	for i := 0; i < n; i++ {
		y := ss.y[i*ss.inner : (i+1)*ss.inner]
		x := ss.xbc[i*lw : i*lw+ss.inner]
		for h := 0; h < H; h++ {
			D := L.SSMD[h]
			for p := h * P; p < (h+1)*P; p++ {
				y[p] += float32(x[p] * D)
			}
		}
		z := ss.in[i*inW : i*inW+ss.inner]
		SiLUMul(z, y) // z = SiLU(z)·y
		for g := 0; g < G; g++ {
			RMSNorm(y[g*gs:(g+1)*gs], z[g*gs:(g+1)*gs], L.SSMNorm[g*gs:(g+1)*gs], c.NormEps)
		}
	}
	s.mul(ss.y, n, product{w: L.SSMOut, out: s.proj})
	s.residual(n)
	if s.probing {
		return
	}
	if s.ssmCrossesKeep(n, pos0) {
		s.ssmKeepRows(l, n, pos0)
	}
	// Keep the convolution rows (the last Rc of a causal pass, every node
	// of a tree) and the scan inputs (the last R).
	for i := max(0, n-ss.Rc); i < n; i++ {
		r := (pos0 + i) % ss.Rc
		copy(ss.ring[l][r*ch:(r+1)*ch], ss.in[i*inW+ss.inner:i*inW+ss.inner+ch])
	}
	if s.skip != nil {
		ss.tipOK[l] = true
		return // a draft's inputs are never replayed
	}
	for i := max(0, n-ss.R); i < n; i++ {
		r := (pos0 + i) % ss.R
		copy(ss.log[l][r*lw:(r+1)*lw], ss.xbc[i*lw:(i+1)*lw])
	}
}

// ssmCrossesKeep reports whether the current pass is a target's causal
// pass that crosses the checkpoint position.
func (s *State) ssmCrossesKeep(n, pos0 int) bool {
	ss := &s.ssm
	return ss.ck != nil && !s.lay.on && s.skip == nil && !s.probing && pos0 < ss.keep && ss.keep <= pos0+n
}

// ssmKeepRows copies layer l's convolution rows before the checkpoint
// position (before the ring rows of this pass are written).
func (s *State) ssmKeepRows(l, n, pos0 int) {
	ss := &s.ssm
	E, inW := ss.inner*ss.N, ss.inW
	for j := 0; j < ss.taps; j++ {
		dst := ss.ck[l][E+j*ss.ch : E+(j+1)*ss.ch]
		switch p := ss.keep - ss.taps + j; {
		case p < 0:
			clear(dst)
		case p >= pos0:
			copy(dst, ss.in[(p-pos0)*inW+ss.inner:(p-pos0)*inW+ss.inner+ss.ch])
		default:
			r := p % ss.Rc
			copy(dst, ss.ring[l][r*ss.ch:(r+1)*ss.ch])
		}
	}
}

// ssmScanUnits runs the scan of heads [lo, hi) of the current layer: a
// causal pass from st[cur] into st[1-cur] (committing st[cur] R tokens
// before the end of a longer pass), a tree from each node's parent's
// state in the worker's scratch.
func (s *State) ssmScanUnits(w, lo, hi int) {
	ss := &s.ssm
	l, n := ss.jl, ss.jn
	P, N, H, lw := ss.P, ss.N, ss.H, ss.ch+ss.H
	PN := P * N
	commit := n - ss.R // after this many tokens the state is committed (if > 0)
	if s.skip != nil {
		commit = 0
	}
	keep := -1
	if s.ssmCrossesKeep(n, ss.jpos0) {
		keep = ss.keep - ss.jpos0 // after this many tokens the state is the checkpoint's
	}
	for h := lo; h < hi; h++ {
		base := ss.st[ss.cur][l][h*PN : (h+1)*PN]
		tip := ss.st[1-ss.cur][l][h*PN : (h+1)*PN]
		if ss.srcTip && ss.tipOK[l] {
			base = tip // a draft continued: its state so far
		}
		for i := 0; i < n; i++ {
			row := ss.xbc[i*lw : (i+1)*lw]
			x, B, C := ss.headIO(row, h)
			y := ss.y[i*ss.inner+h*P : i*ss.inner+(h+1)*P]
			dt, dA := row[ss.ch+h], ss.dA[i*H+h]
			if ss.jtree {
				src := base
				if _, anc := s.span(i, ss.jpos0); len(anc) >= 2 {
					a := int(anc[len(anc)-2])
					src = ss.sc[w][a*PN : (a+1)*PN]
				}
				ssmStep(ss.sc[w][i*PN:(i+1)*PN], src, x, B, C, y, dt, dA, N)
				continue
			}
			src := tip
			if i == 0 {
				src = base
			}
			ssmStep(tip, src, x, B, C, y, dt, dA, N)
			if i+1 == commit {
				copy(base, tip)
			}
			if i+1 == keep {
				copy(ss.ck[l][h*PN:(h+1)*PN], tip)
			}
		}
	}
}

// ssmPassEnd records where the state stands after a pass of n tokens at
// pos0 (a probe changes nothing).
func (s *State) ssmPassEnd(n, pos0 int) {
	ss := &s.ssm
	if s.probing {
		return
	}
	ss.lo = max(ss.lo, pos0+n-ss.Rc)
	if s.ssmCrossesKeep(n, pos0) {
		ss.ckPos = ss.keep
	}
	ss.lastTree = -1
	switch {
	case s.lay.on:
		// A tree: nothing past pos0 is exact until Compact keeps a path
		// (of a target's tree) or Truncate drops it.
		ss.logEnd = min(ss.logEnd, pos0)
		ss.tip, ss.tipDraft = -1, false
		if s.skip == nil {
			ss.lastTree = pos0
		}
	case s.skip != nil:
		// A draft: its state is the tip, which only drafts continue.
		ss.logEnd = min(ss.logEnd, pos0)
		ss.tip, ss.tipDraft = pos0+n, true
	default:
		ss.base = max(pos0, pos0+n-ss.R)
		ss.tip, ss.logEnd = pos0+n, pos0+n
	}
}

// ssmCompact moves the log and ring rows of the kept tree nodes like
// Compact moves their keys and values.
func (s *State) ssmCompact(base int, nodes []int32) {
	ss := &s.ssm
	lw := ss.ch + ss.H
	end := base + len(nodes)
	identity := true
	for d, j := range nodes {
		identity = identity && int(j) == d
	}
	if identity {
		// A prefix of the last pass: what Truncate does.
		if end != ss.tip || ss.tipDraft {
			ss.tip, ss.tipDraft = -1, false
		}
		if ss.lastTree == base {
			ss.logEnd = end // a target's tree: its logged rows
		} else {
			ss.logEnd = min(ss.logEnd, end)
		}
		return
	}
	ss.tip, ss.tipDraft = -1, false
	if ss.lastTree != base || base < ss.base {
		ss.logEnd = min(ss.logEnd, base) // not a target's tree: nothing to keep
		return
	}
	for _, l := range ss.layers {
		for d, j := range nodes {
			if int(j) == d {
				continue
			}
			f, t := (base+int(j))%ss.R, (base+d)%ss.R
			copy(ss.log[l][t*lw:(t+1)*lw], ss.log[l][f*lw:(f+1)*lw])
			f, t = (base+int(j))%ss.Rc, (base+d)%ss.Rc
			copy(ss.ring[l][t*ss.ch:(t+1)*ss.ch], ss.ring[l][f*ss.ch:(f+1)*ss.ch])
		}
	}
	ss.logEnd = end
}

// ssmSnapshotSize is the size of the Mamba-2 state in a snapshot.
func (s *State) ssmSnapshotSize() int {
	if !s.hasSSM() {
		return 0
	}
	return int(s.m.SSMStateBytes())
}

// appendSSM appends the Mamba-2 state at position n (which ExactPrefix
// allows): per layer the convolution rows of the taps positions before n
// (oldest first, zeros before position 0), then the scan state [H][P][N],
// as little-endian float32.
func (s *State) appendSSM(dst []byte, n int) []byte {
	if !s.hasSSM() {
		return dst
	}
	ss := &s.ssm
	PN := ss.P * ss.N
	if n > 0 && n == ss.ckPos && (n < ss.base || n > ss.logEnd) && !(n == ss.tip && !ss.tipDraft) {
		E := ss.inner * ss.N
		for _, l := range ss.layers {
			dst = appendF32(dst, ss.ck[l][E:])
			dst = appendF32(dst, ss.ck[l][:E])
		}
		return dst
	}
	for _, l := range ss.layers {
		for j := 0; j < ss.taps; j++ {
			p := n - ss.taps + j
			if p < 0 {
				dst = append(dst, make([]byte, 4*ss.ch)...)
				continue
			}
			r := p % ss.Rc
			dst = appendF32(dst, ss.ring[l][r*ss.ch:(r+1)*ss.ch])
		}
		var st []float32
		switch {
		case n == 0:
		case n == ss.tip && !ss.tipDraft:
			st = ss.st[1-ss.cur][l]
		case n == ss.base:
			st = ss.st[ss.cur][l]
		}
		if st != nil || n == 0 {
			if n == 0 {
				dst = append(dst, make([]byte, 4*ss.inner*ss.N)...)
			} else {
				dst = appendF32(dst, st)
			}
			continue
		}
		// A position inside the log: the committed state replayed, head
		// by head, in scratch.
		A := s.m.Layers[l].SSMA
		tmp := ss.sc[0][:PN]
		for h := 0; h < ss.H; h++ {
			copy(tmp, ss.st[ss.cur][l][h*PN:(h+1)*PN])
			for p := ss.base; p < n; p++ {
				row := ss.log[l][(p%ss.R)*(ss.ch+ss.H) : (p%ss.R+1)*(ss.ch+ss.H)]
				dt := row[ss.ch+h]
				x, B, _ := ss.headIO(row, h)
				ssmStep(tmp, tmp, x, B, nil, nil, dt, ssmDecay(dt, A[h]), ss.N)
			}
			dst = appendF32(dst, tmp)
		}
	}
	return dst
}

// readSSM loads the Mamba-2 state of a snapshot of n positions (src holds
// exactly ssmSnapshotSize bytes) as the committed state at n.
func (s *State) readSSM(src *chunkReader, n int) {
	ss := &s.ssm
	s.ssmReset()
	var skip [4]byte
	for _, l := range ss.layers {
		for j := 0; j < ss.taps; j++ {
			p := n - ss.taps + j
			if p < 0 {
				for range ss.ch {
					src.read(skip[:])
				}
				continue
			}
			r := p % ss.Rc
			readF32(ss.ring[l][r*ss.ch:(r+1)*ss.ch], src)
		}
		readF32(ss.st[ss.cur][l], src)
	}
	ss.base, ss.logEnd, ss.lo = n, n, max(0, n-ss.taps)
}

func appendF32(dst []byte, src []float32) []byte {
	if littleEndian && len(src) > 0 {
		return append(dst, unsafe.Slice((*byte)(unsafe.Pointer(&src[0])), 4*len(src))...)
	}
	for _, v := range src {
		dst = appendU32(dst, math.Float32bits(v))
	}
	return dst
}

func readF32(dst []float32, src *chunkReader) {
	if len(dst) == 0 {
		return
	}
	if littleEndian {
		src.read(unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 4*len(dst)))
		return
	}
	var b [4]byte
	for i := range dst {
		src.read(b[:])
		dst[i] = math.Float32frombits(le32(b[:]))
	}
}
