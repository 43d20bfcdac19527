package model

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/neon"
	"github.com/geisten/geist/quant"
)

// Embedding models: one pass over a whole text (a prefill without a KV
// cache to keep), then a pooling step that turns the per-token states
// into one vector. Four families, as llama.cpp runs them:
//
//   - bert (all-MiniLM, bge-small): learned absolute positions, token
//     type 0, LayerNorm on the input and after each branch (post-LN),
//     biases everywhere, GELU feed-forward, bidirectional attention;
//   - nomic-bert (nomic-embed-text): bert's layout with a fused QKV
//     projection, rope instead of positions, no biases, SwiGLU;
//   - qwen3 with a pooling_type (Qwen3-Embedding): the causal qwen3
//     decoder (pre-RMSNorm, Q/K norms, rope, SwiGLU), last-token pooling;
//   - gemma-embedding (EmbeddingGemma): the gemma3 decoder run
//     bidirectionally, local layers with a symmetric window, mean pooling,
//     then the sentence-transformers dense projections.
//
// Every matrix product goes through quant.Matrix.MulRows, whose result
// for a row does not depend on the other rows: a text's vector is bit for
// bit the same whether it is embedded alone or in a batch of others.

// Pooling is how an embedding model turns token states into one vector
// (llama.cpp's pooling_type values).
type Pooling int

const (
	PoolNone Pooling = 0
	PoolMean Pooling = 1
	PoolCLS  Pooling = 2
	PoolLast Pooling = 3
)

func (p Pooling) String() string {
	switch p {
	case PoolMean:
		return "mean"
	case PoolCLS:
		return "cls"
	case PoolLast:
		return "last"
	}
	return fmt.Sprintf("pooling %d", int(p))
}

// EncoderConfig is the shape of an embedding model.
type EncoderConfig struct {
	Arch     string
	NLayer   int
	NEmbd    int
	NHead    int
	NHeadKV  int
	HeadDim  int
	NFF      int
	NVocab   int
	CtxTrain int
	NormEps  float32
	Pooling  Pooling
	Causal   bool // each token sees only itself and earlier ones (qwen3)
	// BERT layout: LayerNorm with bias, the norms after each branch's
	// residual add (post-LN), an input LayerNorm.
	PostLN bool
	// Rope: RopeDim dims of each head turn (0: none, learned positions
	// instead), split halves (neox).
	RopeDim     int
	RopeBase    float32
	RopeBaseSWA float32
	// SWA marks the local layers (gemma-embedding): a token sees the
	// tokens at most Window positions away on either side.
	SWA    []bool
	Window int
	// FFN: Gated (gate and up) with GELU or SiLU; ungated GELU (bert).
	Gated bool
	GELU  bool
	// EmbdScale multiplies the token embeddings (gemma: sqrt(NEmbd)).
	EmbdScale float32
	// Dim is the width of the output vector (after dense projections).
	Dim int
}

type encLayer struct {
	Wq, Wk, Wv, Wqkv, Wo *quant.Matrix
	Bq, Bk, Bv, Bo       []float32
	QNorm, KNorm         []float32
	AttnNorm             []float32 // pre-norm (decoders)
	PostAttnNorm         []float32 // gemma: norm of the attention branch
	FFNNorm              []float32 // pre-norm (decoders)
	PostFFNNorm          []float32 // gemma: norm of the FFN branch
	// BERT's post-LN norms (weight, bias).
	AttnOutNorm, AttnOutNormB []float32
	OutNorm, OutNormB         []float32
	Wgate, Wup, Wdown         *quant.Matrix
	Bup, Bdown                []float32
}

// Encoder is a loaded embedding model. Its matrices alias the mapped
// GGUF file, which must stay open while it is used. It is safe for
// concurrent use (every call has its own buffers).
type Encoder struct {
	EncoderConfig
	TokEmbd          *quant.Matrix
	PosEmbd          []float32 // [CtxTrain][NEmbd] learned positions (bert)
	TypeEmbd         []float32 // [NEmbd] token type 0
	EmbNorm, EmbNrmB []float32 // input LayerNorm (bert)
	OutNorm          []float32 // final RMSNorm (decoders)
	Dense            []*quant.Matrix
	Layers           []encLayer
	// Threads bounds the goroutines of one matrix product (0: GOMAXPROCS).
	Threads int
}

