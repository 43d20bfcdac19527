package model

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/neon"
	"github.com/geisten/geist/quant"
)

// EAGLE-3 heads ("eagle3" GGUFs): one decoder layer fed the fused
// features of three target layers. The target's residual stream entering
// layers TargetLayers (CaptureInputs) is concatenated and projected:
// g = fc·features. At position P the decoder takes the pair (token at
// P+1, g of P), rope at P: e = attn_norm(target token_embd[token]), gn =
// attn_norm_2(g); q, k, v = W·[e ; gn] (k and v into the head's own
// cache); state = g + attn_output·attention; state += FFN(ffn_norm(state))
// (SiLU-gated). That pre-norm state is the next draft step's g; logits =
// output·output_norm(state) over the draft vocabulary, placed at the
// target ids d2t (every other id is −∞), as llama.cpp's
// src/models/eagle3.cpp and common/speculative.cpp compute them.
type Eagle3 struct {
	NEmbd, NEmbdTarget, NFF int
	NHead, NHeadKV, HeadDim int
	RopeDim                 int
	RopeBase                float32
	Eps                     float32
	TargetLayers            []int
	NormBeforeResidual      bool

	FC                  *quant.Matrix // [NEmbd × 3·NEmbdTarget]
	AttnNorm, AttnNorm2 []float32
	Wq, Wk, Wv, Wo      *quant.Matrix
	FFNNorm, OutNorm    []float32
	Wgate, Wup, Wdown   *quant.Matrix
	Output              *quant.Matrix // [draft vocab × NEmbd]
	TokEmbd             *quant.Matrix // own embeddings, or the target's
	Freqs               []float32
	D2T                 []int32 // draft id → target id
	NVocab              int     // the target's
	target              *Model
}

// IsEagle3 reports whether f is an EAGLE-3 head.
func IsEagle3(f *gguf.File) bool { return f.Arch() == "eagle3" }

