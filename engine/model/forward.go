package model

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/geisten/geist/neon"
	"github.com/geisten/geist/quant"
)

// ErrContextFull is returned when a forward pass would run past the context.
var ErrContextFull = errors.New("model: context is full")

// State is one sequence's KV cache and every buffer a forward pass needs,
// all sized once. A forward pass over a batch of tokens computes each token
// exactly as it would alone: the same kernels, the same accumulation order.
type State struct {
	m        *Model
	ctx      int     // positions the cache holds now (the stride of its rows)
	limit    int     // positions it may grow to (Ctx)
	maxBatch int     // tokens per forward pass
	maxRows  int     // tokens per pass whose logits are returned
	n        int     // positions filled
	rows     int     // tokens of the last ForwardRows batch whose logits Logits gives (0: none)
	toks     []int32 // [ctx] the tokens at positions 0..n-1 (len n)
	lay      layout  // attention pattern of a tree or probe pass
	skip     *Skip   // blocks the current pass leaves out
	probing  bool    // the current pass is a Probe (it changes no state)
	yield    func()  // StateOptions.Yield (nil: none)
	conv     convState
	mb       mbBufs // the Mamba-2 block's buffers (mamba2.go)

	kvType quant.Type
	kc, vc [][]uint16 // F16 cache per layer: [NHeadKV][cap][HeadDim] keys, [NHeadKV][cap][HeadDimV] values
	kq, vq [][]byte   // Q8_0 cache per layer: [NHeadKV][cap][kRow] keys, [NHeadKV][cap][vRow] values
	kRow   []int      // per layer: bytes of one Q8_0 key row
	vRow   []int      // per layer: bytes of one Q8_0 value row
	// kvCap is the slots of layer l's cache (of the layer it reads): ctx,
	// or for a sliding-window layer a ring of ringSize slots, position p
	// in slot p % kvCap[l] (see ring.go).
	kvCap []int
	kvLo  int // the rings hold the keys of positions [kvLo, Len())
	// ringSlots is the slots of a local layer's ring (0: no ring).
	ringSlots int

	pool    *pool
	mulFn   func(lo, hi int)    // s.mulRange, bound once
	quantFn func(lo, hi int)    // s.quantRange, bound once
	attnFn  func(w, lo, hi int) // s.attnUnits, bound once
	attnW   []attnScratch       // per worker
	job     struct {            // parameters of the current pool job
		ps    [maxProducts]product // the products of a mul (np of them)
		np    int
		x     []float32 // their input
		n     int
		l     int
		pos0  int
		tiles attnTiles
	}

	x, xb    []float32    // [maxBatch][NEmbd] residual stream, normed input
	q, k, v  []float32    // [maxBatch][NHead*HeadDim], [maxBatch][kDim], [maxBatch][vDim]
	qg       []float32    // [maxBatch][2·NHead*HeadDim] gated attention: queries and gates interleaved per head (qwen35)
	qgate    []float32    // [maxBatch][NHead*HeadDim] the output gates
	rec      recState     // the recurrent layers' state (recurrent.go)
	dn       dnBufs       // the gated DeltaNet block's buffers (deltanet.go)
	att      []float32    // [maxBatch][NHead*HeadDimV] attention output
	proj     []float32    // [maxBatch][NEmbd] projection output
	gate, up []float32    // [maxBatch][NFF]
	ropeCS   []float32    // [maxBatch][RopeDim] cos/sin pairs of the batch's positions
	ropeSWA  []float32    // [maxBatch][RopeDimSWA] the same for local layers (gemma4)
	ropeFreq []float32    // the rope frequency divisors of this context (nil: none)
	moe      moeBufs      // the mixture-of-experts block's buffers
	ones     []float32    // [max head size] the weight of an unweighted norm
	ple      []float32    // [maxBatch][NLayer·PerLayerEmbd] per-layer inputs (gemma4 E2B/E4B)
	pleTok   []float32    // [NLayer·PerLayerEmbd] one token's per-layer embedding
	pleRow   []byte       // its row
	pleG     []float32    // [maxBatch][PerLayerEmbd] the per-layer gate
	logits   []float32    // [maxRows][NVocab]
	acts     [][]byte     // quantized activations, one buffer per format of a mul
	prof     *StepProfile // nil unless EnableProfile
	row      []byte       // [TokEmbd.RowBytes()] one embedding row

	slotOf bool         // a NewSlot state: the pool is another state's, the row buffers are a ForwardBatch workspace's
	bt     batchScratch // ForwardBatch's per-pass bookkeeping (batch.go)

	capLayers []int     // layers whose input every pass keeps (CaptureInputs; nil: none)
	feat      []float32 // [maxBatch][len(capLayers)·NEmbd] those inputs
	hx        []float32 // [maxBatch][NEmbd] the final hidden rows of its last ForwardBatch pass (KeepRows; nil: none)
	hxOn      bool      // HiddenNormed reads hx: the last pass over this state was a ForwardBatch pass
}