// encoderArchs are the architectures that only embed.
var encoderArchs = map[string]bool{"bert": true, "nomic-bert": true, "gemma-embedding": true}

// IsEmbedding reports whether f is an embedding model: an encoder
// architecture, or a decoder whose file declares a pooling type
// (Qwen3-Embedding's qwen3 with pooling_type LAST).
func IsEmbedding(f *gguf.File) bool {
	arch := f.Arch()
	if encoderArchs[arch] {
		return true
	}
	if arch != "qwen3" {
		return false
	}
	n, ok := f.Int(arch + ".pooling_type")
	return ok && n > 0
}

// EncoderArchs lists the architectures LoadEncoder runs.
func EncoderArchs() []string {
	return []string{"bert", "nomic-bert", "qwen3 (with pooling_type)", "gemma-embedding"}
}

// LoadEncoder reads an embedding model's shape and weights from f.
func LoadEncoder(f *gguf.File) (*Encoder, error) {
	c, err := ReadEncoderConfig(f)
	if err != nil {
		return nil, err
	}
	return loadEncoder(f, c)
}

// ReadEncoderConfig reads and checks an embedding model's shape from f's
// metadata (a header is enough).
func ReadEncoderConfig(f *gguf.File) (EncoderConfig, error) {
	arch := f.Arch()
	if !IsEmbedding(f) {
		if arch == "" {
			return EncoderConfig{}, fmt.Errorf("model: missing metadata %q", "general.architecture")
		}
		return EncoderConfig{}, fmt.Errorf("model: %q is not an embedding model (geist embeds with %v)", arch, EncoderArchs())
	}
	c := EncoderConfig{Arch: arch}
	p := arch + "."
	var err error
	if c.NLayer, err = metaPositive(f, p+"block_count", 0, true); err != nil {
		return c, err
	}
	if c.NEmbd, err = metaPositive(f, p+"embedding_length", 0, true); err != nil {
		return c, err
	}
	if c.NFF, err = metaPositive(f, p+"feed_forward_length", 0, true); err != nil {
		return c, err
	}
	if c.NHead, err = metaPositive(f, p+"attention.head_count", 0, true); err != nil {
		return c, err
	}
	if c.NHeadKV, err = metaPositive(f, p+"attention.head_count_kv", c.NHead, false); err != nil {
		return c, err
	}
	if c.CtxTrain, err = metaPositive(f, p+"context_length", 512, false); err != nil {
		return c, err
	}
	if c.NLayer > 512 || c.NEmbd > 1<<16 || c.NFF > 1<<20 || c.NHead > 1024 || c.CtxTrain > 1<<20 {
		return c, fmt.Errorf("model: %s: shape out of range (%d layers, width %d, FFN %d, %d heads, context %d)", arch, c.NLayer, c.NEmbd, c.NFF, c.NHead, c.CtxTrain)
	}
	if c.NHead%c.NHeadKV != 0 {
		return c, fmt.Errorf("model: %d query heads are not a multiple of %d key/value heads", c.NHead, c.NHeadKV)
	}
	def := 0
	if c.NEmbd%c.NHead == 0 {
		def = c.NEmbd / c.NHead
	}
	if c.HeadDim, err = metaPositive(f, p+"attention.key_length", def, def == 0); err != nil {
		return c, err
	}
	if hv, err := metaInt(f, p+"attention.value_length", c.HeadDim, false); err != nil {
		return c, err
	} else if hv != c.HeadDim || c.HeadDim%2 != 0 || c.HeadDim > 1024 {
		return c, fmt.Errorf("model: head sizes %d/%d: geist embeds with equal, even key and value head sizes", c.HeadDim, hv)
	}
	pool, err := metaInt(f, p+"pooling_type", 0, false)
	if err != nil {
		return c, err
	}
	c.Pooling = Pooling(pool)
	switch arch {
	case "bert", "nomic-bert":
		c.PostLN = true
		if c.NormEps, err = metaFloat(f, p+"attention.layer_norm_epsilon", 1e-12); err != nil {
			return c, err
		}
		if c.Pooling == PoolNone {
			c.Pooling = PoolMean
		}
		if arch == "nomic-bert" {
			c.RopeDim = c.HeadDim
			c.Gated = true
		} else {
			c.GELU = true
		}
	case "qwen3":
		c.Causal, c.Gated, c.RopeDim = true, true, c.HeadDim
		if c.NormEps, err = metaFloat(f, p+"attention.layer_norm_rms_epsilon", 1e-6); err != nil {
			return c, err
		}
	case "gemma-embedding":
		c.Gated, c.GELU, c.RopeDim = true, true, c.HeadDim
		c.EmbdScale = float32(math.Sqrt(float64(c.NEmbd)))
		if c.NormEps, err = metaFloat(f, p+"attention.layer_norm_rms_epsilon", 1e-6); err != nil {
			return c, err
		}
		if c.Pooling == PoolNone {
			c.Pooling = PoolMean
		}
		win, err := metaPositive(f, p+"attention.sliding_window", 512, false)
		if err != nil {
			return c, err
		}
		c.Window = win / 2 // llama.cpp's symmetric window: |i-j| <= n_swa/2
		if c.RopeBaseSWA, err = metaFloat(f, p+"rope.freq_base_swa", 10000); err != nil {
			return c, err
		}
		if c.SWA, err = swaPattern(f, p+"attention.sliding_window_pattern", c.NLayer, 6); err != nil {
			return c, err
		}
	}
	if c.Pooling != PoolMean && c.Pooling != PoolCLS && c.Pooling != PoolLast {
		return c, fmt.Errorf("model: %s: pooling_type %d is not supported (geist pools mean, cls or last)", arch, pool)
	}
	if c.RopeDim > 0 {
		if c.RopeDim, err = metaInt(f, p+"rope.dimension_count", c.RopeDim, false); err != nil {
			return c, err
		}
		if c.RopeDim <= 0 || c.RopeDim > c.HeadDim || c.RopeDim%2 != 0 {
			return c, fmt.Errorf("model: rope dimension %d must be even and at most the head size %d", c.RopeDim, c.HeadDim)
		}
		base := float32(10000)
		if arch == "qwen3" || arch == "gemma-embedding" {
			base = 1e6
		}
		if c.RopeBase, err = metaFloat(f, p+"rope.freq_base", base); err != nil {
			return c, err
		}
	}
	if c.NormEps <= 0 {
		return c, fmt.Errorf("model: %s: norm epsilon %g must be positive", arch, c.NormEps)
	}

	return c, nil
}

