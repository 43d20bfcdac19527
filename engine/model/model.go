// Package model holds the transformer architectures geist runs (llama,
// qwen2, qwen3): their configuration from GGUF metadata, their weights as
// matrices over the memory-mapped file, a rewindable KV cache and a batched
// forward pass.
package model

import (
	"fmt"
	"math"
	"strings"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/quant"
)

// Config is the shape of a model, read from GGUF metadata.
type Config struct {
	Arch       string
	NLayer     int
	NEmbd      int // width of the residual stream
	NHead      int // query heads
	NHeadKV    int // key/value heads (grouped-query attention)
	HeadDim    int // key (and query) head size
	HeadDimV   int // value head size
	NFF        int // feed-forward width
	NVocab     int
	CtxTrain   int // context length the model was trained for
	RopeDim    int // dimensions rotated per head
	RopeBase   float32
	RopeScale  float32 // frequency scale: 1/linear scaling factor
	RopeNeox   bool    // split-halves pairs (qwen) instead of adjacent pairs (llama)
	NormEps    float32
	HasQKVBias bool
	HasQKNorm  bool
	TiedOutput bool
	// Conv marks the layers whose mixer is a short convolution (lfm2)
	// instead of attention; nil when there are none. ConvTaps is the
	// number of earlier positions such a convolution reads (its kernel
	// is ConvTaps+1 long).
	Conv     []bool
	ConvTaps int
	// Rec marks the layers whose mixer is a recurrence with a matrix
	// state (qwen35's gated DeltaNet) instead of attention; nil when
	// there are none (recurrent.go).
	Rec      []bool
	RecShape // the recurrent layers' shape
	DeltaNet // the gated DeltaNet layers' shape (qwen35)
	Gemma    // the Gemma 4 parts (zero for the other families)
	Variant  // the switches other families set (arch.go)
}

// Gemma holds what Gemma 4 adds to the shape: layers of two kinds (local
// with a sliding window, global) with their own head sizes, KV heads and
// rope, values normalized (and on global layers equal to the keys),
// sandwich norms, a GELU feed-forward, a scaled embedding, a per-layer
// output scale, soft-capped logits, and in E2B/E4B per-layer embeddings
// and layers that read an earlier layer's keys and values.
type Gemma struct {
	SWA          []bool  // layer l is local (sliding window); nil: none is
	Window       int     // positions a local layer sees: p-Window+1..p
	HeadDimSWA   int     // head size of local layers
	KVHeads      []int   // key/value heads per layer (nil: NHeadKV everywhere)
	RopeDimSWA   int     // rotated dimensions of local layers
	RopeBaseSWA  float32 // rope base of local layers
	AttnScale    float32 // scale of the attention scores (0: 1/sqrt(head size))
	EmbdScale    float32 // token embeddings × this (0: 1)
	Softcap      float32 // logits → Softcap·tanh(logits/Softcap) (0: none)
	PostNorms    bool    // post_attention_norm and post_ffw_norm on the branches
	GELU         bool    // GELU-gated feed-forward (SiLU otherwise)
	VNorm        bool    // values RMS-normalized (no weight)
	KVFrom       []int   // layer whose keys and values layer l uses (nil: its own)
	FFNs         []int   // feed-forward width per layer (nil: NFF everywhere, which is the widest)
	PerLayerEmbd int     // width of the per-layer embeddings (0: none)
}

// FFNOf is the feed-forward width of layer l.
func (c *Config) FFNOf(l int) int {
	if c.FFNs != nil {
		return c.FFNs[l]
	}
	return c.NFF
}

// HeadDimOf is the key (and value) head size of layer l.
func (c *Config) HeadDimOf(l int) int {
	if c.IsSWA(l) {
		return c.HeadDimSWA
	}
	return c.HeadDim
}

// HeadDimVOf is the value head size of layer l.
func (c *Config) HeadDimVOf(l int) int {
	if c.SWA != nil {
		return c.HeadDimOf(l)
	}
	return c.HeadDimV
}

