package model

import (
	"errors"
	"fmt"

	"github.com/geisten/geist/quant"
)

// Continuous batching: one forward pass over the rows of several
// sequences, each with its own KV cache and positions. The weights are
// read once per pass for every row (the norms, the projections, the
// feed-forward block and the output head run over all rows together, as
// they do over the tokens of one sequence's prefill or verification
// pass); each sequence's rows rope their queries and keys at their own
// positions, store keys and values in their own cache and attend to it
// alone. Every kernel gives a row the same bits whatever the other rows
// of its pass (the batch invariance of forward.go and attention.go), so
// a sequence's logits in a batched pass are bit for bit those it gets
// alone.
//
// The workspace of a pass is a full State (NewState): its row buffers
// hold the pass. The other sequences are NewSlot states of it, which
// share its workers and keep only a cache; the workspace may itself be one
// of the pass's sequences.

// ErrNotBatchable is kept for callers that test for it: every family
// batches now (Batchable).
var ErrNotBatchable = errors.New("model: the model's recurrent layers do not run in batched passes")

// Seq is one sequence's tokens in a ForwardBatch pass.
type Seq struct {
	S      *State  // the sequence's state: the workspace or a NewSlot state of it
	Tokens []int32 // its next tokens, at positions S.Len()...
	Logits bool    // return the logits of its last token
	// Parents, when not nil, makes the tokens a tree, as ForwardTree's
	// parents (each token sees the cache and its ancestors, at the
	// position of its depth; every token takes a slot and Compact keeps
	// the accepted path): a speculative step's fed token and drafted
	// tree, its logits bit for bit those of ForwardTree alone. At most
	// MaxLogitRows tokens.
	Parents []int32
	// Out, when not nil, receives the sequence's logits (NVocab per row)
	// instead of the returned slice: every token's with All, else the
	// last one's when Logits. A pass whose sequences use Out may return
	// any number of rows (the head runs over them MaxLogitRows at a
	// time); then no sequence of it may ask for the returned slice.
	Out []float32
	All bool
	// Skip, when not nil, leaves the blocks it names out, as
	// ForwardTree's skip (a skipped-layer draft's steps, whose recurrent
	// steps are dropped as a whole): only in a pass of this sequence
	// alone.
	Skip *Skip
}

// batchScratch is a workspace's per-pass bookkeeping, sized once.
type batchScratch struct {
	toks  []int32     // [maxBatch] the pass's tokens in row order
	saved viewSet     // a sequence's own row buffers while it works on views of the workspace's
	dst   [][]float32 // [maxRows] where the rows of a head call go (Out)
}

type viewSet struct {
	q, k, v, att, cs, swa []float32
	// recurrent layers: the projections' outputs a sequence's rows read
	// and the outputs they write
	xc, out, z, beta, alpha, mbIn, bcx, cy []float32
}

// Batchable reports whether the model's sequences run in ForwardBatch
// passes: every family does. A recurrent layer's projections run over all
// rows; its convolution and recurrence run per sequence, from the
// sequence's own state (its conv rows, its DeltaNet or Mamba-2 state and
// log, its checkpoints), the same steps as alone.
func (s *State) Batchable() bool { return true }

// NewSlot allocates another sequence's state for ForwardBatch passes whose
// workspace is s: its own KV cache (o.Ctx, o.MaxCtx and o.KVType as for
// NewState), s's workers, and none of the row buffers of a pass (the
// workspace's serve). A slot runs only in ForwardBatch; Truncate, Tokens
// and Len work as on any state. Memory: its KV cache, the attention
// scratch of the workers, and s's batch size of positions of rings.
func (s *State) NewSlot(o StateOptions) (*State, error) {
	if s.slotOf {
		return nil, errors.New("model: a slot cannot be the workspace of another slot")
	}
	if !s.Batchable() {
		return nil, ErrNotBatchable
	}
	// The workspace's logit rows: a slot's tree passes (Parents) are as
	// deep as the workspace's, and its recurrent log as long.
	o.shared, o.Threads, o.Batch, o.LogitRows, o.FullHistory = s.pool, s.pool.n, s.maxBatch, s.maxRows, false
	sl, err := s.m.NewState(o)
	if err != nil {
		return nil, err
	}
	sl.x, sl.xb, sl.proj, sl.q, sl.k, sl.v, sl.att, sl.gate, sl.up = nil, nil, nil, nil, nil, nil, nil, nil, nil
	sl.qg, sl.qgate, sl.ropeCS, sl.ropeSWA, sl.logits, sl.acts = nil, nil, nil, nil, nil, nil
	sl.ple, sl.pleG = nil, nil
	return sl, nil
}