// maxProducts is the most products one mul runs together (q, k and v).
const maxProducts = 3

// product is one matrix product of a mul: out = x·wᵀ, its rows at off in
// the job's concatenated rows, its activations in acts[act].
type product struct {
	w   *quant.Matrix
	out []float32
	off int
	act int
}

// StateOptions size a State.
type StateOptions struct {
	Ctx     int // positions the KV cache holds
	Batch   int // most tokens per forward pass
	Threads int // worker goroutines for products and attention (0: 1)
	// LogitRows is the most tokens of one pass whose logits are returned
	// (verification needs a draft's worth; 0: min(Batch, 33)). The logits
	// buffer is the largest one for big vocabularies, so it is sized apart.
	LogitRows int
	// MaxCtx is how many positions the cache may grow to, on demand, when
	// a pass needs more than Ctx (0: Ctx; never less than Ctx).
	MaxCtx int
	// KVType is the KV cache type: F16 (the default) or Q8_0, which halves
	// the cache at a small cost in accuracy (head sizes must be multiples
	// of 32). The zero value means F16.
	KVType quant.Type
	// FullHistory keeps the recurrent state of every position (models
	// with short-convolution layers: one row per layer and position), so
	// that Probe reads any position and Truncate rewinds anywhere without
	// checkpoints. Without it the state keeps the last positions and a
	// checkpoint every 64.
	FullHistory bool
	// Yield, when set, is called before every layer and before the head
	// of a pass: a background job (the skipped-layer search) waits there
	// while a request runs, so that a request shares the processors with
	// at most one layer of it. What a pass computes does not change.
	Yield func()

	shared *pool // NewSlot: the workers of the state it is a slot of
}