// KVHeadsOf is the number of key/value heads of layer l.
func (c *Config) KVHeadsOf(l int) int {
	if c.KVHeads != nil {
		return c.KVHeads[l]
	}
	return c.NHeadKV
}

// IsSWA reports whether layer l attends through a sliding window.
func (c *Config) IsSWA(l int) bool { return c.SWA != nil && c.SWA[l] }

// OwnKV reports whether layer l stores keys and values of its own (not a
// convolution layer, not a layer reading an earlier layer's).
func (c *Config) OwnKV(l int) bool {
	return !c.IsConv(l) && !c.IsRec(l) && (c.KVFrom == nil || c.KVFrom[l] == l)
}

// kvSrc is the layer whose cache layer l's attention reads.
func (c *Config) kvSrc(l int) int {
	if c.KVFrom == nil {
		return l
	}
	return c.KVFrom[l]
}

// RecShape is the shape of a model's recurrent layers (recurrent.go).
type RecShape struct {
	RecState int // float32s of one layer's recurrent state
	RecConv  int // channels of the causal depthwise convolution before the recurrence
	RecTaps  int // earlier positions the convolution reads (its kernel is RecTaps+1 long)
	RecIn    int // float32s of one token's recurrence input
	RecOut   int // float32s of one token's recurrence output
}

// IsRec reports whether layer l is a recurrent (state-space) layer.
func (c *Config) IsRec(l int) bool { return c.Rec != nil && c.Rec[l] }

// RecLayers is the number of recurrent layers.
func (c *Config) RecLayers() int {
	n := 0
	for _, b := range c.Rec {
		if b {
			n++
		}
	}
	return n
}

// IsConv reports whether layer l is a short-convolution layer.
func (c *Config) IsConv(l int) bool { return c.Conv != nil && c.Conv[l] }

// ConvLayers is the number of short-convolution layers.
func (c *Config) ConvLayers() int {
	n := 0
	for _, b := range c.Conv {
		if b {
			n++
		}
	}
	return n
}

// Layer holds the weights of one transformer block.
type Layer struct {
	AttnNorm []float32     // [NEmbd]
	Wq       *quant.Matrix // [NHead*HeadDim rows × NEmbd]
	Wk       *quant.Matrix // [NHeadKV*HeadDim × NEmbd]
	Wv       *quant.Matrix // [NHeadKV*HeadDimV × NEmbd]
	Wo       *quant.Matrix // [NEmbd × NHead*HeadDimV]
	Bq       []float32     // [NHead*HeadDim], qwen2 only
	Bk       []float32     // [NHeadKV*HeadDim]
	Bv       []float32     // [NHeadKV*HeadDimV]
	QNorm    []float32     // [HeadDim], qwen3 only
	KNorm    []float32     // [HeadDim]
	FFNNorm  []float32     // [NEmbd]
	Wgate    *quant.Matrix // [NFF × NEmbd]
	Wup      *quant.Matrix // [NFF × NEmbd]
	Wdown    *quant.Matrix // [NEmbd × NFF]
	// A short-convolution layer (lfm2) has these instead of attention:
	ConvIn  *quant.Matrix // [3·NEmbd × NEmbd]: B, C and x
	ConvW   []float32     // [ConvTaps+1][NEmbd]: tap j of every channel (the file's [NEmbd][ConvTaps+1] transposed)
	ConvOut *quant.Matrix // [NEmbd × NEmbd]
	// A gated DeltaNet layer (qwen35) has these instead of attention:
	RecQKV   *quant.Matrix // [RecConv × NEmbd] attn_qkv: Q, K, V rows
	RecZ     *quant.Matrix // [DNHeadsV·DNHeadV × NEmbd] attn_gate: the output gate z
	RecBeta  *quant.Matrix // [DNHeadsV × NEmbd] ssm_beta
	RecAlpha *quant.Matrix // [DNHeadsV × NEmbd] ssm_alpha
	RecConvW []float32     // [RecTaps+1][RecConv]: tap j of every channel
	RecA     []float32     // [DNHeadsV] ssm_a (negative)
	RecDtB   []float32     // [DNHeadsV] ssm_dt.bias
	RecNorm  []float32     // [DNHeadV] ssm_norm
	RecOut   *quant.Matrix // [NEmbd × DNHeadsV·DNHeadV] ssm_out
	SSMW                   // a Mamba-2 layer's weights (granitehybrid; mamba2.go)
	// Gemma 4:
	PostAttnNorm []float32     // [NEmbd] the attention branch's output norm
	PostFFNNorm  []float32     // [NEmbd] the feed-forward branch's output norm
	OutScale     float32       // the layer's output × this (0: no scale)
	PLEGate      *quant.Matrix // [PerLayerEmbd × NEmbd] per-layer embedding gate
	PLEProj      *quant.Matrix // [NEmbd × PerLayerEmbd]
	PLENorm      []float32     // [NEmbd]
	// A mixture-of-experts feed-forward block (qwen3moe) has these
	// instead of Wgate, Wup and Wdown:
	Router  *quant.Matrix   // [Experts × NEmbd]
	ExpGate []*quant.Matrix // per expert [FFNExp × NEmbd]
	ExpUp   []*quant.Matrix // per expert [FFNExp × NEmbd]
	ExpDown []*quant.Matrix // per expert [NEmbd × FFNExp]
}