// loadEncoder resolves the weights of an embedding model of shape c.
func loadEncoder(f *gguf.File, c EncoderConfig) (*Encoder, error) {
	arch := c.Arch
	var err error
	l := loader{f}
	e := &Encoder{EncoderConfig: c}
	te, ok := f.Tensor("token_embd.weight")
	if !ok || len(te.Dims) != 2 || te.Dims[1] <= 0 || te.Dims[1] > math.MaxInt32 {
		return nil, fmt.Errorf("model: missing or malformed tensor %q", "token_embd.weight")
	}
	c.NVocab = int(te.Dims[1])
	if e.TokEmbd, err = l.matrix("token_embd.weight", c.NVocab, c.NEmbd); err != nil {
		return nil, err
	}
	E := c.NEmbd
	hd := c.HeadDim
	qw, kvw := c.NHead*hd, c.NHeadKV*hd
	if c.PostLN {
		if arch == "bert" {
			if e.PosEmbd, err = l.vector2("position_embd.weight", E, c.CtxTrain); err != nil {
				return nil, err
			}
		}
		if _, ok := f.Tensor("token_types.weight"); ok {
			t, _ := f.Tensor("token_types.weight")
			if len(t.Dims) != 2 || t.Dims[0] != int64(E) || t.Dims[1] < 1 || t.Dims[1] > 16 {
				return nil, fmt.Errorf("model: tensor %q has shape %v, want [%d types]", "token_types.weight", t.Dims, E)
			}
			all, err := l.vector2("token_types.weight", E, int(t.Dims[1]))
			if err != nil {
				return nil, err
			}
			e.TypeEmbd = all[:E]
		}
		if e.EmbNorm, err = l.vector("token_embd_norm.weight", E); err != nil {
			return nil, err
		}
		if e.EmbNrmB, err = l.vector("token_embd_norm.bias", E); err != nil {
			return nil, err
		}
	} else {
		if e.OutNorm, err = l.vector("output_norm.weight", E); err != nil {
			return nil, err
		}
	}
	opt := func(name string, n int) ([]float32, error) {
		if _, ok := f.Tensor(name); !ok {
			return nil, nil
		}
		return l.vector(name, n)
	}
	e.Layers = make([]encLayer, c.NLayer)
	for i := range e.Layers {
		L := &e.Layers[i]
		b := fmt.Sprintf("blk.%d.", i)
		if _, fused := f.Tensor(b + "attn_qkv.weight"); fused {
			if L.Wqkv, err = l.matrix(b+"attn_qkv.weight", qw+2*kvw, E); err != nil {
				return nil, err
			}
		} else {
			if L.Wq, err = l.matrix(b+"attn_q.weight", qw, E); err != nil {
				return nil, err
			}
			if L.Wk, err = l.matrix(b+"attn_k.weight", kvw, E); err != nil {
				return nil, err
			}
			if L.Wv, err = l.matrix(b+"attn_v.weight", kvw, E); err != nil {
				return nil, err
			}
			for _, v := range []struct {
				dst  *[]float32
				name string
				n    int
			}{{&L.Bq, "attn_q.bias", qw}, {&L.Bk, "attn_k.bias", kvw}, {&L.Bv, "attn_v.bias", kvw}} {
				if *v.dst, err = opt(b+v.name, v.n); err != nil {
					return nil, err
				}
			}
		}
		if L.Wo, err = l.matrix(b+"attn_output.weight", E, qw); err != nil {
			return nil, err
		}
		if L.Bo, err = opt(b+"attn_output.bias", E); err != nil {
			return nil, err
		}
		if c.Gated {
			if L.Wgate, err = l.matrix(b+"ffn_gate.weight", c.NFF, E); err != nil {
				return nil, err
			}
		}
		if L.Wup, err = l.matrix(b+"ffn_up.weight", c.NFF, E); err != nil {
			return nil, err
		}
		if L.Wdown, err = l.matrix(b+"ffn_down.weight", E, c.NFF); err != nil {
			return nil, err
		}
		if L.Bup, err = opt(b+"ffn_up.bias", c.NFF); err != nil {
			return nil, err
		}
		if L.Bdown, err = opt(b+"ffn_down.bias", E); err != nil {
			return nil, err
		}
		if c.PostLN {
			for _, v := range []struct {
				dst  *[]float32
				name string
			}{{&L.AttnOutNorm, "attn_output_norm.weight"}, {&L.AttnOutNormB, "attn_output_norm.bias"},
				{&L.OutNorm, "layer_output_norm.weight"}, {&L.OutNormB, "layer_output_norm.bias"}} {
				if *v.dst, err = l.vector(b+v.name, E); err != nil {
					return nil, err
				}
			}
			continue
		}
		if L.AttnNorm, err = l.vector(b+"attn_norm.weight", E); err != nil {
			return nil, err
		}
		if L.FFNNorm, err = l.vector(b+"ffn_norm.weight", E); err != nil {
			return nil, err
		}
		if L.QNorm, err = l.vector(b+"attn_q_norm.weight", hd); err != nil {
			return nil, err
		}
		if L.KNorm, err = l.vector(b+"attn_k_norm.weight", hd); err != nil {
			return nil, err
		}
		if arch == "gemma-embedding" {
			if L.PostAttnNorm, err = l.vector(b+"post_attention_norm.weight", E); err != nil {
				return nil, err
			}
			if L.PostFFNNorm, err = l.vector(b+"post_ffw_norm.weight", E); err != nil {
				return nil, err
			}
		}
	}
	c.Dim = E
	if arch == "gemma-embedding" {
		in := E
		for _, k := range []int{2, 3} {
			name := fmt.Sprintf("dense_%d.weight", k)
			t, ok := f.Tensor(name)
			if !ok {
				continue
			}
			if len(t.Dims) != 2 || t.Dims[0] != int64(in) || t.Dims[1] <= 0 || t.Dims[1] > 1<<16 {
				return nil, fmt.Errorf("model: tensor %q has shape %v, want [%d, out]", name, t.Dims, in)
			}
			m, err := l.matrix(name, int(t.Dims[1]), in)
			if err != nil {
				return nil, err
			}
			e.Dense = append(e.Dense, m)
			in = m.Rows
		}
		c.Dim = in
	}
	e.EncoderConfig = c
	return e, nil
}