// LoadEagle3 resolves an EAGLE-3 head's weights for target.
func LoadEagle3(f *gguf.File, target *Model) (*Eagle3, error) {
	if !IsEagle3(f) {
		return nil, fmt.Errorf("model: %q is not an eagle3 file", f.Arch())
	}
	p := "eagle3."
	get := func(key string, def int, req bool) (int, error) { return metaInt(f, p+key, def, req) }
	e := &Eagle3{target: target, NVocab: target.NVocab}
	var err error
	if e.NEmbd, err = get("embedding_length", 0, true); err != nil {
		return nil, err
	}
	if e.NFF, err = get("feed_forward_length", 0, true); err != nil {
		return nil, err
	}
	if e.NHead, err = get("attention.head_count", 0, true); err != nil {
		return nil, err
	}
	if e.NHeadKV, err = get("attention.head_count_kv", e.NHead, false); err != nil {
		return nil, err
	}
	if e.NEmbdTarget, err = get("target_hidden_size", target.NEmbd, false); err != nil {
		return nil, err
	}
	nl, err := get("block_count", 1, false)
	if err != nil {
		return nil, err
	}
	if e.Eps, err = metaFloat(f, p+"attention.layer_norm_rms_epsilon", 1e-5); err != nil {
		return nil, err
	}
	if e.RopeBase, err = metaFloat(f, p+"rope.freq_base", 1e4); err != nil {
		return nil, err
	}
	switch {
	case nl != 1:
		return nil, fmt.Errorf("model: eagle3 with %d decoder layers (want 1)", nl)
	case e.NEmbd <= 0 || e.NFF <= 0 || e.NHead <= 0 || e.NHeadKV <= 0 || e.NHead%e.NHeadKV != 0 || e.NEmbd%e.NHead != 0:
		return nil, fmt.Errorf("model: eagle3: width %d, FFN %d, %d heads over %d KV heads", e.NEmbd, e.NFF, e.NHead, e.NHeadKV)
	case e.NEmbdTarget != target.NEmbd:
		return nil, fmt.Errorf("model: eagle3 for a target of width %d, the target has %d", e.NEmbdTarget, target.NEmbd)
	}
	e.HeadDim = e.NEmbd / e.NHead
	if kl, err := get("attention.key_length", e.HeadDim, false); err != nil || kl != e.HeadDim {
		return nil, fmt.Errorf("model: eagle3: key length %d, head size %d (%v)", kl, e.HeadDim, err)
	}
	if e.RopeDim, err = get("rope.dimension_count", e.HeadDim, false); err != nil {
		return nil, err
	}
	if e.RopeDim <= 0 || e.RopeDim > e.HeadDim || e.RopeDim%2 != 0 {
		return nil, fmt.Errorf("model: eagle3: rope dimension %d for head size %d", e.RopeDim, e.HeadDim)
	}
	v, _ := f.Value(p + "target_layers")
	ls, ok := intArray(v)
	if !ok {
		v, _ = f.Value(p + "extract_layers")
		ls, ok = intArray(v)
	}
	if !ok || len(ls) != 3 {
		return nil, fmt.Errorf("model: eagle3 needs 3 target layers (eagle3.target_layers), has %v", v)
	}
	for _, l := range ls {
		if l < 0 || l > int64(target.NLayer) {
			return nil, fmt.Errorf("model: eagle3 target layer %d out of range for a target of %d layers", l, target.NLayer)
		}
		e.TargetLayers = append(e.TargetLayers, int(l))
	}
	if b, ok := f.Value(p + "norm_before_residual"); ok {
		e.NormBeforeResidual, _ = b.(bool)
	}
	ld := loader{f}
	E := e.NEmbd
	if e.FC, err = ld.matrix("fc.weight", E, 3*e.NEmbdTarget); err != nil {
		return nil, err
	}
	b := "blk.0."
	if e.AttnNorm, err = ld.vector(b+"attn_norm.weight", E); err != nil {
		return nil, err
	}
	if e.AttnNorm2, err = ld.vector(b+"attn_norm_2.weight", E); err != nil {
		return nil, err
	}
	if e.Wq, err = ld.matrix(b+"attn_q.weight", e.NHead*e.HeadDim, 2*E); err != nil {
		return nil, err
	}
	if e.Wk, err = ld.matrix(b+"attn_k.weight", e.NHeadKV*e.HeadDim, 2*E); err != nil {
		return nil, err
	}
	if e.Wv, err = ld.matrix(b+"attn_v.weight", e.NHeadKV*e.HeadDim, 2*E); err != nil {
		return nil, err
	}
	if e.Wo, err = ld.matrix(b+"attn_output.weight", E, e.NHead*e.HeadDim); err != nil {
		return nil, err
	}
	if e.FFNNorm, err = ld.vector(b+"ffn_norm.weight", E); err != nil {
		return nil, err
	}
	if e.Wgate, err = ld.matrix(b+"ffn_gate.weight", e.NFF, E); err != nil {
		return nil, err
	}
	if e.Wup, err = ld.matrix(b+"ffn_up.weight", e.NFF, E); err != nil {
		return nil, err
	}
	if e.Wdown, err = ld.matrix(b+"ffn_down.weight", E, e.NFF); err != nil {
		return nil, err
	}
	if e.OutNorm, err = ld.vector("output_norm.weight", E); err != nil {
		return nil, err
	}
	if _, ok := f.Tensor(b + "rope_freqs.weight"); ok {
		if e.Freqs, err = ld.vector(b+"rope_freqs.weight", e.RopeDim/2); err != nil {
			return nil, err
		}
	}
	ndv := target.NVocab
	if dt, ok := f.Tensor("d2t"); ok {
		if dt.Type != quant.I64 || len(dt.Dims) != 1 || dt.Dims[0] <= 0 || dt.Dims[0] > int64(target.NVocab) || len(dt.Data) != 8*int(dt.Dims[0]) {
			return nil, fmt.Errorf("model: eagle3: d2t must be I64 of at most %d entries, is %s %v", target.NVocab, dt.Type, dt.Dims)
		}
		ndv = int(dt.Dims[0])
		e.D2T = make([]int32, ndv)
		for i := range e.D2T {
			t := int64(binary.LittleEndian.Uint64(dt.Data[8*i:]))
			if t < 0 || t >= int64(target.NVocab) {
				return nil, fmt.Errorf("model: eagle3: d2t[%d] = %d is outside the target's vocabulary", i, t)
			}
			e.D2T[i] = int32(t)
		}
	}
	if _, ok := f.Tensor("output.weight"); ok {
		if e.Output, err = ld.matrix("output.weight", ndv, E); err != nil {
			return nil, err
		}
	} else if e.NEmbd == target.NEmbd && ndv == target.NVocab {
		e.Output = target.Output
	} else {
		return nil, fmt.Errorf("model: eagle3 has no output.weight and cannot use the target's")
	}
	if _, ok := f.Tensor("token_embd.weight"); ok {
		if e.TokEmbd, err = ld.matrix("token_embd.weight", target.NVocab, E); err != nil {
			return nil, err
		}
	} else if target.NEmbd == E {
		e.TokEmbd = target.TokEmbd
	} else {
		return nil, fmt.Errorf("model: eagle3 has no token_embd and the target's width %d is not its %d", target.NEmbd, E)
	}
	return e, nil
}