// Model is a loaded model. Its matrices alias the mapped GGUF file, which
// must stay open while the model is used.
type Model struct {
	Config
	File      *gguf.File
	TokEmbd   *quant.Matrix // [NVocab × NEmbd]
	OutNorm   []float32     // [NEmbd]
	Output    *quant.Matrix // [NVocab × NEmbd]; TokEmbd when tied
	RopeFreqs []float32     // optional per-pair frequency divisors (Llama 3.x; Gemma 4's global layers; phi3's short factors)
	// RopeFreqsLong are LongRoPE's divisors for a state whose context
	// exceeds RopeCtxOrig (phi3).
	RopeFreqsLong []float32
	Layers        []Layer
	// Gemma 4 E2B/E4B per-layer embeddings:
	PLETokEmbd *quant.Matrix // [NVocab × NLayer·PerLayerEmbd]
	PLEModel   *quant.Matrix // [NLayer·PerLayerEmbd × NEmbd]
	PLEModelN  []float32     // [PerLayerEmbd] norm of the projected part
	// Repack is what the load repacked and what it left in the file.
	Repack RepackStats
}

func metaInt(f *gguf.File, key string, def int, required bool) (int, error) {
	v, ok := f.Value(key)
	if !ok {
		if required {
			return 0, fmt.Errorf("model: missing metadata %q", key)
		}
		return def, nil
	}
	n, ok := gguf.AsInt(v)
	if !ok {
		return 0, fmt.Errorf("model: metadata %q has type %T, want an integer", key, v)
	}
	if n < 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("model: metadata %q = %d is out of range", key, n)
	}
	return int(n), nil
}

// metaPositive is metaInt for a key that, when the file has it, must be
// positive (a context length or a window of 0 is a broken file, not a
// default).
func metaPositive(f *gguf.File, key string, def int, required bool) (int, error) {
	n, err := metaInt(f, key, def, required)
	if err != nil {
		return 0, err
	}
	if _, ok := f.Value(key); ok && n <= 0 {
		return 0, fmt.Errorf("model: metadata %q = %d must be positive", key, n)
	}
	return n, nil
}

func metaFloat(f *gguf.File, key string, def float32) (float32, error) {
	v, ok := f.Value(key)
	if !ok {
		return def, nil
	}
	x, ok := f.Float(key)
	if !ok {
		return 0, fmt.Errorf("model: metadata %q has type %T, want a number", key, v)
	}
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, fmt.Errorf("model: metadata %q = %v is not finite", key, x)
	}
	return float32(x), nil
}