// swaPattern reads which layers are local: a period n (layer i is global
// iff i%n == n-1), an array of per-layer booleans, or, when the key is
// absent, the default period.
func swaPattern(f *gguf.File, key string, n, def int) ([]bool, error) {
	swa := make([]bool, n)
	period := def
	if v, ok := f.Value(key); ok {
		if arr, ok := v.([]bool); ok {
			if len(arr) != n {
				return nil, fmt.Errorf("model: %s has %d entries for %d layers", key, len(arr), n)
			}
			copy(swa, arr)
			return swa, nil
		}
		x, ok := gguf.AsInt(v)
		if !ok || x < 0 || x > 1<<16 {
			return nil, fmt.Errorf("model: %s = %v: want a period or a boolean per layer", key, v)
		}
		period = int(x)
	}
	for i := range swa {
		swa[i] = period > 0 && i%period < period-1
	}
	return swa, nil
}

// Embed computes the pooled vector of each token sequence into out[i]
// (Dim values, L2-normalized). The sequences are run together: each
// matrix product covers all their tokens, attention stays within a
// sequence. Every sequence must be non-empty and at most CtxTrain long
// (the caller truncates). ctx is checked between layers.
func (e *Encoder) Embed(ctx context.Context, seqs [][]int32, out [][]float32) error {
	if len(out) != len(seqs) {
		return fmt.Errorf("model: %d outputs for %d sequences", len(out), len(seqs))
	}
	N := 0
	for i, s := range seqs {
		if len(s) == 0 {
			return fmt.Errorf("model: sequence %d is empty", i)
		}
		if len(s) > e.CtxTrain {
			return fmt.Errorf("model: sequence %d has %d tokens, the model's context is %d", i, len(s), e.CtxTrain)
		}
		for _, t := range s {
			if t < 0 || int(t) >= e.NVocab {
				return fmt.Errorf("model: token %d is outside the vocabulary (%d tokens)", t, e.NVocab)
			}
		}
		if len(out[i]) != e.Dim {
			return fmt.Errorf("model: output %d has %d values, want %d", i, len(out[i]), e.Dim)
		}
		N += len(s)
	}
	if N == 0 {
		return nil
	}
	c := &e.EncoderConfig
	E, hd := c.NEmbd, c.HeadDim
	qw, kvw := c.NHead*hd, c.NHeadKV*hd
	w := newEncWork(e, N)

	// Input embeddings.
	x := w.x
	row := make([]byte, e.TokEmbd.RowBytes())
	r := 0
	for _, s := range seqs {
		for p, t := range s {
			xr := x[r*E : (r+1)*E]
			quant.DequantizeRow(e.TokEmbd.Type, e.TokEmbd.Row(int(t), row), xr)
			if c.EmbdScale != 0 {
				scale(xr, c.EmbdScale)
			}
			if e.PosEmbd != nil {
				addTo(xr, e.PosEmbd[p*E:(p+1)*E])
			}
			if e.TypeEmbd != nil {
				addTo(xr, e.TypeEmbd)
			}
			if e.EmbNorm != nil {
				layerNorm(xr, xr, e.EmbNorm, e.EmbNrmB, c.NormEps)
			}
			r++
		}
	}

	for li := range e.Layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		L := &e.Layers[li]
		// Attention branch.
		in := x
		if !c.PostLN {
			for r := 0; r < N; r++ {
				RMSNorm(w.h[r*E:(r+1)*E], x[r*E:(r+1)*E], L.AttnNorm, c.NormEps)
			}
			in = w.h
		}
		q, k, v := w.q, w.k, w.v
		if L.Wqkv != nil {
			e.mul(w, L.Wqkv, w.qkv, in, N)
			for r := 0; r < N; r++ {
				src := w.qkv[r*(qw+2*kvw):]
				copy(q[r*qw:(r+1)*qw], src[:qw])
				copy(k[r*kvw:(r+1)*kvw], src[qw:qw+kvw])
				copy(v[r*kvw:(r+1)*kvw], src[qw+kvw:qw+2*kvw])
			}
		} else {
			e.mul(w, L.Wq, q, in, N)
			e.mul(w, L.Wk, k, in, N)
			e.mul(w, L.Wv, v, in, N)
		}
		addBias(q, L.Bq, N)
		addBias(k, L.Bk, N)
		addBias(v, L.Bv, N)
		local := c.SWA != nil && c.SWA[li]
		e.attention(w, seqs, q, k, v, L, local)
		e.mul(w, L.Wo, w.a, w.att, N)
		addBias(w.a, L.Bo, N)
		for r := 0; r < N; r++ {
			xr, ar := x[r*E:(r+1)*E], w.a[r*E:(r+1)*E]
			switch {
			case c.PostLN:
				addTo(ar, xr)
				layerNorm(xr, ar, L.AttnOutNorm, L.AttnOutNormB, c.NormEps)
			case L.PostAttnNorm != nil:
				RMSNorm(ar, ar, L.PostAttnNorm, c.NormEps)
				addTo(xr, ar)
			default:
				addTo(xr, ar)
			}
		}

		// Feed-forward branch.
		in = x
		if !c.PostLN {
			for r := 0; r < N; r++ {
				RMSNorm(w.h[r*E:(r+1)*E], x[r*E:(r+1)*E], L.FFNNorm, c.NormEps)
			}
			in = w.h
		}
		e.mul(w, L.Wup, w.up, in, N)
		addBias(w.up, L.Bup, N)
		act := w.up
		if c.Gated {
			e.mul(w, L.Wgate, w.gate, in, N)
			if c.GELU {
				GELUMul(w.gate, w.up)
			} else {
				SiLUMul(w.gate, w.up)
			}
			act = w.gate
		} else {
			GELU(w.up)
		}
		e.mul(w, L.Wdown, w.a, act, N)
		addBias(w.a, L.Bdown, N)
		for r := 0; r < N; r++ {
			xr, ar := x[r*E:(r+1)*E], w.a[r*E:(r+1)*E]
			switch {
			case c.PostLN:
				addTo(ar, xr)
				layerNorm(xr, ar, L.OutNorm, L.OutNormB, c.NormEps)
			case L.PostFFNNorm != nil:
				RMSNorm(ar, ar, L.PostFFNNorm, c.NormEps)
				addTo(xr, ar)
			default:
				addTo(xr, ar)
			}
		}
	}

	// Pooling, output norm, dense projections, L2 normalization.
	pooled := make([]float32, E)
	r = 0
	for i, s := range seqs {
		n := len(s)
		rows := x[r*E : (r+n)*E]
		r += n
		switch c.Pooling {
		case PoolMean:
			clear(pooled)
			tmp := w.h[:E]
			for j := 0; j < n; j++ {
				src := rows[j*E : (j+1)*E]
				if e.OutNorm != nil {
					RMSNorm(tmp, src, e.OutNorm, c.NormEps)
					src = tmp
				}
				addTo(pooled, src)
			}
			scale(pooled, 1/float32(n))
		case PoolCLS, PoolLast:
			j := 0
			if c.Pooling == PoolLast {
				j = n - 1
			}
			src := rows[j*E : (j+1)*E]
			if e.OutNorm != nil {
				RMSNorm(pooled, src, e.OutNorm, c.NormEps)
			} else {
				copy(pooled, src)
			}
		}
		vec := pooled
		for _, d := range e.Dense {
			o := make([]float32, d.Rows)
			dense(d, o, vec, make([]byte, d.ActBytes(1)))
			vec = o
		}
		copy(out[i], vec)
		Normalize(out[i])
	}
	return nil
}

