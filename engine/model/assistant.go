package model

import (
	"fmt"
	"math"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/quant"
)

// Gemma 4's assistant drafter ("gemma4-assistant" GGUFs): a few Q-only
// layers that read the target's hidden state and attend over the target's
// own KV cache. A draft step takes a token t (at position pos, not in the
// target's cache yet) and a hidden vector h of the target's width (first
// the target's state before t after its output norm, later the step's own
// h_next):
//
//	x = target token_embd[t]·√d_target; cur = pre_projection·[x ; h]
//	per layer: q = q_norm(attn_q·norm(cur)) per head, rope at pos;
//	  attention (scale 1) over the target's cached keys and values of the
//	  same layer (a local layer sees the last Window positions);
//	  cur += post_attn_norm(attn_output·att)
//	  cur += post_ffw_norm(GELU-gated FFN(ffn_norm(cur))); cur *= layer scale
//	out = output_norm(cur); logits = token_embd·out; h_next = post_projection·out
//
// as llama.cpp's src/models/gemma4-assistant.cpp computes it. Every step of
// a draft runs at the same position (the position of the token after the
// target's cache), as the assistant was trained.
//
// The sparse head: the files of the E2B/E4B assistants carry
// masked_embd_centroids (a centroid per cluster of tokens) and
// masked_embd_ordering (the vocabulary ordered by cluster). With it a step
// scores the centroids, takes the tokens of the SparseTop best clusters
// and computes logits for those only (the rest are −∞): the dense head
// reads the whole embedding matrix per step, the sparse one a few percent.
type Assistant struct {
	NEmbd, NEmbdTarget, NVocab int
	NLayer, NHead              int
	SWA                        []bool
	HeadDim, HeadDimSWA        int
	KVHeads                    []int
	RopeDim, RopeDimSWA        int
	RopeBase, RopeBaseSWA      float32
	Window                     int
	Eps                        float32

	Embd     *quant.Matrix // [NVocab × NEmbd]: the LM head
	OutNorm  []float32
	PreProj  *quant.Matrix // [NEmbd × 2·NEmbdTarget]
	PostProj *quant.Matrix // [NEmbdTarget × NEmbd]
	Freqs    []float32     // rope frequency factors of the global layers
	Layers   []AssistLayer
	// KVLayer[l] is the target layer whose cache assistant layer l reads.
	KVLayer []int

	Centroids *quant.Matrix // [nCentroids × NEmbd] (nil: no sparse head)
	Ordering  []int32       // [NVocab]: the vocabulary by cluster
	// Clustered is the LM head's rows in Ordering's order (anonymous
	// memory; the file's rows are then never read), so that a cluster's
	// tokens are one run of rows.
	Clustered *quant.Matrix
	SparseTop int // clusters a sparse step scores

	target *Model
}

// AssistLayer is one layer of an assistant.
type AssistLayer struct {
	AttnNorm, QNorm, PostAttnNorm []float32
	FFNNorm, PostFFNNorm          []float32
	Wq, Wo                        *quant.Matrix
	Wgate, Wup, Wdown             *quant.Matrix
	OutScale                      float32
	NFF                           int
}

// IsAssistant reports whether f is a Gemma 4 assistant drafter.
func IsAssistant(f *gguf.File) bool { return f.Arch() == "gemma4-assistant" }