// convLayers reads a per-layer head_count_kv array of n layers: the KV
// heads of the attention layers (which must agree) and which layers are
// short convolutions (0 heads). A single number means no convolutions.
func convLayers(v any, n int) (int, []bool, error) {
	if x, ok := gguf.AsInt(v); ok {
		if x < 0 || x > math.MaxInt32 {
			return 0, nil, fmt.Errorf("model: head_count_kv %d is out of range", x)
		}
		return int(x), nil, nil
	}
	arr, ok := intArray(v)
	if !ok {
		return 0, nil, fmt.Errorf("model: head_count_kv has type %T, want an integer or an array of them", v)
	}
	if len(arr) != n {
		return 0, nil, fmt.Errorf("model: head_count_kv has %d entries for %d layers", len(arr), n)
	}
	kv, conv := 0, make([]bool, n)
	for l, x := range arr {
		switch {
		case x == 0:
			conv[l] = true
		case x < 0 || x > math.MaxInt32 || (kv != 0 && int(x) != kv):
			return 0, nil, fmt.Errorf("model: head_count_kv of layer %d is %d (the attention layers must share one positive count)", l, x)
		default:
			kv = int(x)
		}
	}
	if kv == 0 {
		kv = 1 // no attention layer at all: the head counts are never used
	}
	return kv, conv, nil
}

