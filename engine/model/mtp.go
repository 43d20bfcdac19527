package model

import (
	"fmt"
	"math"

	"github.com/geisten/geist/neon"
	"github.com/geisten/geist/quant"
)

// Qwen3.5's next-token prediction (MTP, NextN) block: the file's last
// layer(s), which the main pass does not run. Cache position p holds the
// pair (target token x_p, the target's normed hidden state h_{p-1}, zeros
// for p = 0): x = eh_proj·[enorm(embd(x_p)) ; hnorm(h_{p-1})], then one
// gated full-attention block like the target's (its own KV cache, the
// same partial rope), then out = shared_head_norm(x), and logits = the
// target's output head · out predict x_{p+1}, the token after x_p (the
// target's own h_{p-1} predicted x_p).
// A draft step past the target's cache feeds the drafted token with the
// previous step's out as h. That is what llama.cpp's qwen35 MTP graph
// and its draft-mtp driver compute (common/speculative.cpp: the target's
// h rows shifted right by one position, the first paired with the last row
// of the previous batch).
type MTP struct {
	NEmbd, NHead, NHeadKV, HeadDim, NFF int
	RopeDim                             int
	RopeBase, RopeScale                 float32
	Eps                                 float32
	AttnScale                           float32

	EHProj            *quant.Matrix // [NEmbd × 2·NEmbd]
	ENorm, HNorm      []float32
	AttnNorm, FFNNorm []float32
	Wq                *quant.Matrix // [2·NHead·HeadDim × NEmbd]: per head its queries, then its gate
	Wk, Wv, Wo        *quant.Matrix
	QNorm, KNorm      []float32
	Wgate, Wup, Wdown *quant.Matrix
	HeadNorm          []float32     // shared_head_norm (or the target's output norm)
	TokEmbd           *quant.Matrix // nextn.embed_tokens or the target's
	Output            *quant.Matrix // nextn.shared_head_head or the target's head
	NVocab            int
}