// NewState allocates a KV cache of o.Ctx positions, buffers for batches of
// up to o.Batch tokens and a pool of o.Threads workers. Close stops them.
func (m *Model) NewState(o StateOptions) (*State, error) {
	ctx, maxBatch := o.Ctx, o.Batch
	if ctx <= 0 {
		return nil, fmt.Errorf("model: context size %d must be positive", ctx)
	}
	if maxBatch <= 0 {
		return nil, fmt.Errorf("model: batch size %d must be positive", maxBatch)
	}
	c := &m.Config
	// Buffers for the widest layer (Gemma 4's layers differ).
	qDim, kDim, vDim, hdMax := 0, 0, 0, 0
	for l := range c.NLayer {
		hd, hdv, kvh := c.HeadDimOf(l), c.HeadDimVOf(l), c.KVHeadsOf(l)
		qDim, kDim, vDim = max(qDim, c.NHead*hd), max(kDim, kvh*hd), max(vDim, kvh*hdv)
		hdMax = max(hdMax, hd, hdv)
	}
	limit := max(ctx, o.MaxCtx)
	for l := range c.NLayer {
		if c.IsConv(l) {
			ctx = limit // recurrent checkpoints are laid out for the whole context: no growing
		}
	}
	s := &State{m: m, ctx: ctx, limit: limit, maxBatch: maxBatch, toks: make([]int32, 0, ctx), yield: o.Yield}
	s.kvCap = make([]int, c.NLayer)
	s.ringSlots = s.ringSize(o.Batch, limit, o.FullHistory)
	for l := range c.NLayer {
		if !c.IsConv(l) {
			s.kvCap[l] = ctx
			if s.isRing(l) {
				s.kvCap[l] = s.ringSlots // a ring never grows
			}
		}
	}
	switch o.KVType {
	case quant.F16, 0: // the zero Type (F32) means the default
		s.kvType = quant.F16
		s.kc = make([][]uint16, c.NLayer)
		s.vc = make([][]uint16, c.NLayer)
		for l := range s.kc {
			if c.OwnKV(l) {
				s.kc[l] = newKV[uint16](s.kvCap[l] * c.KVHeadsOf(l) * c.HeadDimOf(l))
				s.vc[l] = newKV[uint16](s.kvCap[l] * c.KVHeadsOf(l) * c.HeadDimVOf(l))
			}
		}
	case quant.Q8_0:
		s.kvType = quant.Q8_0
		s.kRow, s.vRow = make([]int, c.NLayer), make([]int, c.NLayer)
		s.kq = make([][]byte, c.NLayer)
		s.vq = make([][]byte, c.NLayer)
		for l := range s.kq {
			if c.IsConv(l) {
				continue
			}
			hd, hdv := c.HeadDimOf(l), c.HeadDimVOf(l)
			if hd%32 != 0 || hdv%32 != 0 {
				return nil, fmt.Errorf("model: a Q8_0 KV cache needs head sizes that are multiples of 32, layer %d has %d/%d", l, hd, hdv)
			}
			s.kRow[l], s.vRow[l] = hd/32*34, hdv/32*34
			if c.OwnKV(l) {
				s.kq[l] = newKV[byte](c.KVHeadsOf(l) * s.kvCap[l] * s.kRow[l])
				s.vq[l] = newKV[byte](c.KVHeadsOf(l) * s.kvCap[l] * s.vRow[l])
			}
		}
	default:
		return nil, fmt.Errorf("model: KV cache type %s is not supported (want F16 or Q8_0)", o.KVType)
	}
	B := maxBatch
	s.x = make([]float32, B*c.NEmbd)
	s.xb = make([]float32, B*c.NEmbd)
	s.proj = make([]float32, B*c.NEmbd)
	s.q = make([]float32, B*qDim)
	if c.AttnGate {
		s.qg = make([]float32, 2*B*qDim)
		s.qgate = make([]float32, B*qDim)
	}
	s.k = make([]float32, B*kDim)
	s.v = make([]float32, B*vDim)
	s.att = make([]float32, B*c.NHead*hdMax)
	s.ones = make([]float32, hdMax)
	for i := range s.ones {
		s.ones[i] = 1
	}
	if c.SWA != nil {
		s.ropeSWA = make([]float32, B*c.RopeDimSWA)
	}
	if w := c.PerLayerEmbd; w > 0 {
		s.ple = make([]float32, B*c.NLayer*w)
		s.pleTok = make([]float32, c.NLayer*w)
		s.pleRow = make([]byte, m.PLETokEmbd.RowBytes())
		s.pleG = make([]float32, B*w)
	}
	s.gate = make([]float32, B*c.NFF)
	s.up = make([]float32, B*c.NFF)
	if o.shared != nil {
		s.pool, s.slotOf = o.shared, true
	} else {
		s.pool = newPool(o.Threads)
	}
	s.mulFn = s.mulRange
	s.quantFn = s.quantRange
	s.attnFn = s.attnUnits
	s.newAttnScratch(s.pool.n)
	s.ropeCS = make([]float32, B*c.RopeDim)
	s.maxRows = o.LogitRows
	if s.maxRows <= 0 {
		s.maxRows = min(B, 33)
	}
	s.maxRows = min(s.maxRows, B)
	if o.shared == nil { // a slot's logits are its workspace's
		s.logits = make([]float32, s.maxRows*c.NVocab)
	}
	s.lay = newLayout(s.maxRows, B)
	s.newConvState(o.FullHistory)
	s.newRecState()
	s.ropeFreq = m.RopeFreqs
	if m.RopeFreqsLong != nil && c.RopeCtxOrig > 0 && limit > c.RopeCtxOrig { // the limit, not the size now: growing never changes the rope
		s.ropeFreq = m.RopeFreqsLong
	}
	if c.Experts > 0 {
		s.newMoE(B)
	}
	// Activation buffers: as many as a mul has distinct formats (q, k, v
	// of different types may), each for the widest product.
	widest, formats := 0, 1
	for _, w := range m.matrices() {
		widest = max(widest, w.ActBytes(B))
	}
	for i := range m.Layers {
		L := &m.Layers[i]
		if L.Wq != nil {
			formats = max(formats, distinctActs(L.Wq, L.Wk, L.Wv))
		}
		if L.PLEGate != nil {
			formats = max(formats, 2)
		}
		if L.RecQKV != nil {
			formats = max(formats, distinctActs(L.RecQKV, L.RecZ), distinctActs(L.RecBeta, L.RecAlpha))
		}
		if L.Wgate != nil {
			formats = max(formats, distinctActs(L.Wgate, L.Wup))
		}
		for e := range L.ExpGate { // repacked experts and experts in the file may differ
			formats = max(formats, distinctActs(L.ExpGate[e], L.ExpUp[e]))
		}
	}
	s.acts = make([][]byte, formats)
	for i := range s.acts {
		s.acts[i] = make([]byte, widest)
	}
	s.row = make([]byte, m.TokEmbd.RowBytes())
	return s, nil
}