// ReadConfig reads and validates the model shape from f's metadata.
func ReadConfig(f *gguf.File) (Config, error) {
	arch := f.Arch()
	if arch == "" {
		return Config{}, fmt.Errorf("model: missing metadata %q", "general.architecture")
	}
	ai, ok := archs[arch]
	if !ok {
		return Config{}, fmt.Errorf("model: unsupported architecture %q (geist runs %s)", arch, strings.Join(SupportedArchs(), ", "))
	}
	c := Config{Arch: arch, RopeNeox: ai.neox, HasQKVBias: ai.qkvBias, HasQKNorm: ai.qkNorm}
	var err error
	p := arch + "."
	if c.NLayer, err = metaInt(f, p+"block_count", 0, true); err != nil {
		return c, err
	}
	if c.NEmbd, err = metaInt(f, p+"embedding_length", 0, true); err != nil {
		return c, err
	}
	if ai.gemma4 {
		// One width, or one per layer (E2B's double-wide layers).
		if c.NFF, c.FFNs, err = perLayerInts(f, p+"feed_forward_length", c.NLayer); err != nil {
			return c, err
		}
	} else if c.NFF, err = metaInt(f, p+"feed_forward_length", 0, true); err != nil {
		return c, err
	}
	if c.NHead, err = metaInt(f, p+"attention.head_count", 0, true); err != nil {
		return c, err
	}
	if ai.gemma4 {
		if c.NHeadKV, c.KVHeads, err = perLayerInts(f, p+"attention.head_count_kv", c.NLayer); err != nil {
			return c, err
		}
	} else if v, ok := f.Value(p + "attention.head_count_kv"); ok && ai.ssm {
		// A per-layer array: 0 marks a Mamba-2 layer (a recurrent layer).
		if c.NHeadKV, c.Rec, err = convLayers(v, c.NLayer); err != nil {
			return c, err
		}
	} else if v, ok := f.Value(p + "attention.head_count_kv"); ok && ai.conv {
		// A per-layer array: 0 marks a short-convolution layer.
		if c.NHeadKV, c.Conv, err = convLayers(v, c.NLayer); err != nil {
			return c, err
		}
		if c.ConvTaps, err = metaInt(f, p+"shortconv.l_cache", 0, true); err != nil {
			return c, err
		}
		if c.ConvTaps < 2 || c.ConvTaps > 16 {
			return c, fmt.Errorf("model: shortconv.l_cache %d must be in [2, 16]", c.ConvTaps)
		}
		c.ConvTaps--
	} else if c.NHeadKV, err = metaInt(f, p+"attention.head_count_kv", c.NHead, false); err != nil {
		return c, err
	}
	if c.CtxTrain, err = metaPositive(f, p+"context_length", 2048, false); err != nil {
		return c, err
	}
	if c.NLayer <= 0 || c.NEmbd <= 0 || c.NFF <= 0 || c.NHead <= 0 || c.NHeadKV <= 0 {
		return c, fmt.Errorf("model: %s: block_count, embedding_length, feed_forward_length and head counts must be positive (got %d, %d, %d, %d/%d)", arch, c.NLayer, c.NEmbd, c.NFF, c.NHead, c.NHeadKV)
	}
	for l := range c.NLayer {
		if kv := c.KVHeadsOf(l); kv <= 0 || c.NHead%kv != 0 {
			if !c.IsConv(l) {
				return c, fmt.Errorf("model: %d query heads are not a multiple of %d key/value heads (layer %d)", c.NHead, kv, l)
			}
		}
	}
	if c.NHead%c.NHeadKV != 0 {
		return c, fmt.Errorf("model: %d query heads are not a multiple of %d key/value heads", c.NHead, c.NHeadKV)
	}
	def := 0
	if c.NEmbd%c.NHead == 0 {
		def = c.NEmbd / c.NHead
	}
	if c.HeadDim, err = metaInt(f, p+"attention.key_length", def, def == 0); err != nil {
		return c, err
	}
	if c.HeadDimV, err = metaInt(f, p+"attention.value_length", c.HeadDim, false); err != nil {
		return c, err
	}
	if c.HeadDim <= 0 || c.HeadDimV <= 0 || c.HeadDim%2 != 0 {
		return c, fmt.Errorf("model: head size %d/%d must be positive and even", c.HeadDim, c.HeadDimV)
	}
	if c.RopeDim, err = metaInt(f, p+"rope.dimension_count", c.HeadDim, false); err != nil {
		return c, err
	}
	if c.RopeDim <= 0 || c.RopeDim > c.HeadDim || c.RopeDim%2 != 0 {
		return c, fmt.Errorf("model: rope dimension %d must be even and at most the head size %d", c.RopeDim, c.HeadDim)
	}
	if c.RopeBase, err = metaFloat(f, p+"rope.freq_base", ai.ropeBase); err != nil {
		return c, err
	}
	c.RopeScale = 1
	if st, ok := f.String(p + "rope.scaling.type"); ok && st != "none" && st != "linear" && st != "longrope" {
		return c, fmt.Errorf("model: rope scaling type %q is not supported (geist supports none and linear)", st)
	}
	factor, err := metaFloat(f, p+"rope.scaling.factor", 0)
	if err != nil {
		return c, err
	}
	if factor == 0 {
		// Older files give the frequency scale directly.
		if factor, err = metaFloat(f, p+"rope.scale_linear", 0); err != nil {
			return c, err
		}
	}
	if factor != 0 {
		if factor < 0 {
			return c, fmt.Errorf("model: rope scaling factor %v must be positive", factor)
		}
		c.RopeScale = 1 / factor
	}
	if c.NormEps, err = metaFloat(f, p+"attention.layer_norm_rms_epsilon", 1e-5); err != nil {
		return c, err
	}
	if c.NormEps <= 0 {
		return c, fmt.Errorf("model: rms norm epsilon %v must be positive", c.NormEps)
	}
	if c.RopeBase <= 0 {
		return c, fmt.Errorf("model: rope base %v must be positive", c.RopeBase)
	}
	if c.RopeScaleSWA == 0 {
		c.RopeScaleSWA = c.RopeScale
	}
	if ai.read != nil {
		if err := ai.read(f, &c); err != nil {
			return c, err
		}
	}
	return c, nil
}

// loader resolves tensors by name and checks their shapes.
type loader struct {
	f *gguf.File
}

func (l loader) tensor(name string, dims ...int) (*gguf.Tensor, error) {
	t, ok := l.f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("model: missing tensor %q", name)
	}
	shapeOK := len(t.Dims) >= len(dims)
	for i := range t.Dims {
		want := int64(1)
		if i < len(dims) {
			want = int64(dims[i])
		}
		if t.Dims[i] != want {
			shapeOK = false
		}
	}
	if !shapeOK {
		return nil, fmt.Errorf("model: tensor %q has shape %v, want %v", name, t.Dims, dims)
	}
	return t, nil
}