// LoadMTP resolves the first next-token prediction block of m (which
// must have one: NextN > 0) from m's own file.
func LoadMTP(m *Model) (*MTP, error) {
	c := &m.Config
	if c.NextN <= 0 {
		return nil, fmt.Errorf("model: %s has no next-token prediction (MTP) block", c.Arch)
	}
	if c.NHead <= 0 || c.HeadDim <= 0 || c.HeadDimV != c.HeadDim {
		return nil, fmt.Errorf("model: MTP block: %d heads of %d (values %d)", c.NHead, c.HeadDim, c.HeadDimV)
	}
	ld := loader{m.File}
	E, hd := c.NEmbd, c.HeadDim
	t := &MTP{NEmbd: E, NHead: c.NHead, HeadDim: hd, RopeDim: c.RopeDim, RopeBase: c.RopeBase, RopeScale: c.RopeScale,
		Eps: c.NormEps, AttnScale: c.AttnScale, NVocab: c.NVocab}
	if t.AttnScale == 0 {
		t.AttnScale = float32(1 / math.Sqrt(float64(hd)))
	}
	if t.RopeScale == 0 {
		t.RopeScale = 1
	}
	if t.RopeDim <= 0 || t.RopeDim > hd || t.RopeDim%2 != 0 {
		return nil, fmt.Errorf("model: MTP block: rope dimension %d for head size %d", t.RopeDim, hd)
	}
	p := fmt.Sprintf("blk.%d.", c.NLayer)
	kt, ok := m.File.Tensor(p + "attn_k.weight")
	if !ok || len(kt.Dims) != 2 || kt.Dims[1] <= 0 || kt.Dims[1]%int64(hd) != 0 {
		return nil, fmt.Errorf("model: MTP block: missing or misshapen %sattn_k.weight", p)
	}
	t.NHeadKV = int(kt.Dims[1]) / hd
	if t.NHeadKV <= 0 || c.NHead%t.NHeadKV != 0 {
		return nil, fmt.Errorf("model: MTP block: %d query heads over %d key/value heads", c.NHead, t.NHeadKV)
	}
	ft, ok := m.File.Tensor(p + "ffn_gate.weight")
	if !ok || len(ft.Dims) != 2 || ft.Dims[1] <= 0 || ft.Dims[1] > 1<<20 {
		return nil, fmt.Errorf("model: MTP block: missing or misshapen %sffn_gate.weight", p)
	}
	t.NFF = int(ft.Dims[1])
	kd := t.NHeadKV * hd
	var err error
	steps := []func() error{
		func() (err error) { t.EHProj, err = ld.matrix(p+"nextn.eh_proj.weight", E, 2*E); return },
		func() (err error) { t.ENorm, err = ld.vector(p+"nextn.enorm.weight", E); return },
		func() (err error) { t.HNorm, err = ld.vector(p+"nextn.hnorm.weight", E); return },
		func() (err error) { t.AttnNorm, err = ld.vector(p+"attn_norm.weight", E); return },
		func() (err error) { t.FFNNorm, err = ld.vector(p+"post_attention_norm.weight", E); return },
		func() (err error) { t.Wq, err = ld.matrix(p+"attn_q.weight", 2*c.NHead*hd, E); return },
		func() (err error) { t.Wk, err = ld.matrix(p+"attn_k.weight", kd, E); return },
		func() (err error) { t.Wv, err = ld.matrix(p+"attn_v.weight", kd, E); return },
		func() (err error) { t.Wo, err = ld.matrix(p+"attn_output.weight", E, c.NHead*hd); return },
		func() (err error) { t.QNorm, err = ld.vector(p+"attn_q_norm.weight", hd); return },
		func() (err error) { t.KNorm, err = ld.vector(p+"attn_k_norm.weight", hd); return },
		func() (err error) { t.Wgate, err = ld.matrix(p+"ffn_gate.weight", t.NFF, E); return },
		func() (err error) { t.Wup, err = ld.matrix(p+"ffn_up.weight", t.NFF, E); return },
		func() (err error) { t.Wdown, err = ld.matrix(p+"ffn_down.weight", E, t.NFF); return },
	}
	for _, s := range steps {
		if err = s(); err != nil {
			return nil, err
		}
	}
	t.HeadNorm, t.TokEmbd, t.Output = m.OutNorm, m.TokEmbd, m.Output
	if _, ok := m.File.Tensor(p + "nextn.shared_head_norm.weight"); ok {
		if t.HeadNorm, err = ld.vector(p+"nextn.shared_head_norm.weight", E); err != nil {
			return nil, err
		}
	}
	if _, ok := m.File.Tensor(p + "nextn.embed_tokens.weight"); ok {
		if t.TokEmbd, err = ld.matrix(p+"nextn.embed_tokens.weight", c.NVocab, E); err != nil {
			return nil, err
		}
	}
	if _, ok := m.File.Tensor(p + "nextn.shared_head_head.weight"); ok {
		if t.Output, err = ld.matrix(p+"nextn.shared_head_head.weight", c.NVocab, E); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// Bytes is the weight bytes one draft step reads (the block, one
// embedding row and the output head's first vocab rows).
func (t *MTP) Bytes(vocab int) int64 {
	n := int64(t.TokEmbd.RowBytes())
	for _, w := range []*quant.Matrix{t.EHProj, t.Wq, t.Wk, t.Wv, t.Wo, t.Wgate, t.Wup, t.Wdown} {
		n += int64(len(w.Data))
	}
	return n + int64(len(t.Output.Data))*int64(min(max(vocab, 0), t.Output.Rows))/int64(t.Output.Rows)
}

// MTPState is an MTP block's KV cache (F16, like llama.cpp's), the
// target's hidden states it pairs with the next tokens, and the step
// buffers. Cache positions [lo, n) hold valid pairs; the target's rows of
// positions [lo, m) were fed (n < m: the pairs of [n, m) are recorded,
// not yet run: lazy feeding). Feed runs the pair of every position the
// target keeps; Step runs draft steps past it, which Rewind drops. A
// position the target got without passing its rows here (restored from a
// snapshot) leaves a hole: the cache restarts after it as at position 0
// (h zero), which changes drafts but never the verified output.
type MTPState struct {
	t          *MTP
	ctx, limit int
	lo, n, m   int
	kc, vc     []uint16  // [ctx][NHeadKV·HeadDim]
	toks       []int32   // toks[p]: the token paired at cache position p
	hs         []float32 // [ctx][NEmbd] the target's normed hidden state of each fed position
	zero       []float32 // [NEmbd] h before the first position
	hin        []float32 // [NEmbd] Scratch
	emb, in    []float32 // the token's embedding; [enorm(e) ; hnorm(h)]
	x, xn, o   []float32
	qg, q, gt  []float32 // queries and gates as the product gives them; queries; gates
	k, v, att  []float32
	gate, up   []float32
	out        []float32 // shared_head_norm of the block's output: the next step's h
	cs, sc     []float32
	logits     []float32
	acts       []byte
	row        []byte
	head       func(out, x []float32, rows int) // the output head's product (the target's pool), nil: single-threaded
	vocab      int                              // the head rows scored (the draft vocabulary: ids below it)
	lazy       bool                             // Feed records pairs for CatchUp
	stop       func() error                     // the request's cancellation, checked between CatchUp's pairs (nil: none)
}

// MTPCatchUpMax is the most recorded pairs CatchUp runs (each a pass of
// the block, about a millisecond on a board): when more are pending, the
// stretch before the last MTPCatchUpMax of them is a hole (the cache
// restarts there, as after positions restored without their rows), which
// changes drafts, never the output, and bounds what a drafting request
// pays after a long plain stretch.
const MTPCatchUpMax = 256

// NewState sizes a cache of ctx positions that may grow to limit. head,
// when not nil, computes the output head's first rows (out = Output·x) on
// the target's workers.
func (t *MTP) NewState(ctx, limit int, head func(out, x []float32, rows int)) *MTPState {
	E, hd, kd := t.NEmbd, t.HeadDim, t.NHeadKV*t.HeadDim
	qd := t.NHead * hd
	widest := 0
	for _, m := range []*quant.Matrix{t.EHProj, t.Wq, t.Wk, t.Wv, t.Wo, t.Wgate, t.Wup, t.Wdown, t.Output} {
		widest = max(widest, m.ActBytes(1))
	}
	ctx = max(min(ctx, limit), 1)
	return &MTPState{t: t, ctx: ctx, limit: max(limit, ctx),
		kc: make([]uint16, ctx*kd), vc: make([]uint16, ctx*kd), toks: make([]int32, ctx), hs: make([]float32, ctx*E), zero: make([]float32, E), hin: make([]float32, E),
		emb: make([]float32, E), in: make([]float32, 2*E), x: make([]float32, E), xn: make([]float32, E), o: make([]float32, E),
		qg: make([]float32, 2*qd), q: make([]float32, qd), gt: make([]float32, qd), k: make([]float32, kd), v: make([]float32, kd), att: make([]float32, qd),
		gate: make([]float32, t.NFF), up: make([]float32, t.NFF), out: make([]float32, E), cs: make([]float32, t.RopeDim), sc: make([]float32, ctx),
		logits: make([]float32, t.NVocab), acts: make([]byte, widest), row: make([]byte, t.TokEmbd.RowBytes()), head: head, vocab: t.NVocab}
}

// BytesPerPosition is what a position of the cache takes (keys and
// values, the hidden state, the token, the score).
func (st *MTPState) BytesPerPosition() int64 {
	return int64(4*st.t.NHeadKV*st.t.HeadDim + 4*st.t.NEmbd + 8)
}

// SetDraftVocab makes drafts score only the token ids below n (0: every
// token): the output head, most of a draft step's cost on a small model
// with a large vocabulary, reads only its first n rows, and the other ids
// are never drafted. Byte-level BPE vocabularies number their pieces in
// merge order, so the first ids are the common ones. The verified output
// does not change; only which drafts are made.
func (st *MTPState) SetDraftVocab(n int) {
	if n <= 0 || n > st.t.NVocab {
		n = st.t.NVocab
	}
	st.vocab = n
	inf := float32(math.Inf(-1))
	for i := n; i < len(st.logits); i++ {
		st.logits[i] = inf
	}
}

// DraftVocab is the number of token ids drafts score.
func (st *MTPState) DraftVocab() int { return st.vocab }

// reserve grows the cache to hold position p (at most limit).
func (st *MTPState) reserve(p int) error {
	if p < st.ctx {
		return nil
	}
	if p >= st.limit {
		return fmt.Errorf("model: MTP: position %d past the context of %d", p, st.limit)
	}
	c := min(st.limit, max(2*st.ctx, p+1))
	kd, E := st.t.NHeadKV*st.t.HeadDim, st.t.NEmbd
	st.kc = append(st.kc, make([]uint16, (c-st.ctx)*kd)...)
	st.vc = append(st.vc, make([]uint16, (c-st.ctx)*kd)...)
	st.toks = append(st.toks, make([]int32, c-st.ctx)...)
	st.hs = append(st.hs, make([]float32, (c-st.ctx)*E)...)
	st.sc = make([]float32, c)
	st.ctx = c
	return nil
}

// Len is the end of the valid cache positions, Fed the target positions
// whose rows were fed.
func (st *MTPState) Len() int { return st.n }
func (st *MTPState) Fed() int { return st.m }

// h is the target's hidden state of position p (zeros before the first
// position fed since the last hole).
func (st *MTPState) h(p int) []float32 {
	if p < st.lo || p >= st.m {
		return st.zero
	}
	E := st.t.NEmbd
	return st.hs[p*E : (p+1)*E]
}

// Feed takes the target's normed hidden state h of position pos, whose
// token is tok, and runs the pair of pos (tok with the hidden state of
// pos-1). A position before the last fed one truncates the cache there;
// one past it leaves a hole. When lazy (SetLazy), the pair is only
// recorded and runs when a draft next needs the cache (CatchUp).
func (st *MTPState) Feed(h []float32, tok int32, pos int) error {
	if pos < 0 {
		return fmt.Errorf("model: MTP: position %d", pos)
	}
	if err := st.reserve(pos); err != nil {
		return err
	}
	if pos > st.m || pos < st.lo {
		st.lo, st.n = pos, pos // a hole: restart here
	}
	st.m = pos
	E := st.t.NEmbd
	if pos < st.n && st.toks[pos] == tok {
		st.n = pos + 1 // the pair was run by a draft's first step
	} else {
		st.n = min(st.n, pos)
		st.toks[pos] = tok // the pair of pos, run by CatchUp
	}
	copy(st.hs[pos*E:(pos+1)*E], h)
	st.m = pos + 1
	if st.lazy {
		return nil
	}
	return st.CatchUp()
}

// SetLazy makes Feed only record the pairs (a request that does not draft
// with the block: plain decoding does not pay for it) or, off, run them
// as they come; either way the cache a draft sees is the same.
func (st *MTPState) SetLazy(on bool) { st.lazy = on }

// SetCancel makes CatchUp call stop between pairs and return its error
// (the pairs not yet run stay recorded); nil: never.
func (st *MTPState) SetCancel(stop func() error) { st.stop = stop }

// CatchUp runs the recorded pairs not yet run, in position order: each
// is what Feed would have run at once (the same token, the same hidden
// state of the position before, the same cache), so the cache's bits do
// not depend on when. Past MTPCatchUpMax pending pairs the cache restarts
// at the first of the last MTPCatchUpMax (a hole before it); a
// cancellation (SetCancel) stops it between pairs.
func (st *MTPState) CatchUp() error {
	if st.m-st.n > MTPCatchUpMax {
		st.lo = st.m - MTPCatchUpMax
		st.n = st.lo
	}
	for st.n < st.m {
		if st.stop != nil {
			if err := st.stop(); err != nil {
				return err
			}
		}
		p := st.n
		if _, err := st.decode(st.toks[p], st.h(p-1), p, false); err != nil {
			st.m = p // the pairs from p on are dropped (the next Feed restarts there)
			return err
		}
	}
	return nil
}

// Synced reports whether the cache holds the pairs of history's first n
// positions (every one of them fed), truncating it where it does not.
func (st *MTPState) Synced(history []int32, n int) bool {
	if st.m > n { // the target went back (a prefix reused): keep the pairs before
		st.m, st.n = n, min(st.n, n)
	}
	if st.m == n && st.n < n && st.CatchUp() != nil {
		return false
	}
	if st.m != n || st.n < n {
		return false
	}
	for p := st.lo; p < n; p++ {
		if st.toks[p] != history[p] {
			st.m, st.n = p, p
			return false
		}
	}
	return true
}

// Step runs the pair (tok, h) at cache position pos (at most Len) and
// returns its logits; Out is then the next step's h.
func (st *MTPState) Step(tok int32, h []float32, pos int) ([]float32, error) {
	if pos > st.n || pos < st.lo {
		return nil, fmt.Errorf("model: MTP step at %d (cache [%d, %d))", pos, st.lo, st.n)
	}
	st.n = pos
	return st.decode(tok, h, pos, true)
}

// H is the target's hidden state of position p that a step pairs with
// the token at p+1.
func (st *MTPState) H(p int) []float32 { return st.h(p) }

// Scratch is a row of the block's width for the caller's hidden state
// (Feed copies it).
func (st *MTPState) Scratch() []float32 { return st.hin }

// Out is the last step's normed output: the next step's h.
func (st *MTPState) Out() []float32 { return st.out }

// Rewind drops the draft steps: the cache keeps positions before n.
func (st *MTPState) Rewind(n int) { st.n = max(min(st.n, n), st.lo) }

// decode runs the block on (tok, h) at cache position pos = Len,
// appending its keys and values; with logits it also computes the
// logits.
func (st *MTPState) decode(tok int32, h []float32, pos int, logits bool) ([]float32, error) {
	t := st.t
	if pos != st.n {
		return nil, fmt.Errorf("model: MTP decode at %d (cache %d)", pos, st.n)
	}
	if err := st.reserve(pos); err != nil {
		return nil, err
	}
	if tok < 0 || int(tok) >= t.NVocab {
		return nil, fmt.Errorf("model: MTP: token %d out of range", tok)
	}
	E, hd, kd := t.NEmbd, t.HeadDim, t.NHeadKV*t.HeadDim
	quant.DequantizeRow(t.TokEmbd.Type, t.TokEmbd.Row(int(tok), st.row), st.emb)
	RMSNorm(st.in[:E], st.emb, t.ENorm, t.Eps)
	RMSNorm(st.in[E:], h, t.HNorm, t.Eps)
	dense(t.EHProj, st.x, st.in, st.acts)
	// Attention: per head its queries then its gate in one product.
	RMSNorm(st.xn, st.x, t.AttnNorm, t.Eps)
	dense(t.Wq, st.qg, st.xn, st.acts)
	dense(t.Wk, st.k, st.xn, st.acts)
	dense(t.Wv, st.v, st.xn, st.acts)
	for hh := 0; hh < t.NHead; hh++ {
		copy(st.q[hh*hd:(hh+1)*hd], st.qg[2*hh*hd:(2*hh+1)*hd])
		copy(st.gt[hh*hd:(hh+1)*hd], st.qg[(2*hh+1)*hd:(2*hh+2)*hd])
	}
	ropeTableScaled(st.cs, pos, t.RopeBase, t.RopeScale)
	for hh := 0; hh < t.NHead; hh++ {
		hq := st.q[hh*hd : (hh+1)*hd]
		RMSNorm(hq, hq, t.QNorm, t.Eps)
		ropeApply(hq, st.cs, true)
	}
	for hh := 0; hh < t.NHeadKV; hh++ {
		hk := st.k[hh*hd : (hh+1)*hd]
		RMSNorm(hk, hk, t.KNorm, t.Eps)
		ropeApply(hk, st.cs, true)
	}
	neon.ToF16(st.kc[pos*kd:(pos+1)*kd], st.k)
	neon.ToF16(st.vc[pos*kd:(pos+1)*kd], st.v)
	st.toks[pos] = tok
	st.n = pos + 1
	ks := neon.Active()
	group := t.NHead / t.NHeadKV
	for hh := 0; hh < t.NHead; hh++ {
		kh := hh / group
		sc := st.sc[st.lo : pos+1]
		for p := st.lo; p <= pos; p++ {
			sc[p-st.lo] = ks.DotF32F16(st.q[hh*hd:(hh+1)*hd], st.kc[p*kd+kh*hd:p*kd+(kh+1)*hd]) * t.AttnScale
		}
		Softmax(sc)
		out := st.att[hh*hd : (hh+1)*hd]
		clear(out)
		for p := st.lo; p <= pos; p++ {
			ks.AxpyF16(out, sc[p-st.lo], st.vc[p*kd+kh*hd:p*kd+(kh+1)*hd])
		}
	}
	for i := range st.att {
		st.att[i] *= sigmoid(st.gt[i])
	}
	dense(t.Wo, st.o, st.att, st.acts)
	addTo(st.x, st.o)
	RMSNorm(st.xn, st.x, t.FFNNorm, t.Eps)
	dense(t.Wgate, st.gate, st.xn, st.acts)
	dense(t.Wup, st.up, st.xn, st.acts)
	SiLUMul(st.gate, st.up)
	dense(t.Wdown, st.o, st.gate, st.acts)
	addTo(st.x, st.o)
	RMSNorm(st.out, st.x, t.HeadNorm, t.Eps)
	if !logits {
		return nil, nil
	}
	if st.head != nil {
		st.head(st.logits, st.out, st.vocab)
	} else {
		t.Output.QuantizeActsRows(st.acts, st.out, 1, 0, 1)
		t.Output.MulRows(st.logits, t.Output.Rows, st.acts, 1, 0, st.vocab)
	}
	return st.logits, nil
}

// ropeTableScaled is ropeTableFor with a frequency scale (1/linear
// scaling), as the target's own table computes it.
func ropeTableScaled(cs []float32, p int, base, freqScale float32) {
	dims := len(cs)
	thetaScale := float32(math.Pow(float64(base), -2/float64(dims)))
	theta := float32(p)
	for i := 0; i < dims; i += 2 {
		th := freqScale * theta
		cs[i] = float32(math.Cos(float64(th)))
		cs[i+1] = float32(math.Sin(float64(th)))
		theta *= thetaScale
	}
}