// Bytes is the weight bytes of one decoder step.
func (e *Eagle3) Bytes() int64 {
	n := int64(0)
	for _, m := range []*quant.Matrix{e.Wq, e.Wk, e.Wv, e.Wo, e.Wgate, e.Wup, e.Wdown, e.Output} {
		n += int64(len(m.Data))
	}
	return n + int64(e.TokEmbd.RowBytes())
}

// Eagle3State is an EAGLE-3 head's KV cache (F16, like llama.cpp's), the
// encoder outputs g of the target's last positions and the step buffers.
// Position P of the cache holds the pair (token at P+1, g of P): Feed runs
// a pair as soon as the next token is kept, Sync runs the last one (whose
// next token the target has not kept yet) and Step the draft steps past
// it. The cache grows with the target's context (allocating only then).
type Eagle3State struct {
	e          *Eagle3
	ctx, limit int       // positions allocated, most it may grow to
	n          int       // cache positions whose pair is valid
	m          int       // target positions fed
	kc, vc     []uint16  // [ctx][NHeadKV·HeadDim]
	toks       []int32   // toks[P]: the token paired at P
	gtok       []int32   // gtok[P]: the target's token at P when it was fed
	gs         []float32 // [gRing][NEmbd] g of the last positions fed, P at P % gRing
	in, qkv    []float32 // [e ; gn], q|k|v
	x, xn, o   []float32
	att        []float32
	gate, up   []float32
	cs         []float32
	sc         []float32
	dl, logits []float32
	acts       []byte
	row        []byte
}

// gRing is how many positions' g an Eagle3State keeps: the pair of a
// position needs its g until the next position is kept.
const gRing = 4

// NewState sizes a cache of ctx positions that may grow to limit.
func (e *Eagle3) NewState(ctx, limit int) *Eagle3State {
	E, kd := e.NEmbd, e.NHeadKV*e.HeadDim
	widest := 0
	for _, m := range []*quant.Matrix{e.FC, e.Wq, e.Wk, e.Wv, e.Wo, e.Wgate, e.Wup, e.Wdown, e.Output} {
		widest = max(widest, m.ActBytes(1))
	}
	ctx = max(min(ctx, limit), 1)
	return &Eagle3State{e: e, ctx: ctx, limit: max(limit, ctx),
		kc: make([]uint16, ctx*kd), vc: make([]uint16, ctx*kd), toks: make([]int32, ctx), gtok: make([]int32, ctx), gs: make([]float32, gRing*E),
		in: make([]float32, 2*E), qkv: make([]float32, e.NHead*e.HeadDim+2*kd),
		x: make([]float32, E), xn: make([]float32, E), o: make([]float32, E), att: make([]float32, e.NHead*e.HeadDim),
		gate: make([]float32, e.NFF), up: make([]float32, e.NFF), cs: make([]float32, e.RopeDim), sc: make([]float32, ctx),
		dl: make([]float32, e.Output.Rows), logits: make([]float32, e.NVocab), acts: make([]byte, widest),
		row: make([]byte, e.TokEmbd.RowBytes())}
}

// BytesPerPosition is what a position of the cache takes (keys and
// values, two tokens, the score).
func (st *Eagle3State) BytesPerPosition() int64 {
	return int64(4*st.e.NHeadKV*st.e.HeadDim + 12)
}