func (m *Model) matrices() []*quant.Matrix {
	ms := []*quant.Matrix{m.Output}
	for i := range m.Layers {
		L := &m.Layers[i]
		ms = append(ms, L.ConvIn, L.ConvOut, L.RecQKV, L.RecZ, L.RecBeta, L.RecAlpha, L.RecOut, L.SSMIn, L.SSMOut, L.Wq, L.Wk, L.Wv, L.Wo, L.Wgate, L.Wup, L.Wdown, L.PLEGate, L.PLEProj, L.Router)
	}
	for i := range m.Layers { // the experts last: what a repack budget leaves in the file
		L := &m.Layers[i]
		for e := range L.ExpGate {
			ms = append(ms, L.ExpGate[e], L.ExpUp[e], L.ExpDown[e])
		}
	}
	ms = append(ms, m.PLEModel)
	return slices.DeleteFunc(ms, func(w *quant.Matrix) bool { return w == nil })
}

// Close stops the state's worker goroutines.
// A slot (NewSlot) leaves the shared workers to the state it shares them
// with.
func (s *State) Close() {
	if !s.slotOf {
		s.pool.close()
	}
}

// Len is the number of positions in the KV cache.
func (s *State) Len() int { return s.n }

// Tokens returns the tokens whose keys and values the cache holds, in
// position order (Len of them). Forward, ForwardRows, Truncate and Restore
// keep it in step with the cache; the slice is the state's own: read it,
// do not keep it across a call that changes the state.
func (s *State) Tokens() []int32 { return s.toks[:s.n:s.n] }

// Ctx is the capacity of the KV cache in positions (what it may grow to;
// Allocated is what it holds now).
func (s *State) Ctx() int { return s.limit }

// MaxBatch is the most tokens one forward pass takes.
func (s *State) MaxBatch() int { return s.maxBatch }

// MaxLogitRows is the most tokens of one pass Forward returns logits for.
func (s *State) MaxLogitRows() int { return s.maxRows }

// Truncate rewinds the KV cache (and Tokens) to its first n positions,
// or, for a model with recurrent layers, to ExactPrefix(n), the longest
// prefix it returns to exactly: read Len() afterwards.
func (s *State) Truncate(n int) {
	if n < 0 {
		n = 0
	}
	if n < s.n {
		n = s.ExactPrefix(n)
		if s.hasConv() {
			s.convTruncate(n)
		}
		if s.hasRec() {
			s.recTruncate(n)
		}
		if n == 0 {
			s.kvLo = 0
		}
		s.n = n
		s.toks = s.toks[:n]
	}
	s.rows = 0
}

// Forward runs tokens through the model at positions Len()..Len()+len-1 and
// appends their keys and values to the cache. With all it returns the
// logits of every token (len(tokens)×NVocab, at most MaxLogitRows tokens);
// otherwise the logits of the last token only, running longer inputs in
// chunks of MaxBatch. The returned slice is reused by the next call.
func (s *State) Forward(tokens []int32, all bool) ([]float32, error) {
	if err := s.check(tokens); err != nil {
		return nil, err
	}
	defer s.profEnd(s.profStart(), len(tokens))
	if all && len(tokens) > s.maxRows {
		return nil, fmt.Errorf("model: logits of %d tokens requested, the state returns at most %d per pass", len(tokens), s.maxRows)
	}
	total := len(tokens)
	for len(tokens) > s.maxBatch {
		s.forward(tokens[:s.maxBatch], false)
		tokens = tokens[s.maxBatch:]
	}
	lg := s.forward(tokens, all)
	if s.hasRec() && total > 1 {
		s.recCheckpoint(0) // the end of a prefill: a later prompt may share just this much
	}
	return lg, nil
}

// ForwardRows runs tokens (at most MaxBatch and MaxLogitRows of them)
// through the model like Forward, but computes no logits: Logits then
// computes those of any rows of this batch, as often as asked, bit for bit
// what Forward(tokens, true) returns for them (each output element has one
// accumulation order whatever the batch). A verifier thus pays for the
// output head only over the rows it reads: after a rejected draft token
// the later rows are never needed.
func (s *State) ForwardRows(tokens []int32) error { return s.ForwardTree(tokens, nil, nil) }