// matrix loads a 2-D weight: rows × cols (ggml dims [cols, rows]).
func (l loader) matrix(name string, rows, cols int) (*quant.Matrix, error) {
	t, err := l.tensor(name, cols, rows)
	if err != nil {
		return nil, err
	}
	m, err := quant.NewMatrix(t.Type, rows, cols, t.Data)
	if err != nil {
		return nil, fmt.Errorf("model: tensor %q: %w", name, err)
	}
	return m, nil
}

// vector loads a 1-D tensor of n values as float32 (norm weights, biases).
func (l loader) vector(name string, n int) ([]float32, error) {
	t, err := l.tensor(name, n)
	if err != nil {
		return nil, err
	}
	out := make([]float32, n)
	if err := quant.DequantizeRow(t.Type, t.Data, out); err != nil {
		return nil, fmt.Errorf("model: tensor %q: %w", name, err)
	}
	return out, nil
}

// convKernel loads a depthwise convolution kernel (ggml dims [taps,
// channels]) transposed to [taps][channels], so that one tap of every
// channel is contiguous.
func (l loader) convKernel(name string, channels, taps int) ([]float32, error) {
	w, err := l.vector2(name, taps, channels)
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(w))
	for ch := 0; ch < channels; ch++ {
		for j := 0; j < taps; j++ {
			out[j*channels+ch] = w[ch*taps+j]
		}
	}
	return out, nil
}

// vector2 loads a small 2-D tensor (ggml dims [ne0, ne1]) as float32.
func (l loader) vector2(name string, ne0, ne1 int) ([]float32, error) {
	t, err := l.tensor(name, ne0, ne1)
	if err != nil {
		return nil, err
	}
	out := make([]float32, ne0*ne1)
	if err := quant.DequantizeRow(t.Type, t.Data, out); err != nil {
		return nil, fmt.Errorf("model: tensor %q: %w", name, err)
	}
	return out, nil
}

// Load resolves the weights of f and repacks every matrix the active
// kernel set has a layout for. The file must stay open while the model is
// in use: the matrices alias its mapping.
func Load(f *gguf.File) (*Model, error) { return LoadWith(f, LoadOptions{RepackBudget: -1}) }