// ForwardBatch runs one pass over the tokens of every sequence of seqs
// (distinct states: s itself or NewSlot states of s), appending each one's
// keys and values to its own cache. It returns the logits of the last
// token of each sequence that asks for them, in the order of seqs
// (k×NVocab; the slice is reused by the next pass), or writes each
// sequence's rows into its Out. At most MaxBatch tokens in all and
// MaxLogitRows sequences with logits in the returned slice. A sequence
// with Parents is a tree, as ForwardTree's (its kept path then Compact,
// between passes). Each sequence's logits are bit for bit those Forward
// (or ForwardTree and Logits) give it alone, for every family: a
// recurrent layer's state is the sequence's own and steps as alone.
//
// The workspace's own fields a pass writes are its row buffers only (and
// its cache when it is one of seqs): another goroutine may hold the
// workspace as its sequence and Truncate it between its passes. Its row
// buffers held the pass, so the logits of its last ForwardRows batch are
// not to be asked for after a batched pass.
func (s *State) ForwardBatch(seqs []Seq) ([]float32, error) {
	if s.slotOf || s.x == nil {
		return nil, errors.New("model: the workspace of a batched pass must be a full state, not a slot")
	}
	if !s.Batchable() {
		return nil, ErrNotBatchable
	}
	rows, nl, outs := 0, 0, 0
	defer func() { // a refused pass leaves no tree layout on
		if rows < 0 {
			for i := range seqs {
				if S := seqs[i].S; S != nil {
					S.lay.on = false
				}
			}
		}
	}()
	fail := func(err error) ([]float32, error) { rows = -1; return nil, err }
	for i := range seqs {
		q := &seqs[i]
		S := q.S
		if S == nil || S.m != s.m || (S != s && S.pool != s.pool) {
			return fail(fmt.Errorf("model: sequence %d of a batched pass is not a slot of its workspace", i))
		}
		for j := range i {
			if seqs[j].S == S {
				return fail(fmt.Errorf("model: sequences %d and %d of a batched pass share a state", j, i))
			}
		}
		if len(q.Tokens) == 0 {
			return fail(fmt.Errorf("model: sequence %d of a batched pass has no tokens", i))
		}
		if S.n+len(q.Tokens) > S.limit {
			return fail(fmt.Errorf("%w: sequence %d: %d positions + %d tokens > %d", ErrContextFull, i, S.n, len(q.Tokens), S.limit))
		}
		for _, t := range q.Tokens {
			if t < 0 || int(t) >= s.m.NVocab {
				return fail(fmt.Errorf("model: token id %d out of range [0, %d)", t, s.m.NVocab))
			}
		}
		if q.Skip != nil {
			if len(seqs) > 1 {
				return fail(fmt.Errorf("model: sequence %d of a batched pass skips blocks: only a sequence alone in its pass may", i))
			}
			if err := s.checkSkip(q.Skip); err != nil {
				return fail(err)
			}
		}
		if q.Parents != nil {
			if len(q.Tokens) > S.maxRows {
				return fail(fmt.Errorf("model: sequence %d of a batched pass is a tree of %d tokens, a state takes %d", i, len(q.Tokens), S.maxRows))
			}
			S.lay.on = false
			if err := S.treeLayout(q.Parents, len(q.Tokens)); err != nil {
				return fail(fmt.Errorf("sequence %d: %w", i, err))
			}
		}
		rows += len(q.Tokens)
		switch {
		case q.Out != nil:
			want := 0
			if q.All {
				want = len(q.Tokens)
			} else if q.Logits {
				want = 1
			}
			if len(q.Out) < want*s.m.NVocab {
				return fail(fmt.Errorf("model: sequence %d of a batched pass: %d logits rows into a buffer of %d values", i, want, len(q.Out)))
			}
			outs += want
		case q.All:
			return fail(fmt.Errorf("model: sequence %d of a batched pass asks for every row's logits without a buffer (Out)", i))
		case q.Logits:
			nl++
		}
	}
	if rows == 0 {
		return fail(errors.New("model: batched pass over no tokens"))
	}
	if rows > s.maxBatch || nl > s.maxRows {
		return fail(fmt.Errorf("model: a batched pass of %d tokens (%d with logits), the workspace takes %d (%d)", rows, nl, s.maxBatch, s.maxRows))
	}
	if nl > 0 && outs > 0 {
		return fail(errors.New("model: a batched pass mixes logits into buffers (Out) and into the returned slice"))
	}
	for i := range seqs {
		S := seqs[i].S
		S.reserve(S.n + len(seqs[i].Tokens))
		if seqs[i].Parents == nil {
			S.lay.on = false
		}
		S.skip, S.probing = seqs[i].Skip, false // a skipping draft's pass: its recurrent steps are dropped as a whole
	}
	defer s.profEnd(s.profStart(), rows)
	s.batchLayers(seqs, rows)
	if outs > 0 {
		s.batchOut(seqs)
		return nil, nil
	}
	return s.batchHead(seqs, nl), nil
}