// Normalize scales v to unit Euclidean length (the sum of squares in
// float64, as llama.cpp's common_embd_normalize); a zero vector stays.
func Normalize(v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum <= 0 {
		return
	}
	inv := float32(1 / math.Sqrt(sum))
	for i := range v {
		v[i] *= inv
	}
}

// encWork holds one Embed call's buffers.
type encWork struct {
	x, h, q, k, v, qkv, att, a, up, gate []float32
	act                                  []byte
	sc, cs                               []float32
}

func newEncWork(e *Encoder, N int) *encWork {
	c := &e.EncoderConfig
	E, hd := c.NEmbd, c.HeadDim
	qw, kvw := c.NHead*hd, c.NHeadKV*hd
	w := &encWork{
		x: make([]float32, N*E), h: make([]float32, N*E), q: make([]float32, N*qw),
		k: make([]float32, N*kvw), v: make([]float32, N*kvw), att: make([]float32, N*qw),
		a: make([]float32, N*E), up: make([]float32, N*c.NFF),
	}
	if c.Gated {
		w.gate = make([]float32, N*c.NFF)
	}
	if e.Layers[0].Wqkv != nil {
		w.qkv = make([]float32, N*(qw+2*kvw))
	}
	return w
}

// mul computes out = m·x for n rows, the rows of m split over goroutines
// in whole row groups (MulRows' result does not depend on the split).
func (e *Encoder) mul(w *encWork, m *quant.Matrix, out, x []float32, n int) {
	need := m.ActBytes(n)
	if cap(w.act) < need {
		w.act = make([]byte, need)
	}
	act := w.act[:need]
	m.QuantizeActs(act, x, n)
	threads := e.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	// Small products run on the caller: a goroutine costs more than it saves.
	if threads == 1 || m.Rows*m.Cols*n < 1<<18 {
		m.MulRows(out, m.Rows, act, n, 0, m.Rows)
		return
	}
	g := neon.RowGroup
	per := (m.Rows/g + threads - 1) / threads * g
	if per == 0 {
		per = g
	}
	var wg sync.WaitGroup
	for r0 := 0; r0 < m.Rows; r0 += per {
		r1 := min(r0+per, m.Rows)
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.MulRows(out, m.Rows, act, n, r0, r1)
		}()
	}
	wg.Wait()
}