// check validates a batch: not empty, room in the context, token ids in
// the vocabulary.
func (s *State) check(tokens []int32) error {
	if len(tokens) == 0 {
		return errors.New("model: forward pass over no tokens")
	}
	if s.slotOf {
		return errors.New("model: a batch slot runs only in ForwardBatch passes")
	}
	if s.n+len(tokens) > s.limit {
		return fmt.Errorf("%w: %d positions + %d tokens > %d", ErrContextFull, s.n, len(tokens), s.limit)
	}
	for _, t := range tokens {
		if t < 0 || int(t) >= s.m.NVocab {
			return fmt.Errorf("model: token id %d out of range [0, %d)", t, s.m.NVocab)
		}
	}
	s.reserve(s.n + len(tokens))
	return nil
}

// Logits returns the logits of rows [lo, hi) of the batch of the last
// ForwardRows ((hi-lo)×NVocab, reused by the next call). It fails when the
// rows are not in that batch or another pass or a Truncate came since.
func (s *State) Logits(lo, hi int) ([]float32, error) {
	if lo < 0 || lo >= hi || hi > s.rows {
		return nil, fmt.Errorf("model: logits of rows [%d,%d) asked, the last ForwardRows batch has %d", lo, hi, s.rows)
	}
	defer s.profEnd(s.profStart(), 0)
	return s.head(lo, hi), nil
}

// distinctActs counts the activation formats of products with one input.
func distinctActs(ws ...*quant.Matrix) int {
	n := 0
	for i, w := range ws {
		if w != nil && !slices.ContainsFunc(ws[:i], func(o *quant.Matrix) bool { return o != nil && w.SameActs(o) }) {
			n++
		}
	}
	return n
}

// mul computes p.out = x·p.wᵀ for n rows of x and each product p (at most
// maxProducts, all with the same input): x quantized once per activation
// format (by the pool for a batch), then one pool job over the products'
// rows together, so q, k and v (or gate and up) cost one hand-off.
func (s *State) mul(x []float32, n int, ps ...product) { s.mulLimit(x, n, -1, ps...) }

// mulLimit is mul computing only the first limit rows of the products'
// concatenation (limit < 0: all).
func (s *State) mulLimit(x []float32, n, limit int, ps ...product) {
	j := &s.job
	j.x, j.n, j.np = x, n, len(ps)
	rows, formats := 0, 0
	for i, p := range ps {
		p.act = -1
		for k := 0; k < i; k++ {
			if j.ps[k].w.SameActs(p.w) {
				p.act = j.ps[k].act
				break
			}
		}
		if p.act < 0 {
			p.act = formats
			formats++
		}
		p.off = rows
		rows += p.w.Rows
		j.ps[i] = p
	}
	s.pool.kind = JobQuantize
	s.pool.run(s.quantFn, n, quantGrain)
	s.pool.kind = JobProducts
	if limit >= 0 {
		rows = min(rows, limit)
	}
	s.pool.run(s.mulFn, rows, 16)
}

// quantGrain is the fewest rows of a batch a worker quantizes (smaller
// batches are quantized by the caller alone).
const quantGrain = 8

// quantRange quantizes rows [lo, hi) of the job's input once per format.
func (s *State) quantRange(lo, hi int) {
	j := &s.job
	done := -1
	for i := 0; i < j.np; i++ {
		if p := &j.ps[i]; p.act > done {
			p.w.QuantizeActsRows(s.acts[p.act], j.x, j.n, lo, hi)
			done = p.act
		}
	}
}

// mulRange computes rows [lo, hi) of the job's concatenated products.
func (s *State) mulRange(lo, hi int) {
	j := &s.job
	for i := 0; i < j.np; i++ {
		p := &j.ps[i]
		r0, r1 := max(lo, p.off)-p.off, min(hi, p.off+p.w.Rows)-p.off
		if r0 < r1 {
			p.w.MulRows(p.out, p.w.Rows, s.acts[p.act], j.n, r0, r1)
		}
	}
}

func (s *State) forward(tokens []int32, all bool) []float32 {
	n := len(tokens)
	s.layers(tokens)
	if all {
		return s.head(0, n)
	}
	return s.head(n-1, n)
}

// head computes the logits of rows [lo, hi) of the batch whose final
// hidden states are in s.x.
func (s *State) head(lo, hi int) []float32 {
	if s.yield != nil {
		s.yield()
	}
	m, c := s.m, &s.m.Config
	E := c.NEmbd
	for i := lo; i < hi; i++ {
		RMSNorm(s.xb[(i-lo)*E:(i-lo+1)*E], s.x[i*E:(i+1)*E], m.OutNorm, c.NormEps)
	}
	s.mul(s.xb, hi-lo, product{w: m.Output, out: s.logits})
	if c.Softcap > 0 {
		softcap(s.logits[:(hi-lo)*c.NVocab], c.Softcap)
	}
	if c.LogitScale != 0 {
		scale(s.logits[:(hi-lo)*c.NVocab], 1/c.LogitScale)
	}
	return s.logits[:(hi-lo)*c.NVocab]
}