// LoadWith is Load with options: a repack budget.
func LoadWith(f *gguf.File, o LoadOptions) (*Model, error) {
	c, err := ReadConfig(f)
	if err != nil {
		return nil, err
	}
	l := loader{f}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		return nil, fmt.Errorf("model: missing tensor %q", "token_embd.weight")
	}
	if len(emb.Dims) != 2 || emb.Dims[0] != int64(c.NEmbd) {
		return nil, fmt.Errorf("model: tensor %q has shape %v, want [%d, vocab]", "token_embd.weight", emb.Dims, c.NEmbd)
	}
	c.NVocab = int(emb.Dims[1])
	if c.NVocab <= 0 {
		return nil, fmt.Errorf("model: empty vocabulary")
	}
	m := &Model{File: f}
	if m.TokEmbd, err = l.matrix("token_embd.weight", c.NVocab, c.NEmbd); err != nil {
		return nil, err
	}
	outNorm := archs[c.Arch].outNorm
	if outNorm == "" {
		outNorm = "output_norm.weight"
	}
	if m.OutNorm, err = l.vector(outNorm, c.NEmbd); err != nil {
		return nil, err
	}
	if _, ok := f.Tensor("output.weight"); ok {
		if m.Output, err = l.matrix("output.weight", c.NVocab, c.NEmbd); err != nil {
			return nil, err
		}
	} else {
		m.Output = m.TokEmbd
		c.TiedOutput = true
	}
	if _, ok := f.Tensor("rope_freqs.weight"); ok {
		if m.RopeFreqs, err = l.vector("rope_freqs.weight", c.RopeDim/2); err != nil {
			return nil, err
		}
	}
	if _, ok := f.Tensor("rope_factors_short.weight"); ok {
		// LongRoPE (phi3): divisors for contexts up to the original one,
		// and others beyond.
		if m.RopeFreqs, err = l.vector("rope_factors_short.weight", c.RopeDim/2); err != nil {
			return nil, err
		}
		if m.RopeFreqsLong, err = l.vector("rope_factors_long.weight", c.RopeDim/2); err != nil {
			return nil, err
		}
	}
	if c.PerLayerEmbd > 0 {
		if err := m.loadPerLayerEmbd(l, &c); err != nil {
			return nil, err
		}
	}
	ffnNorm := archs[c.Arch].ffnNorm
	if ffnNorm == "" {
		ffnNorm = "ffn_norm.weight"
	}
	m.Layers = make([]Layer, c.NLayer)
	for i := range m.Layers {
		L := &m.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		hd, hdv, kvh := c.HeadDimOf(i), c.HeadDimVOf(i), c.KVHeadsOf(i)
		qDim, kDim, vDim := c.NHead*hd, kvh*hd, kvh*hdv
		steps := []func() error{
			func() (err error) { L.AttnNorm, err = l.vector(p+"attn_norm.weight", c.NEmbd); return },
			func() (err error) { L.FFNNorm, err = l.vector(p+ffnNorm, c.NEmbd); return },
			func() error { return l.feedForward(L, p, &c, i) },
		}
		if c.IsSSM(i) {
			steps = append(steps, func() error { return l.mamba2Layer(L, p, &c) })
			for _, s := range steps {
				if err := s(); err != nil {
					return nil, err
				}
			}
			continue
		}
		if c.IsConv(i) {
			steps = append(steps,
				func() (err error) { L.ConvIn, err = l.matrix(p+"shortconv.in_proj.weight", 3*c.NEmbd, c.NEmbd); return },
				func() (err error) { L.ConvOut, err = l.matrix(p+"shortconv.out_proj.weight", c.NEmbd, c.NEmbd); return },
				func() (err error) {
					L.ConvW, err = l.convKernel(p+"shortconv.conv.weight", c.NEmbd, c.ConvTaps+1)
					return
				},
			)
			for _, s := range steps {
				if err := s(); err != nil {
					return nil, err
				}
			}
			continue
		}
		if c.IsRec(i) {
			steps = append(steps, func() error { return l.deltaNet(L, p, &c) })
			for _, s := range steps {
				if err := s(); err != nil {
					return nil, err
				}
			}
			continue
		}
		if c.AttnGate {
			qDim *= 2 // per head its queries, then its output gate
		}
		steps = append(steps,
			func() (err error) { L.Wo, err = l.matrix(p+"attn_output.weight", c.NEmbd, c.NHead*hdv); return },
		)
		if _, ok := f.Tensor(p + "attn_qkv.weight"); ok {
			// Fused (phi3): the rows of Q, then K, then V.
			steps = append(steps, func() (err error) {
				ws, err := l.split(p+"attn_qkv.weight", c.NEmbd, qDim, kDim, vDim)
				if err == nil {
					L.Wq, L.Wk, L.Wv = ws[0], ws[1], ws[2]
				}
				return err
			})
		} else {
			steps = append(steps, func() (err error) { L.Wq, err = l.matrix(p+"attn_q.weight", qDim, c.NEmbd); return })
		}
		if _, ok := f.Tensor(p + "attn_qkv.weight"); !ok && c.OwnKV(i) {
			steps = append(steps,
				func() (err error) { L.Wk, err = l.matrix(p+"attn_k.weight", kDim, c.NEmbd); return },
				func() (err error) {
					if _, ok := f.Tensor(p + "attn_v.weight"); !ok && c.Arch == "gemma4" && !c.IsSWA(i) {
						return nil // a global Gemma 4 layer: the values are the keys
					}
					L.Wv, err = l.matrix(p+"attn_v.weight", vDim, c.NEmbd)
					return
				},
			)
		}
		if c.PostNorms {
			steps = append(steps, func() error { return l.gemmaLayer(L, p, &c) })
		}
		if c.HasQKVBias {
			steps = append(steps,
				func() (err error) { L.Bq, err = l.vector(p+"attn_q.bias", qDim); return },
				func() (err error) { L.Bk, err = l.vector(p+"attn_k.bias", kDim); return },
				func() (err error) { L.Bv, err = l.vector(p+"attn_v.bias", vDim); return },
			)
		}
		if c.HasQKNorm {
			steps = append(steps,
				func() (err error) { L.QNorm, err = l.vector(p+"attn_q_norm.weight", hd); return },
				func() (err error) {
					if c.OwnKV(i) {
						L.KNorm, err = l.vector(p+"attn_k_norm.weight", hd)
					}
					return
				},
			)
		}
		for _, s := range steps {
			if err := s(); err != nil {
				return nil, err
			}
		}
	}
	m.Config = c
	if err := m.pack(f, o); err != nil {
		return nil, err
	}
	return m, nil
}