// reserve grows the cache to hold position p (at most limit).
func (st *Eagle3State) reserve(p int) error {
	if p < st.ctx {
		return nil
	}
	if p >= st.limit {
		return fmt.Errorf("model: eagle3: position %d past the context of %d", p, st.limit)
	}
	c := min(st.limit, max(2*st.ctx, p+1))
	kd := st.e.NHeadKV * st.e.HeadDim
	grow16 := func(b []uint16) []uint16 { return append(b, make([]uint16, (c-st.ctx)*kd)...) }
	grow32 := func(b []int32) []int32 { return append(b, make([]int32, c-st.ctx)...) }
	st.kc, st.vc = grow16(st.kc), grow16(st.vc)
	st.toks, st.gtok = grow32(st.toks), grow32(st.gtok)
	st.sc = make([]float32, c)
	st.ctx = c
	return nil
}

// Len is the cache positions whose pair is valid; Known the target
// positions fed.
func (st *Eagle3State) Len() int   { return st.n }
func (st *Eagle3State) Known() int { return st.m }

// g is the kept g of position p (nil: not kept).
func (st *Eagle3State) g(p int) []float32 {
	if p < 0 || p >= st.m || p < st.m-gRing {
		return nil
	}
	E := st.e.NEmbd
	r := p % gRing
	return st.gs[r*E : (r+1)*E]
}

// Truncate follows the target's cache back to its first k positions: the
// pair of k-1 waits for the token at k again, and when the g of k-1 is no
// longer kept the target must feed k-1 again (Known).
func (st *Eagle3State) Truncate(k int) {
	k = max(k, 0)
	if k >= st.m {
		st.n = min(st.n, max(k-1, 0))
		return
	}
	if st.g(k-1) == nil {
		k = max(k-1, 0)
	}
	st.m = k
	st.n = min(st.n, max(k-1, 0))
}

// Feed takes the target's features of position pos (at most Known()),
// where its token is tok, and runs the pair of pos-1 when the cache ends
// there.
func (st *Eagle3State) Feed(feat []float32, tok int32, pos int) error {
	if pos < 0 || pos > st.m {
		return fmt.Errorf("model: eagle3: features of position %d, %d known", pos, st.m)
	}
	if err := st.reserve(pos); err != nil {
		return err
	}
	E := st.e.NEmbd
	prev := st.g(pos - 1)
	r := pos % gRing
	dense(st.e.FC, st.gs[r*E:(r+1)*E], feat, st.acts)
	st.gtok[pos] = tok
	st.m = pos + 1
	st.n = min(st.n, pos)
	if p := pos - 1; p >= 0 && st.n == p && prev != nil {
		// The pair of the position before is complete now (as
		// llama.cpp's process() runs it): run it here, so that a draft
		// runs only its own steps.
		if _, err := st.decode(tok, prev, p, false); err != nil {
			return err
		}
	}
	return nil
}

// Sync brings the cache to history (the target's cache holds all of it
// but the last token) and runs the pair of the last target position with
// the history's last token, returning its logits; Prenorm is then the next
// step's g. It fails when the cache is behind (a position's features are
// missing).
func (st *Eagle3State) Sync(history []int32) ([]float32, error) {
	N := len(history) - 1
	if N < 1 || N > st.m {
		return nil, errNoKV
	}
	if st.m > N {
		st.Truncate(N)
	}
	for p := 0; p < N; p++ {
		if st.gtok[p] != history[p] {
			st.Truncate(p) // the target must feed p again
			return nil, errNoKV
		}
	}
	n := min(st.n, N-1)
	for p := max(0, n-gRing); p < n; p++ {
		if st.toks[p] != history[p+1] {
			n = p
			break
		}
	}
	if n < N-1 || st.g(N-1) == nil {
		st.Truncate(n)
		return nil, errNoKV
	}
	st.n = n
	if err := st.reserve(N - 1); err != nil {
		return nil, err
	}
	return st.decode(history[N], st.g(N-1), N-1, true)
}

// Step runs the pair (tok, g) at the next position (a draft step past the
// target's cache; Rewind drops it).
func (st *Eagle3State) Step(tok int32, g []float32) ([]float32, error) {
	return st.decode(tok, g, st.n, true)
}

// Rewind drops the draft steps: the cache keeps its first n positions.
func (st *Eagle3State) Rewind(n int) { st.n = min(st.n, max(n, 0)) }

// Candidates are the target tokens the head's logits can hold (its draft
// vocabulary through d2t; every other logit is −∞), nil when it drafts
// over the whole vocabulary.
func (st *Eagle3State) Candidates() []int32 { return st.e.D2T }