// batchLayers runs the n rows of seqs through every layer; their final
// hidden states stay in s.x, in the order of seqs.
func (s *State) batchLayers(seqs []Seq, n int) {
	m, c := s.m, &s.m.Config
	E := c.NEmbd
	if cap(s.bt.toks) < s.maxBatch {
		s.bt.toks = make([]int32, 0, s.maxBatch) // once per workspace
	}
	toks := s.bt.toks[:0]
	r := 0
	for i := range seqs {
		S := seqs[i].S
		for j, t := range seqs[i].Tokens {
			x := s.x[r*E : (r+1)*E]
			quant.DequantizeRow(m.TokEmbd.Type, m.TokEmbd.Row(int(t), s.row), x)
			if c.EmbdScale != 0 {
				for k := range x {
					x[k] *= c.EmbdScale
				}
			}
			p := S.position(j, S.n)
			s.ropeTable(s.ropeCS[r*c.RopeDim:(r+1)*c.RopeDim], p, c.RopeBase, c.RopeScale, S.ropeFreq)
			if s.ropeSWA != nil {
				s.ropeTable(s.ropeSWA[r*c.RopeDimSWA:(r+1)*c.RopeDimSWA], p, c.RopeBaseSWA, c.RopeScaleSWA, nil)
			}
			r++
		}
		toks = append(toks, seqs[i].Tokens...)
	}
	s.bt.toks = toks
	if c.PerLayerEmbd > 0 {
		s.perLayerBatch(toks)
	}
	var skip *Skip // a skipped-layer draft's step: one sequence (ForwardBatch checked)
	capAny := false
	for i := range seqs {
		skip = seqs[i].Skip
		capAny = capAny || seqs[i].S.capLayers != nil
	}
	if s.hasRec() {
		for i := range seqs {
			S := seqs[i].S
			S.recBegin(len(seqs[i].Tokens), S.n)
		}
	}
	for l := range m.Layers {
		if s.yield != nil {
			s.yield()
		}
		if capAny {
			s.captureBatch(seqs, l)
		}
		switch {
		case skip.attn(l):
			if c.IsRec(l) {
				seqs[0].S.recSkip(l, n, seqs[0].S.n) // the state passes through unchanged, as alone
			}
		case c.IsSSM(l):
			s.mamba2In(l, n)
			s.recRows(seqs, l)
			s.mamba2Out(l, n)
		case c.IsRec(l):
			s.deltaNetIn(l, n)
			s.recRows(seqs, l)
			s.deltaNetOut(l, n)
		case c.IsConv(l):
			s.shortConvIn(l, n)
			s.recRows(seqs, l)
			s.shortConvOut(l, n)
		default:
			s.attnIn(l, n)
			r = 0
			for i := range seqs {
				S, k := seqs[i].S, len(seqs[i].Tokens)
				s.lendRows(S, l, r)
				S.attnRows(l, k, S.n)
				s.takeRows(S)
				r += k
			}
			s.attnOut(l, n)
		}
		if !skip.mlp(l) {
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
	if capAny {
		s.captureBatch(seqs, c.NLayer)
	}
	s.keepBatch(seqs)
	for i := range seqs {
		S, k := seqs[i].S, len(seqs[i].Tokens)
		if S.hasConv() {
			S.convPassEnd(k, S.n)
		}
		if S.hasRec() {
			S.recPassEnd(k, S.n)
		}
		S.ringPassEnd(k, S.n)
		S.toks = append(S.toks[:S.n], seqs[i].Tokens...) // within the capacity reserve made
		S.n += k
		S.rows = 0
		S.lay.on = false
		if S.hasRec() && k > 1 && seqs[i].Parents == nil && S.skip == nil {
			S.recCheckpoint(0) // the end of a prompt chunk, as Forward keeps it
		}
		S.skip = nil
	}
}

// recRows runs recurrent layer l's per-sequence part (convolution,
// recurrence, gating) for each sequence of seqs on its rows of the
// workspace's projections.
func (s *State) recRows(seqs []Seq, l int) {
	c := &s.m.Config
	r := 0
	for i := range seqs {
		S, k := seqs[i].S, len(seqs[i].Tokens)
		s.lendRec(S, r)
		switch {
		case c.IsSSM(l):
			S.mamba2Rows(l, k, S.n)
		case c.IsRec(l):
			S.deltaNetRows(l, k, S.n)
		default:
			S.shortConvRows(l, k, S.n)
			S.shortConvKeep(l, k, S.n)
		}
		s.takeRec(S)
		r += k
	}
}

// lendRec points S's recurrent-layer inputs and outputs at the
// workspace's rows from r on; takeRec gives S its own back.
func (s *State) lendRec(S *State, r int) {
	c := &s.m.Config
	at := func(b []float32, w int) []float32 {
		if b == nil {
			return nil
		}
		return b[r*w:]
	}
	v := &s.bt.saved
	v.xc, v.out, v.z, v.beta, v.alpha = S.rec.xc, S.rec.out, S.dn.z, S.dn.beta, S.dn.alpha
	v.mbIn, v.bcx, v.cy = S.mb.in, S.conv.bcx, S.conv.y
	S.rec.xc, S.rec.out = at(s.rec.xc, c.RecConv), at(s.rec.out, c.RecOut)
	S.dn.z, S.dn.beta, S.dn.alpha = at(s.dn.z, c.DNHeadsV*c.DNHeadV), at(s.dn.beta, c.DNHeadsV), at(s.dn.alpha, c.DNHeadsV)
	S.mb.in = at(s.mb.in, c.ssmInW())
	S.conv.bcx, S.conv.y = at(s.conv.bcx, 3*c.NEmbd), at(s.conv.y, c.NEmbd)
}

func (s *State) takeRec(S *State) {
	v := &s.bt.saved
	S.rec.xc, S.rec.out, S.dn.z, S.dn.beta, S.dn.alpha = v.xc, v.out, v.z, v.beta, v.alpha
	S.mb.in, S.conv.bcx, S.conv.y = v.mbIn, v.bcx, v.cy
	*v = viewSet{}
}

// lendRows points S's query, key, value, attention and rope rows at the
// workspace's rows from r on, for layer l (whose row widths they have);
// takeRows gives S its own back.
func (s *State) lendRows(S *State, l, r int) {
	c := &s.m.Config
	hd, hdv, kvh := c.HeadDimOf(l), c.HeadDimVOf(l), c.KVHeadsOf(l)
	q, k, v := s.q[r*c.NHead*hd:], s.k[r*kvh*hd:], s.v[r*kvh*hdv:]
	att, cs := s.att[r*c.NHead*hdv:], s.ropeCS[r*c.RopeDim:]
	var swa []float32
	if s.ropeSWA != nil {
		swa = s.ropeSWA[r*c.RopeDimSWA:]
	}
	s.bt.saved = viewSet{q: S.q, k: S.k, v: S.v, att: S.att, cs: S.ropeCS, swa: S.ropeSWA}
	S.q, S.k, S.v, S.att, S.ropeCS, S.ropeSWA = q, k, v, att, cs, swa
}

func (s *State) takeRows(S *State) {
	v := &s.bt.saved
	S.q, S.k, S.v, S.att, S.ropeCS, S.ropeSWA = v.q, v.k, v.v, v.att, v.cs, v.swa
	*v = viewSet{}
}

// batchHead computes the logits of the last row of every sequence of seqs
// that asks for them.
func (s *State) batchHead(seqs []Seq, nl int) []float32 {
	if nl == 0 {
		return nil
	}
	if s.yield != nil {
		s.yield()
	}
	m, c := s.m, &s.m.Config
	E := c.NEmbd
	k, r := 0, 0
	for i := range seqs {
		r += len(seqs[i].Tokens)
		if seqs[i].Logits {
			RMSNorm(s.xb[k*E:(k+1)*E], s.x[(r-1)*E:r*E], m.OutNorm, c.NormEps)
			k++
		}
	}
	s.mul(s.xb, k, product{w: m.Output, out: s.logits})
	if c.Softcap > 0 {
		softcap(s.logits[:k*c.NVocab], c.Softcap)
	}
	if c.LogitScale != 0 {
		scale(s.logits[:k*c.NVocab], 1/c.LogitScale)
	}
	return s.logits[:k*c.NVocab]
}

// batchOut computes the logits rows the sequences of seqs ask for into
// their Out buffers, MaxLogitRows rows per head call (a row's logits are
// the same bits in any call).
func (s *State) batchOut(seqs []Seq) {
	m, c := s.m, &s.m.Config
	E, nv := c.NEmbd, c.NVocab
	if cap(s.bt.dst) < s.maxRows {
		s.bt.dst = make([][]float32, 0, s.maxRows) // once per workspace
	}
	dst := s.bt.dst[:0]
	flush := func() {
		if len(dst) == 0 {
			return
		}
		if s.yield != nil {
			s.yield()
		}
		k := len(dst)
		s.mul(s.xb, k, product{w: m.Output, out: s.logits})
		if c.Softcap > 0 {
			softcap(s.logits[:k*nv], c.Softcap)
		}
		if c.LogitScale != 0 {
			scale(s.logits[:k*nv], 1/c.LogitScale)
		}
		for j, d := range dst {
			copy(d, s.logits[j*nv:(j+1)*nv])
			dst[j] = nil
		}
		dst = dst[:0]
	}
	r := 0
	for i := range seqs {
		q := &seqs[i]
		n := len(q.Tokens)
		lo := n
		switch {
		case q.Out == nil:
		case q.All:
			lo = 0
		case q.Logits:
			lo = n - 1
		}
		for j := lo; j < n; j++ {
			k := len(dst)
			RMSNorm(s.xb[k*E:(k+1)*E], s.x[(r+j)*E:(r+j+1)*E], m.OutNorm, c.NormEps)
			dst = append(dst, q.Out[(j-lo)*nv:(j-lo+1)*nv])
			if len(dst) == s.maxRows {
				flush()
			}
		}
		r += n
	}
	flush()
	s.bt.dst = dst
}