// layers runs tokens through every layer (but the blocks s.skip leaves
// out), appending their keys and values to the cache; their final hidden
// states stay in s.x.
func (s *State) layers(tokens []int32) {
	s.rows = 0
	s.hxOn = false
	m, c := s.m, &s.m.Config
	n, E, pos0 := len(tokens), c.NEmbd, s.n
	for i, t := range tokens {
		x := s.x[i*E : (i+1)*E]
		quant.DequantizeRow(m.TokEmbd.Type, m.TokEmbd.Row(int(t), s.row), x)
		if c.EmbdScale != 0 {
			for j := range x {
				x[j] *= c.EmbdScale
			}
		}
		// The rope tables once per pass, not per layer.
		p := s.position(i, pos0)
		s.ropeTable(s.ropeCS[i*c.RopeDim:(i+1)*c.RopeDim], p, c.RopeBase, c.RopeScale, s.ropeFreq)
		if s.ropeSWA != nil {
			s.ropeTable(s.ropeSWA[i*c.RopeDimSWA:(i+1)*c.RopeDimSWA], p, c.RopeBaseSWA, c.RopeScaleSWA, nil)
		}
	}
	if c.PerLayerEmbd > 0 {
		s.perLayerBatch(tokens)
	}
	if s.hasRec() {
		s.recBegin(n, pos0)
	}
	for l := range m.Layers {
		if s.yield != nil {
			s.yield()
		}
		if s.capLayers != nil {
			s.capture(l, n)
		}
		switch {
		case s.skip.attn(l):
			if c.IsRec(l) {
				s.recSkip(l, n, pos0) // the state passes through unchanged
			}
		case c.IsSSM(l):
			s.mamba2(l, n, pos0)
		case c.IsRec(l):
			s.deltaNet(l, n, pos0)
		case c.IsConv(l):
			s.shortConv(l, n, pos0, s.probing)
		default:
			s.attention(l, n, pos0)
		}
		if !s.skip.mlp(l) {
			s.feedForward(l, n)
		}
		if c.PerLayerEmbd > 0 {
			s.perLayerBlock(l, n)
		}
		if sc := m.Layers[l].OutScale; sc != 0 {
			for j := range s.x[:n*E] {
				s.x[j] *= sc
			}
		}
	}
	if s.capLayers != nil {
		s.capture(c.NLayer, n)
	}
	if s.hasConv() && !s.probing {
		s.convPassEnd(n, pos0)
	}
	if s.hasRec() {
		s.recPassEnd(n, pos0)
	}
	s.ringPassEnd(n, pos0)
	s.toks = append(s.toks[:s.n], tokens...) // within the capacity: check bounds s.n+n by ctx
	s.n += n
}

// attention runs layer l's attention block over the batch of n tokens
// whose first KV slot is pos0, adding its output to the residual stream.
// Its three parts: the projections (shared weights, every row), the rows'
// own work against this state's cache, and the output projection; a
// ForwardBatch pass runs the middle one per sequence (batch.go).
func (s *State) attention(l, n, pos0 int) {
	s.attnIn(l, n)
	s.attnRows(l, n, pos0)
	s.attnOut(l, n)
}

// attnIn computes the queries, keys and values of n rows of layer l.
func (s *State) attnIn(l, n int) {
	c, L := &s.m.Config, &s.m.Layers[l]
	E := c.NEmbd
	hd := c.HeadDimOf(l)
	qDim := c.NHead * hd
	own := c.OwnKV(l)
	for i := 0; i < n; i++ {
		RMSNorm(s.xb[i*E:(i+1)*E], s.x[i*E:(i+1)*E], L.AttnNorm, c.NormEps)
	}
	wq := product{w: L.Wq, out: s.q}
	if c.AttnGate {
		wq.out = s.qg
	}
	switch {
	case !own: // keys and values are an earlier layer's
		s.mul(s.xb, n, wq)
	case L.Wv == nil: // the values are the keys
		s.mul(s.xb, n, wq, product{w: L.Wk, out: s.k})
	default:
		s.mul(s.xb, n, wq, product{w: L.Wk, out: s.k}, product{w: L.Wv, out: s.v})
	}
	if c.AttnGate {
		s.splitGate(n, qDim, hd)
	}
}