// Prenorm is the pre-norm state of the last decode: the next step's g.
func (st *Eagle3State) Prenorm() []float32 { return st.x }

// decode runs the decoder layer on (tok, g) at position pos, appending its
// keys and values; with logits it also computes the logits.
func (st *Eagle3State) decode(tok int32, g []float32, pos int, logits bool) ([]float32, error) {
	e := st.e
	if pos != st.n {
		return nil, fmt.Errorf("model: eagle3 decode at %d (cache %d)", pos, st.n)
	}
	if err := st.reserve(pos); err != nil {
		return nil, err
	}
	if tok < 0 || int(tok) >= e.NVocab {
		return nil, fmt.Errorf("model: eagle3: token %d out of range", tok)
	}
	E, hd, kd := e.NEmbd, e.HeadDim, e.NHeadKV*e.HeadDim
	qd := e.NHead * hd
	// e: the token's embedding, normed; gn: g normed.
	quant.DequantizeRow(e.TokEmbd.Type, e.TokEmbd.Row(int(tok), st.row), st.xn)
	RMSNorm(st.in[:E], st.xn, e.AttnNorm, e.Eps)
	RMSNorm(st.in[E:], g, e.AttnNorm2, e.Eps)
	if e.NormBeforeResidual {
		copy(st.x, st.in[E:])
	} else {
		copy(st.x, g)
	}
	q, k, v := st.qkv[:qd], st.qkv[qd:qd+kd], st.qkv[qd+kd:qd+2*kd]
	dense(e.Wk, k, st.in, st.acts)
	dense(e.Wv, v, st.in, st.acts)
	ropeTableFor(st.cs, pos, e.RopeBase, e.Freqs)
	for h := 0; h < e.NHeadKV; h++ {
		ropeApply(k[h*hd:(h+1)*hd], st.cs, false)
	}
	neon.ToF16(st.kc[pos*kd:(pos+1)*kd], k)
	neon.ToF16(st.vc[pos*kd:(pos+1)*kd], v)
	st.toks[pos] = tok
	st.n = pos + 1
	if !logits {
		// A pair fed from the target's rows (Feed) leaves only its keys
		// and values: its state is not read (Sync runs the last pair
		// with logits and makes the next step's g), so the attention,
		// the output projection and the FFN are not run: 8.4M of 59M
		// multiply-adds for a Qwen3-1.7B head.
		return nil, nil
	}
	dense(e.Wq, q, st.in, st.acts)
	for h := 0; h < e.NHead; h++ {
		ropeApply(q[h*hd:(h+1)*hd], st.cs, false)
	}
	ks := neon.Active()
	scl := float32(1 / math.Sqrt(float64(hd)))
	group := e.NHead / e.NHeadKV
	for h := 0; h < e.NHead; h++ {
		kh := h / group
		sc := st.sc[:pos+1]
		for p := 0; p <= pos; p++ {
			sc[p] = ks.DotF32F16(q[h*hd:(h+1)*hd], st.kc[p*kd+kh*hd:p*kd+(kh+1)*hd]) * scl
		}
		Softmax(sc)
		out := st.att[h*hd : (h+1)*hd]
		clear(out)
		for p := 0; p <= pos; p++ {
			ks.AxpyF16(out, sc[p], st.vc[p*kd+kh*hd:p*kd+(kh+1)*hd])
		}
	}
	dense(e.Wo, st.o, st.att, st.acts)
	addTo(st.x, st.o)
	RMSNorm(st.xn, st.x, e.FFNNorm, e.Eps)
	dense(e.Wgate, st.gate, st.xn, st.acts)
	dense(e.Wup, st.up, st.xn, st.acts)
	SiLUMul(st.gate, st.up)
	dense(e.Wdown, st.o, st.gate, st.acts)
	addTo(st.x, st.o)
	RMSNorm(st.xn, st.x, e.OutNorm, e.Eps)
	if e.D2T == nil {
		dense(e.Output, st.logits, st.xn, st.acts)
		return st.logits, nil
	}
	dense(e.Output, st.dl, st.xn, st.acts)
	inf := float32(math.Inf(-1))
	for i := range st.logits {
		st.logits[i] = inf
	}
	for i, t := range e.D2T {
		st.logits[t] = st.dl[i]
	}
	return st.logits, nil
}