// attention computes every sequence's attention into w.att: per query
// head, Q/K norms and rope first (decoders and nomic), the scores of the
// visible keys scaled by 1/sqrt(head size), softmax, the weighted sum of
// the values.
func (e *Encoder) attention(w *encWork, seqs [][]int32, q, k, v []float32, L *encLayer, local bool) {
	c := &e.EncoderConfig
	hd := c.HeadDim
	qw, kvw := c.NHead*hd, c.NHeadKV*hd
	group := c.NHead / c.NHeadKV
	// Per-head norms and rope.
	r := 0
	if cap(w.cs) < c.RopeDim {
		w.cs = make([]float32, c.RopeDim)
	}
	cs := w.cs[:c.RopeDim]
	base := c.RopeBase
	if local {
		base = c.RopeBaseSWA
	}
	for _, s := range seqs {
		for p := range s {
			qr, kr := q[r*qw:(r+1)*qw], k[r*kvw:(r+1)*kvw]
			if L.QNorm != nil {
				for h := 0; h < c.NHead; h++ {
					RMSNorm(qr[h*hd:(h+1)*hd], qr[h*hd:(h+1)*hd], L.QNorm, c.NormEps)
				}
				for h := 0; h < c.NHeadKV; h++ {
					RMSNorm(kr[h*hd:(h+1)*hd], kr[h*hd:(h+1)*hd], L.KNorm, c.NormEps)
				}
			}
			if c.RopeDim > 0 {
				ropeTableFor(cs, p, base, nil)
				for h := 0; h < c.NHead; h++ {
					ropeApply(qr[h*hd:(h+1)*hd], cs, true)
				}
				for h := 0; h < c.NHeadKV; h++ {
					ropeApply(kr[h*hd:(h+1)*hd], cs, true)
				}
			}
			r++
		}
	}
	scl := float32(1 / math.Sqrt(float64(hd)))
	// Rows (query positions) of all sequences, split over goroutines when
	// there is enough work: each row's result is computed the same way
	// wherever it runs.
	type span struct{ r0, n, lo, hi int } // sequence at row r0 of length n, its rows [lo, hi)
	var spans []span
	total := 0
	for _, s := range seqs {
		total += len(s) * len(s)
	}
	threads := e.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	if total*hd*c.NHead < 1<<20 {
		threads = 1
	}
	r0 := 0
	for _, s := range seqs {
		n := len(s)
		step := max((n+threads-1)/threads, 1)
		for lo := 0; lo < n; lo += step {
			spans = append(spans, span{r0, n, lo, min(lo+step, n)})
		}
		r0 += n
	}
	run := func(sp span, sc []float32) {
		for i := sp.lo; i < sp.hi; i++ {
			from, to := 0, sp.n
			if c.Causal {
				to = i + 1
			}
			if local {
				from, to = max(from, i-c.Window), min(to, i+c.Window+1)
			}
			sc := sc[:to-from]
			for h := 0; h < c.NHead; h++ {
				kvh := h / group
				qh := q[(sp.r0+i)*qw+h*hd : (sp.r0+i)*qw+(h+1)*hd]
				for j := from; j < to; j++ {
					kj := k[(sp.r0+j)*kvw+kvh*hd : (sp.r0+j)*kvw+(kvh+1)*hd]
					var d float32
					for t, x := range qh {
						d += x * kj[t]
					}
					sc[j-from] = d * scl
				}
				Softmax(sc)
				o := w.att[(sp.r0+i)*qw+h*hd : (sp.r0+i)*qw+(h+1)*hd]
				clear(o)
				for j := from; j < to; j++ {
					neon.AttnSumF32(o, sc[j-from:j-from+1], v[(sp.r0+j)*kvw+kvh*hd:(sp.r0+j)*kvw+(kvh+1)*hd])
				}
			}
		}
	}
	longest := 0
	for _, s := range seqs {
		longest = max(longest, len(s))
	}
	if threads == 1 {
		if cap(w.sc) < longest {
			w.sc = make([]float32, longest)
		}
		for _, sp := range spans {
			run(sp, w.sc)
		}
		return
	}
	next := make(chan span, len(spans))
	for _, sp := range spans {
		next <- sp
	}
	close(next)
	var wg sync.WaitGroup
	for range min(threads, len(spans)) {
		wg.Go(func() {
			sc := make([]float32, longest)
			for sp := range next {
				run(sp, sc)
			}
		})
	}
	wg.Wait()
}

// addBias adds b to each of the n rows of x (nothing when b is nil).
func addBias(x, b []float32, n int) {
	if b == nil {
		return
	}
	E := len(b)
	for r := 0; r < n; r++ {
		addTo(x[r*E:(r+1)*E], b)
	}
}

// layerNorm writes (x - mean)/sqrt(var + eps)·w + b into out (ggml_norm:
// the mean and the variance summed in float64).
func layerNorm(out, x, w, b []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v)
	}
	mean := float32(sum / float64(len(x)))
	var sum2 float64
	for _, v := range x {
		d := v - mean
		sum2 += float64(d * d)
	}
	s := 1 / float32(math.Sqrt(float64(float32(sum2/float64(len(x)))+eps)))
	for i, v := range x {
		out[i] = (v-mean)*s*w[i] + b[i]
	}
}