// attnRows ropes the rows' queries and keys, stores their keys and values
// in this state's cache at pos0.. and computes their attention output.
func (s *State) attnRows(l, n, pos0 int) {
	c, L := &s.m.Config, &s.m.Layers[l]
	hd, hdv, kvh := c.HeadDimOf(l), c.HeadDimVOf(l), c.KVHeadsOf(l)
	qDim, kDim, vDim := c.NHead*hd, kvh*hd, kvh*hdv
	own := c.OwnKV(l)
	cs, rd := s.ropeCS, c.RopeDim
	if c.IsSWA(l) {
		cs, rd = s.ropeSWA, c.RopeDimSWA
	}
	if c.ropeOff(l) {
		rd = 0 // NoPE (smollm3): the table is not read
	}
	for i := 0; i < n; i++ {
		q := s.q[i*qDim : (i+1)*qDim]
		if L.Bq != nil {
			addTo(q, L.Bq)
		}
		if L.QNorm != nil {
			for h := 0; h < c.NHead; h++ {
				hq := q[h*hd : (h+1)*hd]
				RMSNorm(hq, hq, L.QNorm, c.NormEps)
			}
		}
		ct := cs[i*rd : (i+1)*rd : (i+1)*rd]
		for h := 0; h < c.NHead; h++ {
			s.rope(q[h*hd:(h+1)*hd], ct, rd)
		}
		if !own {
			continue
		}
		k, v := s.k[i*kDim:(i+1)*kDim], s.v[i*vDim:(i+1)*vDim]
		if L.Wv == nil {
			copy(v, k)
		}
		if L.Bq != nil {
			addTo(k, L.Bk)
			addTo(v, L.Bv)
		}
		for h := 0; h < kvh; h++ {
			hk := k[h*hd : (h+1)*hd]
			if L.KNorm != nil {
				RMSNorm(hk, hk, L.KNorm, c.NormEps)
			}
			if c.VNorm {
				hv := v[h*hdv : (h+1)*hdv]
				RMSNorm(hv, hv, s.ones[:hdv], c.NormEps)
			}
			s.rope(hk, ct, rd)
		}
		p, cp := s.slot(l, pos0+i), s.kvCap[l]
		if s.kvType == quant.Q8_0 {
			kR, vR := s.kRow[l], s.vRow[l]
			for h := 0; h < kvh; h++ {
				neon.QuantizeQ8_0(s.kq[l][(h*cp+p)*kR:(h*cp+p+1)*kR], k[h*hd:(h+1)*hd])
				neon.QuantizeQ8_0(s.vq[l][(h*cp+p)*vR:(h*cp+p+1)*vR], v[h*hdv:(h+1)*hdv])
			}
			continue
		}
		for h := 0; h < kvh; h++ {
			neon.ToF16(s.kc[l][(h*cp+p)*hd:(h*cp+p+1)*hd], k[h*hd:(h+1)*hd])
			neon.ToF16(s.vc[l][(h*cp+p)*hdv:(h*cp+p+1)*hdv], v[h*hdv:(h+1)*hdv])
		}
	}
	s.job.l, s.job.n, s.job.pos0 = l, n, pos0
	s.pool.kind = JobAttention
	s.runAttention()
}

// attnOut gates the attention output of n rows, projects it and adds it
// to the residual stream.
func (s *State) attnOut(l, n int) {
	c, L := &s.m.Config, &s.m.Layers[l]
	E := c.NEmbd
	hdv := c.HeadDimVOf(l)
	if c.AttnGate {
		s.gateAttention(n, c.NHead*hdv)
	}
	s.mul(s.att, n, product{w: L.Wo, out: s.proj})
	if L.PostAttnNorm != nil {
		for i := 0; i < n; i++ {
			RMSNorm(s.proj[i*E:(i+1)*E], s.proj[i*E:(i+1)*E], L.PostAttnNorm, c.NormEps)
		}
	}
	s.residual(n)
}

// feedForward runs layer l's feed-forward block over the batch of n
// tokens, adding its output to the residual stream.
func (s *State) feedForward(l, n int) {
	c, L := &s.m.Config, &s.m.Layers[l]
	E := c.NEmbd
	for i := 0; i < n; i++ {
		RMSNorm(s.xb[i*E:(i+1)*E], s.x[i*E:(i+1)*E], L.FFNNorm, c.NormEps)
	}
	if L.Router != nil {
		s.experts(l, n)
		s.residual(n)
		return
	}
	s.mul(s.xb, n, product{w: L.Wgate, out: s.gate}, product{w: L.Wup, out: s.up})
	if c.GELU {
		GELUMul(s.gate[:n*c.FFNOf(l)], s.up[:n*c.FFNOf(l)])
	} else {
		SiLUMul(s.gate[:n*c.FFNOf(l)], s.up[:n*c.FFNOf(l)])
	}
	s.mul(s.gate, n, product{w: L.Wdown, out: s.proj})
	if L.PostFFNNorm != nil {
		for i := 0; i < n; i++ {
			RMSNorm(s.proj[i*E:(i+1)*E], s.proj[i*E:(i+1)*E], L.PostFFNNorm, c.NormEps)
		}
	}
	s.residual(n)
}