// LoadAssistant resolves an assistant's weights for target, checking that
// its geometry matches the target's (it reads the target's cache).
func LoadAssistant(f *gguf.File, target *Model) (*Assistant, error) {
	if !IsAssistant(f) {
		return nil, fmt.Errorf("model: %q is not a gemma4-assistant file", f.Arch())
	}
	p := "gemma4-assistant."
	get := func(key string, def int, req bool) (int, error) { return metaInt(f, p+key, def, req) }
	a := &Assistant{target: target}
	var err error
	if a.NEmbd, err = get("embedding_length", 0, true); err != nil {
		return nil, err
	}
	if a.NEmbdTarget, err = get("embedding_length_out", 0, true); err != nil {
		return nil, err
	}
	if a.NLayer, err = get("block_count", 0, true); err != nil {
		return nil, err
	}
	if a.NHead, err = get("attention.head_count", 0, true); err != nil {
		return nil, err
	}
	if a.HeadDim, err = get("attention.key_length", 0, true); err != nil {
		return nil, err
	}
	if a.HeadDimSWA, err = get("attention.key_length_swa", a.HeadDim, false); err != nil {
		return nil, err
	}
	if a.RopeDim, err = get("rope.dimension_count", a.HeadDim, false); err != nil {
		return nil, err
	}
	if a.RopeDimSWA, err = get("rope.dimension_count_swa", a.HeadDimSWA, false); err != nil {
		return nil, err
	}
	if a.Window, err = get("attention.sliding_window", 0, true); err != nil {
		return nil, err
	}
	if a.RopeBase, err = metaFloat(f, p+"rope.freq_base", 1e6); err != nil {
		return nil, err
	}
	if a.RopeBaseSWA, err = metaFloat(f, p+"rope.freq_base_swa", 1e4); err != nil {
		return nil, err
	}
	if a.Eps, err = metaFloat(f, p+"attention.layer_norm_rms_epsilon", 1e-6); err != nil {
		return nil, err
	}
	tc := &target.Config
	switch {
	case a.NLayer <= 0 || a.NLayer > 64 || a.NEmbd <= 0 || a.NHead <= 0:
		return nil, fmt.Errorf("model: assistant: %d layers of width %d, %d heads", a.NLayer, a.NEmbd, a.NHead)
	case a.NEmbdTarget != tc.NEmbd:
		return nil, fmt.Errorf("model: assistant for a target of width %d, the target has %d", a.NEmbdTarget, tc.NEmbd)
	case a.NEmbdTarget == a.NEmbd:
		return nil, fmt.Errorf("model: assistant: embedding_length_out must carry the target's width (both are %d)", a.NEmbd)
	case tc.SWA == nil:
		return nil, fmt.Errorf("model: assistant needs a Gemma 4 target, not %s", tc.Arch)
	case a.HeadDim%2 != 0 || a.HeadDimSWA%2 != 0 || a.RopeDim > a.HeadDim || a.RopeDimSWA > a.HeadDimSWA || a.RopeDim%2 != 0 || a.RopeDimSWA%2 != 0:
		return nil, fmt.Errorf("model: assistant: head sizes %d/%d, rope dims %d/%d", a.HeadDim, a.HeadDimSWA, a.RopeDim, a.RopeDimSWA)
	}
	if _, a.KVHeads, err = perLayerInts(f, p+"attention.head_count_kv", a.NLayer); err != nil {
		return nil, err
	}
	a.SWA = make([]bool, a.NLayer)
	v, _ := f.Value(p + "attention.sliding_window_pattern")
	pat, ok := v.([]bool)
	if !ok || len(pat) != a.NLayer {
		return nil, fmt.Errorf("model: assistant: sliding_window_pattern must list its %d layers", a.NLayer)
	}
	copy(a.SWA, pat)
	// Layer l reads the cache of the target's last layer of its kind
	// (local or global) that has a cache of its own, as llama.cpp's
	// shared memory gives it (and as Gemma 4's shared-KV layers read).
	a.KVLayer = make([]int, a.NLayer)
	for l := range a.KVLayer {
		a.KVLayer[l] = -1
		for j := tc.NLayer - 1; j >= 0; j-- {
			if tc.OwnKV(j) && tc.IsSWA(j) == a.SWA[l] {
				a.KVLayer[l] = j
				break
			}
		}
		hd := a.HeadDim
		if a.SWA[l] {
			hd = a.HeadDimSWA
		}
		j := a.KVLayer[l]
		if j < 0 {
			return nil, fmt.Errorf("model: assistant layer %d (local %v): the target has no layer of that kind", l, a.SWA[l])
		}
		if hd != tc.HeadDimOf(j) || hd != tc.HeadDimVOf(j) || a.KVHeads[l] != tc.KVHeadsOf(j) {
			return nil, fmt.Errorf("model: assistant layer %d (head %d, %d KV heads) does not match the target's layer %d (head %d, %d KV heads) whose cache it reads",
				l, hd, a.KVHeads[l], j, tc.HeadDimOf(j), tc.KVHeadsOf(j))
		}
		if a.KVHeads[l] <= 0 || a.NHead%a.KVHeads[l] != 0 {
			return nil, fmt.Errorf("model: assistant layer %d: %d heads over %d KV heads", l, a.NHead, a.KVHeads[l])
		}
	}
	if a.Window != tc.Window {
		return nil, fmt.Errorf("model: assistant window %d, the target's is %d", a.Window, tc.Window)
	}
	ld := loader{f}
	et, ok := f.Tensor("token_embd.weight")
	if !ok || len(et.Dims) != 2 || et.Dims[0] != int64(a.NEmbd) {
		return nil, fmt.Errorf("model: assistant: token_embd.weight missing or not %d wide", a.NEmbd)
	}
	a.NVocab = int(et.Dims[1])
	if a.NVocab != tc.NVocab {
		return nil, fmt.Errorf("model: assistant vocabulary of %d tokens, the target has %d", a.NVocab, tc.NVocab)
	}
	if a.Embd, err = ld.matrix("token_embd.weight", a.NVocab, a.NEmbd); err != nil {
		return nil, err
	}
	if a.OutNorm, err = ld.vector("output_norm.weight", a.NEmbd); err != nil {
		return nil, err
	}
	if a.PreProj, err = ld.matrix("nextn.pre_projection.weight", a.NEmbd, 2*a.NEmbdTarget); err != nil {
		return nil, err
	}
	if a.PostProj, err = ld.matrix("nextn.post_projection.weight", a.NEmbdTarget, a.NEmbd); err != nil {
		return nil, err
	}
	if _, ok := f.Tensor("rope_freqs.weight"); ok {
		if a.Freqs, err = ld.vector("rope_freqs.weight", a.RopeDim/2); err != nil {
			return nil, err
		}
	}
	nff, err := get("feed_forward_length", 0, true)
	if err != nil {
		return nil, err
	}
	a.Layers = make([]AssistLayer, a.NLayer)
	for l := range a.Layers {
		L, b := &a.Layers[l], fmt.Sprintf("blk.%d.", l)
		hd := a.HeadDim
		if a.SWA[l] {
			hd = a.HeadDimSWA
		}
		L.NFF = nff
		if L.AttnNorm, err = ld.vector(b+"attn_norm.weight", a.NEmbd); err != nil {
			return nil, err
		}
		if L.QNorm, err = ld.vector(b+"attn_q_norm.weight", hd); err != nil {
			return nil, err
		}
		if L.PostAttnNorm, err = ld.vector(b+"post_attention_norm.weight", a.NEmbd); err != nil {
			return nil, err
		}
		if L.FFNNorm, err = ld.vector(b+"ffn_norm.weight", a.NEmbd); err != nil {
			return nil, err
		}
		if L.PostFFNNorm, err = ld.vector(b+"post_ffw_norm.weight", a.NEmbd); err != nil {
			return nil, err
		}
		if L.Wq, err = ld.matrix(b+"attn_q.weight", a.NHead*hd, a.NEmbd); err != nil {
			return nil, err
		}
		if L.Wo, err = ld.matrix(b+"attn_output.weight", a.NEmbd, a.NHead*hd); err != nil {
			return nil, err
		}
		if L.Wgate, err = ld.matrix(b+"ffn_gate.weight", nff, a.NEmbd); err != nil {
			return nil, err
		}
		if L.Wup, err = ld.matrix(b+"ffn_up.weight", nff, a.NEmbd); err != nil {
			return nil, err
		}
		if L.Wdown, err = ld.matrix(b+"ffn_down.weight", a.NEmbd, nff); err != nil {
			return nil, err
		}
		sc, err := ld.vector(b+"layer_output_scale.weight", 1)
		if err != nil {
			return nil, err
		}
		L.OutScale = sc[0]
	}
	if ct, ok := f.Tensor("masked_embd_centroids.weight"); ok {
		if len(ct.Dims) != 2 || ct.Dims[0] != int64(a.NEmbd) || ct.Dims[1] <= 0 || int64(a.NVocab)%ct.Dims[1] != 0 {
			return nil, fmt.Errorf("model: assistant: masked_embd_centroids has shape %v", ct.Dims)
		}
		nc := int(ct.Dims[1])
		if a.Centroids, err = ld.matrix("masked_embd_centroids.weight", nc, a.NEmbd); err != nil {
			return nil, err
		}
		ot, ok := f.Tensor("masked_embd_ordering")
		if !ok || ot.Type != quant.I32 || len(ot.Dims) != 1 || ot.Dims[0] != int64(a.NVocab) || len(ot.Data) != 4*a.NVocab {
			return nil, fmt.Errorf("model: assistant: masked_embd_centroids without an I32 masked_embd_ordering of %d entries", a.NVocab)
		}
		a.Ordering = make([]int32, a.NVocab)
		seen := make([]bool, a.NVocab)
		for i := range a.Ordering {
			b := ot.Data[4*i:]
			v := int32(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
			if v < 0 || int(v) >= a.NVocab || seen[v] {
				return nil, fmt.Errorf("model: assistant: masked_embd_ordering is not a permutation of the vocabulary (entry %d: %d)", i, v)
			}
			seen[v] = true
			a.Ordering[i] = v
		}
		a.SparseTop = max(1, min(32, nc/8))
	}
	return a, nil
}

// Cluster makes Clustered, the LM head's rows in cluster order, for a
// sparse head that reads each cluster's rows as one run (without it the
// sparse head reads its tokens' rows one by one). It costs a copy of the
// head in anonymous memory (the file's rows are then never read).
func (a *Assistant) Cluster() error {
	if a.Centroids == nil || a.Clustered != nil {
		return nil
	}
	rs := a.Embd.RowBytes()
	data := make([]byte, len(a.Embd.Data))
	for i, t := range a.Ordering {
		copy(data[i*rs:(i+1)*rs], a.Embd.Data[int(t)*rs:(int(t)+1)*rs])
	}
	m, err := quant.NewMatrix(a.Embd.Type, a.NVocab, a.NEmbd, data)
	if err != nil {
		return err
	}
	a.Clustered = m
	return nil
}

// Bytes is the weight bytes of a dense draft step (sparse: the head's
// share shrinks to its clusters).
func (a *Assistant) Bytes(sparse bool) int64 {
	n := int64(len(a.PreProj.Data) + len(a.PostProj.Data))
	for i := range a.Layers {
		L := &a.Layers[i]
		n += int64(len(L.Wq.Data) + len(L.Wo.Data) + len(L.Wgate.Data) + len(L.Wup.Data) + len(L.Wdown.Data))
	}
	if sparse && a.Centroids != nil {
		nc := a.Centroids.Rows
		return n + int64(len(a.Centroids.Data)) + int64(len(a.Embd.Data))*int64(a.SparseTop)/int64(nc)
	}
	return n + int64(len(a.Embd.Data))
}

// AssistState holds the buffers of assistant steps, sized once.
type AssistState struct {
	a                   *Assistant
	Sparse              bool // use the centroid head (when the file has one)
	Top                 int  // clusters the sparse head scores (default SparseTop)
	xh, cur, xn, q, att []float32
	o, gate, up         []float32
	cs, csSWA           []float32
	sc, kv, tmp         []float32
	logits, csc, sl     []float32
	acts                []byte
	row                 []byte
	clusters            []int
	cand                []int32 // the last sparse step's tokens (nil: dense)
	hNext               []float32
	// clean: every logit but those of cand is −∞ (a sparse step then
	// resets cand's, not the whole row)
	clean bool
}

// NewState sizes the buffers of steps over a target cache of up to ctx
// positions.
func (a *Assistant) NewState(ctx int) *AssistState {
	hd := max(a.HeadDim, a.HeadDimSWA)
	nff := 0
	for i := range a.Layers {
		nff = max(nff, a.Layers[i].NFF)
	}
	widest := 0
	ms := []*quant.Matrix{a.Embd, a.PreProj, a.PostProj}
	if a.Centroids != nil {
		ms = append(ms, a.Centroids)
	}
	for i := range a.Layers {
		L := &a.Layers[i]
		ms = append(ms, L.Wq, L.Wo, L.Wgate, L.Wup, L.Wdown)
	}
	for _, m := range ms {
		widest = max(widest, m.ActBytes(1))
	}
	st := &AssistState{a: a, Sparse: a.Centroids != nil,
		xh: make([]float32, 2*a.NEmbdTarget), cur: make([]float32, a.NEmbd), xn: make([]float32, a.NEmbd),
		q: make([]float32, a.NHead*hd), att: make([]float32, a.NHead*hd), o: make([]float32, a.NEmbd),
		gate: make([]float32, nff), up: make([]float32, nff),
		cs: make([]float32, a.RopeDim), csSWA: make([]float32, a.RopeDimSWA),
		sc: make([]float32, ctx), kv: make([]float32, hd), tmp: make([]float32, hd),
		logits: make([]float32, a.NVocab), acts: make([]byte, widest),
		row: make([]byte, a.target.TokEmbd.RowBytes()), hNext: make([]float32, a.NEmbdTarget)}
	if a.Centroids != nil {
		st.csc = make([]float32, a.Centroids.Rows)
		st.sl = make([]float32, a.NVocab)
		st.clusters = make([]int, 0, a.Centroids.Rows)
		st.cand = make([]int32, 0, a.NVocab)
		st.Top = a.SparseTop
	}
	return st
}

// Candidates are the tokens whose logits the last Step computed when it
// ran the sparse head (every other logit is −∞), nil after a dense step.
func (st *AssistState) Candidates() []int32 {
	if !st.Sparse || st.a.Centroids == nil {
		return nil
	}
	return st.cand
}

// HNext is the h the last Step computed for the next step.
func (st *AssistState) HNext() []float32 { return st.hNext }

// Step runs one draft step for token tok at position pos with hidden h
// (the target's width) over target's cache (which must hold positions up
// to pos-1) and returns the logits over the vocabulary (the state's own
// buffer; −∞ outside the sparse head's clusters).
func (st *AssistState) Step(target *State, tok int32, h []float32, pos int) ([]float32, error) {
	a := st.a
	tm := target.m
	if tok < 0 || int(tok) >= a.NVocab {
		return nil, fmt.Errorf("model: assistant: token %d out of range", tok)
	}
	if pos > target.Len() || pos < 1 {
		return nil, fmt.Errorf("model: assistant step at position %d over a cache of %d", pos, target.Len())
	}
	if lo := max(0, pos-a.Window+1); lo < target.kvLo && target.hasRing() {
		return nil, errNoKV
	}
	Et := a.NEmbdTarget
	x := st.xh[:Et]
	quant.DequantizeRow(tm.TokEmbd.Type, tm.TokEmbd.Row(int(tok), st.row), x)
	scale(x, float32(math.Sqrt(float64(Et))))
	copy(st.xh[Et:], h[:Et])
	dense(a.PreProj, st.cur, st.xh, st.acts)
	ropeTableFor(st.cs, pos, a.RopeBase, a.Freqs)
	ropeTableFor(st.csSWA, pos, a.RopeBaseSWA, nil)
	for l := range a.Layers {
		L := &a.Layers[l]
		hd, cs := a.HeadDim, st.cs
		from := 0
		if a.SWA[l] {
			hd, cs = a.HeadDimSWA, st.csSWA
			from = max(0, pos-a.Window+1)
		}
		RMSNorm(st.xn, st.cur, L.AttnNorm, a.Eps)
		q := st.q[:a.NHead*hd]
		dense(L.Wq, q, st.xn, st.acts)
		group := a.NHead / a.KVHeads[l]
		to := target.Len()
		for hh := 0; hh < a.NHead; hh++ {
			qh := q[hh*hd : (hh+1)*hd]
			RMSNorm(qh, qh, L.QNorm, a.Eps)
			ropeApply(qh, cs, true)
			target.attendCache(a.KVLayer[l], hh/group, qh, from, to, 1, st.sc, st.tmp, st.att[hh*hd:(hh+1)*hd])
		}
		dense(L.Wo, st.o, st.att[:a.NHead*hd], st.acts)
		RMSNorm(st.o, st.o, L.PostAttnNorm, a.Eps)
		addTo(st.cur, st.o)
		RMSNorm(st.xn, st.cur, L.FFNNorm, a.Eps)
		g, u := st.gate[:L.NFF], st.up[:L.NFF]
		dense(L.Wgate, g, st.xn, st.acts)
		dense(L.Wup, u, st.xn, st.acts)
		GELUMul(g, u)
		dense(L.Wdown, st.o, g, st.acts)
		RMSNorm(st.o, st.o, L.PostFFNNorm, a.Eps)
		addTo(st.cur, st.o)
		scale(st.cur, L.OutScale)
	}
	RMSNorm(st.xn, st.cur, a.OutNorm, a.Eps)
	dense(a.PostProj, st.hNext, st.xn, st.acts)
	if !st.Sparse || a.Centroids == nil {
		dense(a.Embd, st.logits, st.xn, st.acts)
		st.clean = false
		return st.logits, nil
	}
	st.sparseHead()
	return st.logits, nil
}

// sparseHead computes the logits of the tokens of the Top clusters
// whose centroids score highest (ties: the lower cluster), −∞ elsewhere.
func (st *AssistState) sparseHead() {
	a := st.a
	a.Centroids.QuantizeActsRows(st.acts, st.xn, 1, 0, 1)
	a.Centroids.MulRows(st.csc, a.Centroids.Rows, st.acts, 1, 0, a.Centroids.Rows)
	top := min(max(st.Top, 1), a.Centroids.Rows)
	cl := st.clusters[:0]
	for c, v := range st.csc {
		if len(cl) < top {
			cl = append(cl, c)
		} else if v <= st.csc[cl[len(cl)-1]] {
			continue
		} else {
			cl[len(cl)-1] = c
		}
		for j := len(cl) - 1; j > 0 && st.csc[cl[j]] > st.csc[cl[j-1]]; j-- {
			cl[j], cl[j-1] = cl[j-1], cl[j]
		}
	}
	st.clusters = cl
	inf := float32(math.Inf(-1))
	if st.clean {
		for _, t := range st.cand {
			st.logits[t] = inf
		}
	} else {
		for i := range st.logits {
			st.logits[i] = inf
		}
		st.clean = true
	}
	per := a.NVocab / a.Centroids.Rows
	st.cand = st.cand[:0]
	for _, c := range cl {
		st.cand = append(st.cand, a.Ordering[c*per:(c+1)*per]...)
	}
	m := a.Clustered
	if m == nil {
		a.Embd.QuantizeActsRows(st.acts, st.xn, 1, 0, 1)
		for _, c := range cl {
			for _, t := range a.Ordering[c*per : (c+1)*per] {
				a.Embd.MulRows(st.logits, a.NVocab, st.acts, 1, int(t), int(t)+1)
			}
		}
		return
	}
	m.QuantizeActsRows(st.acts, st.xn, 1, 0, 1)
	for _, c := range cl {
		m.MulRows(st.sl, a.NVocab, st.acts, 1, c*per, (c+1)*per)
		for r := c * per; r < (c+1)*per; r++ {
			st.logits[a.Ordering[r]] = st.sl[r]
		}
	}
}