// MixerBytes is the weight bytes of the layer's attention (or
// convolution) block, FFNBytes those of its feed-forward block.
func (L *Layer) MixerBytes() int64 {
	return matBytes(L.Wq, L.Wk, L.Wv, L.Wo, L.ConvIn, L.ConvOut, L.PLEGate, L.PLEProj, L.RecQKV, L.RecZ, L.RecBeta, L.RecAlpha, L.RecOut, L.SSMIn, L.SSMOut)
}

// FFNBytes is the weight bytes of the layer's feed-forward block (all
// its experts).
func (L *Layer) FFNBytes() int64 {
	n := matBytes(L.Wgate, L.Wup, L.Wdown, L.Router)
	for e := range L.ExpGate {
		n += matBytes(L.ExpGate[e], L.ExpUp[e], L.ExpDown[e])
	}
	return n
}

func matBytes(ws ...*quant.Matrix) int64 {
	var n int64
	for _, w := range ws {
		if w != nil {
			n += int64(len(w.Data))
		}
	}
	return n
}

// DecodeBytes is the number of weight bytes one decoding step reads: every
// layer matrix and the output matrix, but only one row of the token
// embedding (which, when tied, is the output matrix and counted once),
// and of a mixture of experts the bytes of ExpertsUsed experts per layer
// (State.ExpertBytesRead counts the experts a pass really ran).
func (m *Model) DecodeBytes() int64 { return m.decodeBytes(true) }

// DenseDecodeBytes is DecodeBytes without the experts: what every pass
// reads whatever its tokens.
func (m *Model) DenseDecodeBytes() int64 { return m.decodeBytes(false) }

func (m *Model) decodeBytes(experts bool) int64 {
	var n int64
	add := func(w *quant.Matrix) {
		if w != nil {
			n += int64(len(w.Data))
		}
	}
	for i := range m.Layers {
		L := &m.Layers[i]
		add(L.Wq)
		add(L.Wk)
		add(L.Wv)
		add(L.Wo)
		add(L.Wgate)
		add(L.Wup)
		add(L.Wdown)
		add(L.ConvIn)
		add(L.ConvOut)
		add(L.RecQKV)
		add(L.RecZ)
		add(L.RecBeta)
		add(L.RecAlpha)
		add(L.RecOut)
		add(L.SSMIn)
		add(L.SSMOut)
		add(L.PLEGate)
		add(L.PLEProj)
		add(L.Router)
		for e := range L.ExpGate { // the chosen experts only
			if experts && e < m.ExpertsUsed {
				add(L.ExpGate[e])
				add(L.ExpUp[e])
				add(L.ExpDown[e])
			}
		}
	}
	add(m.PLEModel)
	if m.PLETokEmbd != nil {
		n += int64(m.PLETokEmbd.RowBytes())
	}
	add(m.Output)
	if m.Output != m.TokEmbd {
		n += int64(m.TokEmbd.RowBytes())
	}
	return n
}