// residual adds a branch's output (s.proj, n rows) to the residual
// stream, scaled first where the family says so (granite).
func (s *State) residual(n int) {
	c := &s.m.Config
	out := s.proj[:n*c.NEmbd]
	if c.ResidScale != 0 {
		scale(out, c.ResidScale)
	}
	addTo(s.x[:n*c.NEmbd], out)
}

// scale multiplies x by a in place (ggml_scale).
func scale(x []float32, a float32) {
	for i := range x {
		x[i] *= a
	}
}

// attnScale is the scale of the attention scores for head size hd.
func (s *State) attnScale(hd int) float32 {
	if a := s.m.AttnScale; a != 0 {
		return a
	}
	return float32(1 / math.Sqrt(float64(hd)))
}

// window is what batch token i attends to in layer l: the cache positions
// [from, vis), then its ancestors anc in the batch (span, cut to a local
// layer's window: the position p sees p-Window+1..p).
func (s *State) window(l, i, pos0 int) (from, vis int, anc []int32) {
	vis, anc = s.span(i, pos0)
	c := &s.m.Config
	if !c.IsSWA(l) {
		return 0, vis, anc
	}
	first := s.position(i, pos0) - c.Window + 1
	if first <= 0 {
		return 0, vis, anc
	}
	if first > vis { // the window starts inside the ancestors (root at position vis)
		return vis, vis, anc[first-vis:]
	}
	return first, vis, anc
}

// KVType is the type of the KV cache.
func (s *State) KVType() quant.Type { return s.kvType }

// ropeTable fills cs with the cos/sin of every rotated pair at position
// p, the way ggml's rope cache computes them: the angle advances by
// repeated multiplication with base^(-2/dims), in float32, divided by the
// pair's frequency factor when freqs is given.
func (s *State) ropeTable(cs []float32, p int, base, freqScale float32, freqs []float32) {
	c := &s.m.Config
	mscale := float32(1)
	if c.RopeAttn != 0 {
		mscale = c.RopeAttn
	}
	dims := len(cs)
	thetaScale := float32(math.Pow(float64(base), -2/float64(dims)))
	theta := float32(p)
	for i := 0; i < dims; i += 2 {
		ff := float32(1)
		if freqs != nil {
			ff = freqs[i/2]
		}
		th := freqScale * (theta / ff)
		cs[i] = float32(math.Cos(float64(th))) * mscale
		cs[i+1] = float32(math.Sin(float64(th))) * mscale
		theta *= thetaScale
	}
}

// rope rotates the first dims dimensions of one head in place with the
// table cs of ropeTable.
func (s *State) rope(x, cs []float32, dims int) {
	c := &s.m.Config
	half := dims / 2
	for i := 0; i < dims; i += 2 {
		cos, sin := cs[i], cs[i+1]
		var a, b *float32
		if c.RopeNeox {
			a, b = &x[i/2], &x[i/2+half]
		} else {
			a, b = &x[i], &x[i+1]
		}
		x0, x1 := *a, *b
		*a = x0*cos - x1*sin
		*b = x0*sin + x1*cos
	}
}

// RMSNorm writes x scaled to unit root mean square, times w, into out
// (ggml: the sum of squares in float64, the scale in float32).
func RMSNorm(out, x, w []float32, eps float32) {
	sum := neon.RMSNormScale(x)
	mean := float32(sum / float64(len(x)))
	scale := 1 / float32(math.Sqrt(float64(mean+eps)))
	neon.ScaleMul(out, x, w, scale)
}

// Softmax normalizes x in place (neon.Softmax: the sum in float64, as
// ggml; the same bits on every kernel set).
func Softmax(x []float32) { neon.Softmax(x) }

// SiLUMul computes gate[i] = silu(gate[i]) * up[i] (neon.SiLUMul: the
// same bits on every kernel set).
func SiLUMul(gate, up []float32) { neon.SiLUMul(gate, up) }

func addTo(dst, src []float32) { neon.Add(dst[:len(src)], src) }
