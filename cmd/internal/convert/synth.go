package convert

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/quant"
)

// Shape is the architecture and the sizes of a model.
type Shape struct {
	Name    string
	Arch    string // "llama", "qwen2", "lfm2", "gemma3", "gemma4", "qwen3moe" or "qwen35"
	Layers  int
	Embd    int // width
	Heads   int // query heads
	HeadsKV int // key/value heads
	HeadDim int
	FFN     int // feed-forward width
	Vocab   int // tokens (rows of token_embd)
	Text    int // tokens before the special tokens
	Ctx     int // training context, written as <arch>.context_length

	RopeBase float32
	NormEps  float32
	Tied     bool // no output.weight: the output reuses token_embd
	QKVBias  bool // attn_q/k/v.bias (Qwen2)
	// Llama3Rope adds rope_freqs.weight with Llama 3.1's frequency scaling
	// (factor 32, low/high frequency factors 1 and 4, original context 8192).
	Llama3Rope bool
	VocabStyle VocabStyle
	// AttnLayers lists the attention layers of a hybrid (lfm2): the others
	// are short convolutions of LCache taps. Per-head Q/K norms with them.
	AttnLayers []int
	LCache     int
	// Gemma 4 (Arch "gemma4"): every Period-th layer is global (head size
	// HeadDim, RopeDim of it rotated by proportional rope), the others
	// local (HeadDimSWA, a Window); FFNShared is the feed-forward width of
	// the last SharedKV layers, which read an earlier layer's keys and
	// values; PerLayer is the width of the per-layer embeddings.
	Period, HeadDimSWA, RopeDim, Window, SharedKV, FFNShared, PerLayer int
	// A mixture of experts (Arch "qwen3moe"): every layer's feed-forward
	// block is a router over Experts experts of width FFNExp, ExpertsUsed
	// of them run per token (FFN is then only written as metadata).
	Experts, ExpertsUsed, FFNExp int
	// Granite 4.0-H (Arch "granitehybrid"): the layers not in AttnLayers
	// are Mamba-2 layers of SSMHeads heads of SSMInner/SSMHeads, a state
	// of SSMState per head row, SSMGroups groups of B and C and a
	// convolution of SSMConv taps; Granite's multipliers.
	SSMInner, SSMState, SSMHeads, SSMGroups, SSMConv int
	// Qwen3.5 (Arch "qwen35"): every Interval-th layer is gated full
	// attention (RopeDim of HeadDim rotated), the others gated DeltaNet
	// layers of DNKHeads key heads and DNVHeads value heads of DNHead.
	Interval, DNKHeads, DNVHeads, DNHead int
	// Drafters that ship beside a target (written as their own files,
	// with the target's vocabulary: VocabStyle, Vocab and Text as the
	// target's). A Gemma 4 assistant (Arch "gemma4-assistant"): Layers
	// Q-only layers of width Embd reading the target's caches (Heads query
	// heads over HeadsKV of HeadDim / HeadDimSWA, the layer pattern of
	// Period as gemma4's), EmbdTarget the target's width, and with
	// Centroids > 0 the sparse head's masked_embd_centroids and
	// masked_embd_ordering (Vocab/Centroids tokens per cluster). An
	// EAGLE-3 head (Arch "eagle3"): one decoder layer of width Embd fed
	// the residual stream entering TargetLayers of a target of width
	// EmbdTarget, a draft vocabulary of DraftVocab tokens mapped to the
	// target's by d2t.
	EmbdTarget, Centroids, DraftVocab int
	TargetLayers                      []int
	// NextN is the number of next-token prediction (MTP) blocks appended
	// after the layers (Qwen3.5 "-MTP" files: blk.Layers.nextn.* with a
	// gated full-attention block), written as nextn_predict_layers.
	NextN int
}

// swa reports whether layer i of a gemma4 shape is local.
func (s Shape) swa(i int) bool { return s.Period > 0 && i%s.Period < s.Period-1 }

// ffn is the feed-forward width of layer i.
func (s Shape) ffn(i int) int {
	if s.FFNShared > 0 && i >= s.Layers-s.SharedKV {
		return s.FFNShared
	}
	return s.FFN
}

// headDim is the head size of layer i.
func (s Shape) headDim(i int) int {
	if s.swa(i) {
		return s.HeadDimSWA
	}
	return s.HeadDim
}

// attn reports whether layer i is an attention layer.
func (s Shape) attn(i int) bool {
	switch s.Arch {
	case "eagle3", "gemma4-assistant":
		return true
	case "lfm2", "granitehybrid":
		return slices.Contains(s.AttnLayers, i)
	case "qwen35":
		return (i+1)%s.Interval == 0
	}
	return true
}

var shapes = []Shape{
	{
		Name: "llama32-1b", Arch: "llama", Layers: 16, Embd: 2048, Heads: 32, HeadsKV: 8, HeadDim: 64,
		FFN: 8192, Vocab: 128256, Text: 128000, Ctx: 131072, RopeBase: 500000, NormEps: 1e-5,
		Tied: true, Llama3Rope: true, VocabStyle: Llama3,
	},
	{
		Name: "qwen25-05b", Arch: "qwen2", Layers: 24, Embd: 896, Heads: 14, HeadsKV: 2, HeadDim: 64,
		FFN: 4864, Vocab: 151936, Text: 151643, Ctx: 32768, RopeBase: 1e6, NormEps: 1e-6,
		Tied: true, QKVBias: true, VocabStyle: Qwen2,
	},
	{
		// LiquidAI LFM2-1.2B (and LFM2.5-1.2B): 10 short-convolution and 6
		// attention layers.
		Name: "lfm2-1.2b", Arch: "lfm2", Layers: 16, Embd: 2048, Heads: 32, HeadsKV: 8, HeadDim: 64,
		FFN: 8192, Vocab: 65536, Text: 64400, Ctx: 128000, RopeBase: 1e6, NormEps: 1e-5,
		Tied: true, VocabStyle: LFM2, AttnLayers: []int{2, 5, 8, 10, 12, 14}, LCache: 3,
	},
	{
		// Google Gemma 4 E2B: 35 layers (every 5th global), per-layer
		// embeddings of 256 per layer, the last 20 layers reading the
		// keys and values of layers 13 and 14 with double-wide FFNs.
		Name: "gemma4-e2b", Arch: "gemma4", Layers: 35, Embd: 1536, Heads: 8, HeadsKV: 1, HeadDim: 512,
		FFN: 6144, Vocab: 262144, Text: 262000, Ctx: 131072, RopeBase: 1e6, NormEps: 1e-6,
		Tied: true, VocabStyle: Gemma, Period: 5, HeadDimSWA: 256, RopeDim: 128, Window: 512,
		SharedKV: 20, FFNShared: 12288, PerLayer: 256,
	},
	{
		// Google Gemma 3 1B: 26 layers, five local (512-token window) to
		// one global, heads of 256 while width/heads is 288, the 262k
		// vocabulary (its tied head is a third of the file).
		Name: "gemma3-1b", Arch: "gemma3", Layers: 26, Embd: 1152, Heads: 4, HeadsKV: 1, HeadDim: 256,
		FFN: 6912, Vocab: 262144, Text: 262000, Ctx: 32768, RopeBase: 1e6, NormEps: 1e-6,
		Tied: true, VocabStyle: Gemma, Window: 512,
	},
	{
		// Google Gemma 3 270M: 18 layers of width 640 (five local layers
		// of a 512-token window to one global), heads of 256, and the same
		// 262k vocabulary: its tied head (168M of its 268M weights) is most
		// of what a decoded token reads.
		Name: "gemma3-270m", Arch: "gemma3", Layers: 18, Embd: 640, Heads: 4, HeadsKV: 1, HeadDim: 256,
		FFN: 2048, Vocab: 262144, Text: 262000, Ctx: 32768, RopeBase: 1e6, NormEps: 1e-6,
		Tied: true, VocabStyle: Gemma, Window: 512,
	},
	{
		// IBM Granite-4.0-H-1B as its config describes it (to our
		// knowledge: not checked against the published file): 40 layers,
		// 36 of them Mamba-2 (48 heads of 64, a state of 128, one group, a
		// width-4 convolution; 3072 channels, 1.5 MiB of state per layer)
		// and 4 attention layers without rope (12 query and 4 key/value
		// heads of 128), a SwiGLU feed-forward of 4096, a tied 100k
		// vocabulary. The attention layers' places are assumed.
		Name: "granite4-h-1b", Arch: "granitehybrid", Layers: 40, Embd: 1536, Heads: 12, HeadsKV: 4, HeadDim: 128,
		FFN: 4096, Vocab: 100352, Text: 100000, Ctx: 1 << 20, RopeBase: 10000, NormEps: 1e-5,
		Tied: true, VocabStyle: Qwen2, AttnLayers: []int{9, 19, 29, 39},
		SSMInner: 3072, SSMState: 128, SSMHeads: 48, SSMGroups: 1, SSMConv: 4,
	},
	{
		// Qwen3-30B-A3B: 48 layers of 128 experts (768 wide, 8 per token)
		// behind QK-normed attention of 32 query and 4 key/value heads of
		// 128: 30.5B weights, 3.3B of them active per token.
		Name: "qwen3-30b-a3b", Arch: "qwen3moe", Layers: 48, Embd: 2048, Heads: 32, HeadsKV: 4, HeadDim: 128,
		FFN: 6144, Vocab: 151936, Text: 151643, Ctx: 40960, RopeBase: 1e6, NormEps: 1e-6,
		VocabStyle: Qwen2, Experts: 128, ExpertsUsed: 8, FFNExp: 768,
	},
	{
		// Qwen3.5-0.8B (text part): 24 layers of width 1024, three gated
		// DeltaNet layers (16 key and 16 value heads of 128: a 1 MiB state
		// per layer) to each gated full-attention layer (8 query and 2
		// key/value heads of 256, rope on 64 of them), the 248k vocabulary
		// tied.
		Name: "qwen35-0.8b", Arch: "qwen35", Layers: 24, Embd: 1024, Heads: 8, HeadsKV: 2, HeadDim: 256,
		FFN: 3584, Vocab: 248320, Text: 248044, Ctx: 262144, RopeBase: 1e7, NormEps: 1e-6,
		Tied: true, VocabStyle: Qwen2, RopeDim: 64, Interval: 4, DNKHeads: 16, DNVHeads: 16, DNHead: 128,
	},
	{
		// Gemma 4 E2B's assistant drafter ("gemma4-e2b-it-assistant"):
		// four Q-only layers of width 256 (three local, one global, read
		// over gemma4-e2b's caches: 8 query heads over its 1 KV head of
		// 256 / 512), a GELU-gated FFN of 2048 (assumed: the published
		// figure is the total, about 78M weights, 67M of them the 262k
		// head), the pre/post projections to the target's width 1536, and
		// the sparse head of 2,048 centroids of 128 tokens each.
		Name: "gemma4-e2b-assistant", Arch: "gemma4-assistant", Layers: 4, Embd: 256, Heads: 8, HeadsKV: 1, HeadDim: 512,
		FFN: 2048, Vocab: 262144, Text: 262000, Ctx: 131072, RopeBase: 1e6, NormEps: 1e-6,
		Tied: true, VocabStyle: Gemma, Period: 4, HeadDimSWA: 256, RopeDim: 128, Window: 512,
		EmbdTarget: 1536, Centroids: 2048,
	},
	{
		// The same assistant as llama.cpp's converter writes it: without
		// the sparse head's two tensors (it drops them; llama.cpp 0.7.0
		// cannot load a file that has them). Its other tensors are
		// gemma4-e2b-assistant's, bit for bit, for the same seed and type.
		Name: "gemma4-e2b-assistant-dense", Arch: "gemma4-assistant", Layers: 4, Embd: 256, Heads: 8, HeadsKV: 1, HeadDim: 512,
		FFN: 2048, Vocab: 262144, Text: 262000, Ctx: 131072, RopeBase: 1e6, NormEps: 1e-6,
		Tied: true, VocabStyle: Gemma, Period: 4, HeadDimSWA: 256, RopeDim: 128, Window: 512,
		EmbdTarget: 1536,
	},
	{
		// Qwen3-1.7B: 28 layers of width 2048, 16 query and 8 key/value
		// heads of 128 with per-head Q/K norms, SwiGLU FFN 6144, the 152k
		// vocabulary tied.
		Name: "qwen3-1.7b", Arch: "qwen3", Layers: 28, Embd: 2048, Heads: 16, HeadsKV: 8, HeadDim: 128,
		FFN: 6144, Vocab: 151936, Text: 151643, Ctx: 40960, RopeBase: 1e6, NormEps: 1e-6,
		Tied: true, VocabStyle: Qwen2,
	},
	{
		// An EAGLE-3 head for Qwen3-1.7B in the form of AngelSlim's
		// Qwen3-1.7B_eagle3: one decoder layer of the target's width
		// (16 heads over 8 of 128, FFN 6144), fc over three target
		// layers (the converter's default [2, n/2, n-3]), a draft
		// vocabulary of 32,000 tokens.
		Name: "qwen3-1.7b-eagle3", Arch: "eagle3", Layers: 1, Embd: 2048, Heads: 16, HeadsKV: 8, HeadDim: 128,
		FFN: 6144, Vocab: 151936, Text: 151643, Ctx: 40960, RopeBase: 1e6, NormEps: 1e-6,
		VocabStyle: Qwen2, EmbdTarget: 2048, DraftVocab: 32000, TargetLayers: []int{2, 14, 25},
	},
	{
		// qwen35-0.8b with its MTP block, as the "-MTP" GGUFs carry it.
		Name: "qwen35-0.8b-mtp", Arch: "qwen35", Layers: 24, Embd: 1024, Heads: 8, HeadsKV: 2, HeadDim: 256,
		FFN: 3584, Vocab: 248320, Text: 248044, Ctx: 262144, RopeBase: 1e7, NormEps: 1e-6,
		Tied: true, VocabStyle: Qwen2, RopeDim: 64, Interval: 4, DNKHeads: 16, DNVHeads: 16, DNHead: 128, NextN: 1,
	},
	{
		// Qwen3.5-2B with its MTP block: width 2048, FFN 6144, otherwise
		// 0.8B's layout (the sizes as read from its published config, not
		// checked against a file here).
		Name: "qwen35-2b-mtp", Arch: "qwen35", Layers: 24, Embd: 2048, Heads: 8, HeadsKV: 2, HeadDim: 256,
		FFN: 6144, Vocab: 248320, Text: 248044, Ctx: 262144, RopeBase: 1e7, NormEps: 1e-6,
		Tied: true, VocabStyle: Qwen2, RopeDim: 64, Interval: 4, DNKHeads: 16, DNVHeads: 16, DNHead: 128, NextN: 1,
	},
}

// Shapes returns the shapes Synth knows by name.
func Shapes() []Shape { return append([]Shape(nil), shapes...) }

// LookupShape returns the shape called name.
func LookupShape(name string) (Shape, error) {
	var names []string
	for _, s := range shapes {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return Shape{}, fmt.Errorf("convert: unknown shape %q (want one of %s)", name, strings.Join(names, ", "))
}

// Params is the number of weights of the shape.
func (s Shape) Params() int64 {
	var n int64
	for _, t := range s.tensors() {
		n += t.elements()
	}
	return n
}

func (s Shape) check() error {
	switch {
	case !slices.Contains([]string{"llama", "qwen2", "qwen3", "lfm2", "gemma4", "gemma3", "qwen3moe", "granitehybrid", "qwen35", "gemma4-assistant", "eagle3"}, s.Arch):
		return fmt.Errorf("convert: shape %q: architecture %q (want llama, qwen2, qwen3, lfm2, gemma4, gemma3, qwen3moe, granitehybrid, qwen35, gemma4-assistant or eagle3)", s.Name, s.Arch)
	case s.Arch == "gemma4-assistant" && (s.Period < 2 || s.HeadDimSWA <= 0 || s.RopeDim <= 0 || s.Window <= 0 || s.EmbdTarget <= 0 || s.EmbdTarget == s.Embd || (s.Centroids > 0 && s.Vocab%s.Centroids != 0)):
		return fmt.Errorf("convert: shape %q: an assistant needs a period, a local head size, a rope dimension, a window, the target's width (not its own) and centroids dividing the vocabulary", s.Name)
	case s.Arch == "eagle3" && (len(s.TargetLayers) != 3 || s.EmbdTarget <= 0 || s.DraftVocab <= 0 || s.DraftVocab > s.Vocab || s.Heads*s.HeadDim != s.Embd):
		return fmt.Errorf("convert: shape %q: an EAGLE-3 head needs 3 target layers, the target's width, a draft vocabulary within the target's and heads × head size = width", s.Name)
	case s.Arch == "granitehybrid" && (s.SSMHeads <= 0 || s.SSMInner%s.SSMHeads != 0 || s.SSMState <= 0 || s.SSMGroups <= 0 || s.SSMHeads%s.SSMGroups != 0 || s.SSMConv < 2):
		return fmt.Errorf("convert: shape %q: a granitehybrid shape needs Mamba-2 heads dividing the inner size, a state size, groups dividing the heads and a convolution of at least 2 taps", s.Name)
	case s.Arch == "qwen35" && (s.Interval < 1 || s.DNKHeads <= 0 || s.DNVHeads <= 0 || s.DNHead <= 0 || s.DNVHeads%s.DNKHeads != 0 || s.RopeDim <= 0 || s.RopeDim > s.HeadDim || s.RopeDim%2 != 0):
		return fmt.Errorf("convert: shape %q: a qwen35 shape needs a full-attention interval, DeltaNet heads (value heads a multiple of key heads), their size and a rope dimension", s.Name)
	case s.Arch == "qwen3moe" && (s.Experts <= 0 || s.ExpertsUsed <= 0 || s.ExpertsUsed > s.Experts || s.FFNExp <= 0):
		return fmt.Errorf("convert: shape %q: a qwen3moe shape needs experts, the experts used per token (at most all) and their width", s.Name)
	case s.Arch == "gemma4" && (s.Period < 2 || s.HeadDimSWA <= 0 || s.RopeDim <= 0 || s.Window <= 0 || s.SharedKV >= s.Layers-1):
		return fmt.Errorf("convert: shape %q: a gemma4 shape needs a period, a local head size, a rope dimension, a window and fewer shared layers", s.Name)
	case s.Arch == "lfm2" && s.LCache < 2:
		return fmt.Errorf("convert: shape %q: an lfm2 shape needs LCache >= 2", s.Name)
	case s.Layers <= 0 || s.Embd <= 0 || s.Heads <= 0 || s.HeadsKV <= 0 || s.HeadDim <= 0 || s.FFN <= 0 || s.Ctx <= 0:
		return fmt.Errorf("convert: shape %q: sizes must be positive", s.Name)
	case s.Heads%s.HeadsKV != 0 || s.HeadDim%2 != 0:
		return fmt.Errorf("convert: shape %q: %d heads are not a multiple of %d key/value heads, or head size %d is odd", s.Name, s.Heads, s.HeadsKV, s.HeadDim)
	case !(s.RopeBase > 0) || !(s.NormEps > 0):
		return fmt.Errorf("convert: shape %q: rope base and norm epsilon must be positive", s.Name)
	}
	return nil
}

type tensorKind int

const (
	kindWeight tensorKind = iota // random normal
	kindBias                     // random normal, F32
	kindNorm                     // ones (SynthOptions.NormStd: around 1), F32
	kindRopeFreqs
	kindSSMA  // Mamba-2's A per head: -1, -2, ... -16, -1, ... (F32)
	kindDecay // -exp(normal): a DeltaNet layer's ssm_a, F32
	kindOrder // a random permutation of the vocabulary, I32 (masked_embd_ordering)
	kindD2T   // distinct ascending target ids, I64 (an EAGLE-3 head's d2t)
)

type synthTensor struct {
	name string
	dims []int64
	kind tensorKind
}

func (t synthTensor) elements() int64 {
	n := int64(1)
	for _, d := range t.dims {
		n *= d
	}
	return n
}

// tensors lists the shape's tensors as llama.cpp names them.
func (s Shape) tensors() []synthTensor {
	e, q, kv, f, v := int64(s.Embd), int64(s.Heads*s.HeadDim), int64(s.HeadsKV*s.HeadDim), int64(s.FFN), int64(s.Vocab)
	if s.Arch == "gemma4" {
		return s.gemma4Tensors()
	}
	if s.Arch == "qwen35" {
		return s.qwen35Tensors()
	}
	if s.Arch == "gemma4-assistant" {
		return s.assistantTensors()
	}
	if s.Arch == "eagle3" {
		return s.eagle3Tensors()
	}
	outNorm := "output_norm.weight"
	if s.Arch == "lfm2" {
		outNorm = "token_embd_norm.weight"
	}
	ts := []synthTensor{
		{"token_embd.weight", []int64{e, v}, kindWeight},
		{outNorm, []int64{e}, kindNorm},
	}
	if !s.Tied {
		ts = append(ts, synthTensor{"output.weight", []int64{e, v}, kindWeight})
	}
	if s.Llama3Rope {
		ts = append(ts, synthTensor{"rope_freqs.weight", []int64{int64(s.HeadDim / 2)}, kindRopeFreqs})
	}
	for i := range s.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		if !s.attn(i) && s.Arch == "granitehybrid" {
			h, n, g, in := int64(s.SSMHeads), int64(s.SSMState), int64(s.SSMGroups), int64(s.SSMInner)
			ch := in + 2*g*n
			ts = append(ts,
				synthTensor{p + "attn_norm.weight", []int64{e}, kindNorm},
				synthTensor{p + "ssm_in.weight", []int64{e, in + ch + h}, kindWeight},
				synthTensor{p + "ssm_conv1d.weight", []int64{int64(s.SSMConv), ch}, kindWeight},
				synthTensor{p + "ssm_conv1d.bias", []int64{ch}, kindBias},
				synthTensor{p + "ssm_a", []int64{1, h}, kindSSMA},
				synthTensor{p + "ssm_d", []int64{1, h}, kindNorm},
				synthTensor{p + "ssm_dt.bias", []int64{h}, kindBias},
				synthTensor{p + "ssm_norm.weight", []int64{in / g, g}, kindNorm},
				synthTensor{p + "ssm_out.weight", []int64{in, e}, kindWeight},
				synthTensor{p + "ffn_norm.weight", []int64{e}, kindNorm},
				synthTensor{p + "ffn_gate.weight", []int64{e, f}, kindWeight},
				synthTensor{p + "ffn_up.weight", []int64{e, f}, kindWeight},
				synthTensor{p + "ffn_down.weight", []int64{f, e}, kindWeight})
			continue
		}
		if !s.attn(i) {
			ts = append(ts,
				synthTensor{p + "attn_norm.weight", []int64{e}, kindNorm},
				synthTensor{p + "shortconv.in_proj.weight", []int64{e, 3 * e}, kindWeight},
				synthTensor{p + "shortconv.conv.weight", []int64{int64(s.LCache), e}, kindWeight},
				synthTensor{p + "shortconv.out_proj.weight", []int64{e, e}, kindWeight},
				synthTensor{p + "ffn_norm.weight", []int64{e}, kindNorm},
				synthTensor{p + "ffn_gate.weight", []int64{e, f}, kindWeight},
				synthTensor{p + "ffn_up.weight", []int64{e, f}, kindWeight},
				synthTensor{p + "ffn_down.weight", []int64{f, e}, kindWeight})
			continue
		}
		if s.Arch == "lfm2" || s.Arch == "gemma3" || s.Arch == "qwen3moe" || s.Arch == "qwen3" {
			ts = append(ts,
				synthTensor{p + "attn_q_norm.weight", []int64{int64(s.HeadDim)}, kindNorm},
				synthTensor{p + "attn_k_norm.weight", []int64{int64(s.HeadDim)}, kindNorm})
		}
		if s.Arch == "gemma3" {
			ts = append(ts,
				synthTensor{p + "post_attention_norm.weight", []int64{e}, kindNorm},
				synthTensor{p + "post_ffw_norm.weight", []int64{e}, kindNorm})
		}
		ts = append(ts,
			synthTensor{p + "attn_norm.weight", []int64{e}, kindNorm},
			synthTensor{p + "attn_q.weight", []int64{e, q}, kindWeight},
			synthTensor{p + "attn_k.weight", []int64{e, kv}, kindWeight},
			synthTensor{p + "attn_v.weight", []int64{e, kv}, kindWeight})
		if s.QKVBias {
			ts = append(ts,
				synthTensor{p + "attn_q.bias", []int64{q}, kindBias},
				synthTensor{p + "attn_k.bias", []int64{kv}, kindBias},
				synthTensor{p + "attn_v.bias", []int64{kv}, kindBias})
		}
		ts = append(ts,
			synthTensor{p + "attn_output.weight", []int64{q, e}, kindWeight},
			synthTensor{p + "ffn_norm.weight", []int64{e}, kindNorm})
		if s.Arch == "qwen3moe" {
			x, fe := int64(s.Experts), int64(s.FFNExp)
			ts = append(ts,
				synthTensor{p + "ffn_gate_inp.weight", []int64{e, x}, kindWeight},
				synthTensor{p + "ffn_gate_exps.weight", []int64{e, fe, x}, kindWeight},
				synthTensor{p + "ffn_up_exps.weight", []int64{e, fe, x}, kindWeight},
				synthTensor{p + "ffn_down_exps.weight", []int64{fe, e, x}, kindWeight})
			continue
		}
		ts = append(ts,
			synthTensor{p + "ffn_gate.weight", []int64{e, f}, kindWeight},
			synthTensor{p + "ffn_up.weight", []int64{e, f}, kindWeight},
			synthTensor{p + "ffn_down.weight", []int64{f, e}, kindWeight})
	}
	return ts
}

// qwen35Tensors lists a qwen35 shape's tensors as llama.cpp's converter
// names them.
func (s Shape) qwen35Tensors() []synthTensor {
	e, q, kv, f, v := int64(s.Embd), int64(s.Heads*s.HeadDim), int64(s.HeadsKV*s.HeadDim), int64(s.FFN), int64(s.Vocab)
	hv, inner := int64(s.DNVHeads), int64(s.DNVHeads*s.DNHead)
	conv := 2*int64(s.DNKHeads*s.DNHead) + inner
	ts := []synthTensor{
		{"token_embd.weight", []int64{e, v}, kindWeight},
		{"output_norm.weight", []int64{e}, kindNorm},
	}
	if !s.Tied {
		ts = append(ts, synthTensor{"output.weight", []int64{e, v}, kindWeight})
	}
	for i := range s.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		ts = append(ts, synthTensor{p + "attn_norm.weight", []int64{e}, kindNorm})
		if s.attn(i) {
			ts = append(ts,
				synthTensor{p + "attn_q.weight", []int64{e, 2 * q}, kindWeight},
				synthTensor{p + "attn_k.weight", []int64{e, kv}, kindWeight},
				synthTensor{p + "attn_v.weight", []int64{e, kv}, kindWeight},
				synthTensor{p + "attn_output.weight", []int64{q, e}, kindWeight},
				synthTensor{p + "attn_q_norm.weight", []int64{int64(s.HeadDim)}, kindNorm},
				synthTensor{p + "attn_k_norm.weight", []int64{int64(s.HeadDim)}, kindNorm})
		} else {
			ts = append(ts,
				synthTensor{p + "attn_qkv.weight", []int64{e, conv}, kindWeight},
				synthTensor{p + "attn_gate.weight", []int64{e, inner}, kindWeight},
				synthTensor{p + "ssm_conv1d.weight", []int64{4, conv}, kindWeight},
				synthTensor{p + "ssm_dt.bias", []int64{hv}, kindBias},
				synthTensor{p + "ssm_a", []int64{hv}, kindDecay},
				synthTensor{p + "ssm_beta.weight", []int64{e, hv}, kindWeight},
				synthTensor{p + "ssm_alpha.weight", []int64{e, hv}, kindWeight},
				synthTensor{p + "ssm_norm.weight", []int64{int64(s.DNHead)}, kindNorm},
				synthTensor{p + "ssm_out.weight", []int64{inner, e}, kindWeight})
		}
		ts = append(ts,
			synthTensor{p + "post_attention_norm.weight", []int64{e}, kindNorm},
			synthTensor{p + "ffn_gate.weight", []int64{e, f}, kindWeight},
			synthTensor{p + "ffn_up.weight", []int64{e, f}, kindWeight},
			synthTensor{p + "ffn_down.weight", []int64{f, e}, kindWeight})
	}
	for i := s.Layers; i < s.Layers+s.NextN; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		ts = append(ts,
			synthTensor{p + "nextn.eh_proj.weight", []int64{2 * e, e}, kindWeight},
			synthTensor{p + "nextn.enorm.weight", []int64{e}, kindNorm},
			synthTensor{p + "nextn.hnorm.weight", []int64{e}, kindNorm},
			synthTensor{p + "attn_norm.weight", []int64{e}, kindNorm},
			synthTensor{p + "attn_q.weight", []int64{e, 2 * q}, kindWeight},
			synthTensor{p + "attn_k.weight", []int64{e, kv}, kindWeight},
			synthTensor{p + "attn_v.weight", []int64{e, kv}, kindWeight},
			synthTensor{p + "attn_output.weight", []int64{q, e}, kindWeight},
			synthTensor{p + "attn_q_norm.weight", []int64{int64(s.HeadDim)}, kindNorm},
			synthTensor{p + "attn_k_norm.weight", []int64{int64(s.HeadDim)}, kindNorm},
			synthTensor{p + "post_attention_norm.weight", []int64{e}, kindNorm},
			synthTensor{p + "ffn_gate.weight", []int64{e, f}, kindWeight},
			synthTensor{p + "ffn_up.weight", []int64{e, f}, kindWeight},
			synthTensor{p + "ffn_down.weight", []int64{f, e}, kindWeight},
			synthTensor{p + "nextn.shared_head_norm.weight", []int64{e}, kindNorm})
	}
	return ts
}

// gemma4Tensors lists a gemma4 shape's tensors as llama.cpp names them.
func (s Shape) gemma4Tensors() []synthTensor {
	e, v, pl := int64(s.Embd), int64(s.Vocab), int64(s.PerLayer)
	ts := []synthTensor{
		{"token_embd.weight", []int64{e, v}, kindWeight},
		{"output_norm.weight", []int64{e}, kindNorm},
		{"rope_freqs.weight", []int64{int64(s.HeadDim / 2)}, kindRopeFreqs},
	}
	if pl > 0 {
		w := pl * int64(s.Layers)
		ts = append(ts,
			synthTensor{"per_layer_token_embd.weight", []int64{w, v}, kindWeight},
			synthTensor{"per_layer_model_proj.weight", []int64{e, w}, kindWeight},
			synthTensor{"per_layer_proj_norm.weight", []int64{pl}, kindNorm})
	}
	for i := range s.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		hd, f := int64(s.headDim(i)), int64(s.ffn(i))
		q, kv := int64(s.Heads)*hd, int64(s.HeadsKV)*hd
		ts = append(ts,
			synthTensor{p + "attn_norm.weight", []int64{e}, kindNorm},
			synthTensor{p + "attn_q.weight", []int64{e, q}, kindWeight},
			synthTensor{p + "attn_k.weight", []int64{e, kv}, kindWeight},
			synthTensor{p + "attn_v.weight", []int64{e, kv}, kindWeight},
			synthTensor{p + "attn_output.weight", []int64{q, e}, kindWeight},
			synthTensor{p + "attn_q_norm.weight", []int64{hd}, kindNorm},
			synthTensor{p + "attn_k_norm.weight", []int64{hd}, kindNorm},
			synthTensor{p + "post_attention_norm.weight", []int64{e}, kindNorm},
			synthTensor{p + "ffn_norm.weight", []int64{e}, kindNorm},
			synthTensor{p + "ffn_gate.weight", []int64{e, f}, kindWeight},
			synthTensor{p + "ffn_up.weight", []int64{e, f}, kindWeight},
			synthTensor{p + "ffn_down.weight", []int64{f, e}, kindWeight},
			synthTensor{p + "post_ffw_norm.weight", []int64{e}, kindNorm},
			synthTensor{p + "layer_output_scale.weight", []int64{1}, kindNorm})
		if pl > 0 {
			ts = append(ts,
				synthTensor{p + "inp_gate.weight", []int64{e, pl}, kindWeight},
				synthTensor{p + "proj.weight", []int64{pl, e}, kindWeight},
				synthTensor{p + "post_norm.weight", []int64{e}, kindNorm})
		}
	}
	return ts
}

// assistantTensors lists a Gemma 4 assistant's tensors as llama.cpp's
// converter writes them (Gemma4AssistantModel), with the sparse head's two
// tensors that the published E2B/E4B GGUFs carry.
func (s Shape) assistantTensors() []synthTensor {
	e, v, f, et := int64(s.Embd), int64(s.Vocab), int64(s.FFN), int64(s.EmbdTarget)
	ts := []synthTensor{
		{"token_embd.weight", []int64{e, v}, kindWeight},
		{"output_norm.weight", []int64{e}, kindNorm},
		{"nextn.pre_projection.weight", []int64{2 * et, e}, kindWeight},
		{"nextn.post_projection.weight", []int64{e, et}, kindWeight},
		{"rope_freqs.weight", []int64{int64(s.HeadDim / 2)}, kindRopeFreqs},
	}
	if s.Centroids > 0 {
		ts = append(ts,
			synthTensor{"masked_embd_centroids.weight", []int64{e, int64(s.Centroids)}, kindWeight},
			synthTensor{"masked_embd_ordering", []int64{v}, kindOrder})
	}
	for i := range s.Layers {
		p := fmt.Sprintf("blk.%d.", i)
		hd := int64(s.headDim(i))
		q := int64(s.Heads) * hd
		ts = append(ts,
			synthTensor{p + "attn_norm.weight", []int64{e}, kindNorm},
			synthTensor{p + "attn_q.weight", []int64{e, q}, kindWeight},
			synthTensor{p + "attn_q_norm.weight", []int64{hd}, kindNorm},
			synthTensor{p + "attn_output.weight", []int64{q, e}, kindWeight},
			synthTensor{p + "post_attention_norm.weight", []int64{e}, kindNorm},
			synthTensor{p + "ffn_norm.weight", []int64{e}, kindNorm},
			synthTensor{p + "ffn_gate.weight", []int64{e, f}, kindWeight},
			synthTensor{p + "ffn_up.weight", []int64{e, f}, kindWeight},
			synthTensor{p + "ffn_down.weight", []int64{f, e}, kindWeight},
			synthTensor{p + "post_ffw_norm.weight", []int64{e}, kindNorm},
			synthTensor{p + "layer_output_scale.weight", []int64{1}, kindNorm})
	}
	return ts
}

// eagle3Tensors lists an EAGLE-3 head's tensors as llama.cpp's converter
// writes them (LlamaModel with is_eagle3): no token_embd (the target's
// embeds the head's input tokens).
func (s Shape) eagle3Tensors() []synthTensor {
	e, f, et := int64(s.Embd), int64(s.FFN), int64(s.EmbdTarget)
	kv := int64(s.HeadsKV * s.HeadDim)
	return []synthTensor{
		{"d2t", []int64{int64(s.DraftVocab)}, kindD2T},
		{"fc.weight", []int64{3 * et, e}, kindWeight},
		{"output.weight", []int64{e, int64(s.DraftVocab)}, kindWeight},
		{"output_norm.weight", []int64{e}, kindNorm},
		{"blk.0.attn_norm.weight", []int64{e}, kindNorm},
		{"blk.0.attn_norm_2.weight", []int64{e}, kindNorm},
		{"blk.0.attn_q.weight", []int64{2 * e, e}, kindWeight},
		{"blk.0.attn_k.weight", []int64{2 * e, kv}, kindWeight},
		{"blk.0.attn_v.weight", []int64{2 * e, kv}, kindWeight},
		{"blk.0.attn_output.weight", []int64{e, e}, kindWeight},
		{"blk.0.ffn_norm.weight", []int64{e}, kindNorm},
		{"blk.0.ffn_gate.weight", []int64{e, f}, kindWeight},
		{"blk.0.ffn_up.weight", []int64{e, f}, kindWeight},
		{"blk.0.ffn_down.weight", []int64{f, e}, kindWeight},
	}
}

// proportionalRopeFreqs are Gemma 4's global-layer frequency divisors:
// 1 for the first rot/2 pairs of a head of size dim, 1e30 (no rotation)
// for the rest.
func proportionalRopeFreqs(dim, rot int) []float32 {
	out := make([]float32, dim/2)
	for i := range out {
		out[i] = 1e30
		if i < rot/2 {
			out[i] = 1
		}
	}
	return out
}

// llama3RopeFreqs returns the per-frequency divisors Llama 3.1's rope
// scaling stores in rope_freqs.weight (as convert_hf_to_gguf computes them).
func llama3RopeFreqs(base float64, dim int) []float32 {
	const factor, low, high, orig = 32.0, 1.0, 4.0, 8192.0
	out := make([]float32, dim/2)
	for i := range out {
		freq := 1 / math.Pow(base, float64(2*i)/float64(dim))
		wavelen := 2 * math.Pi / freq
		switch {
		case wavelen < orig/high:
			out[i] = 1
		case wavelen > orig/low:
			out[i] = factor
		default:
			smooth := (orig/wavelen - low) / (high - low)
			out[i] = float32(1 / ((1-smooth)/factor + smooth))
		}
	}
	return out
}

// SynthOptions tunes Synth.
type SynthOptions struct {
	Seed    uint64
	Threads int     // <= 0: every CPU
	Std     float32 // standard deviation of the weights; 0 means 0.02
	// NormStd, if positive, draws the norm weights (and Gemma 4's
	// layer_output_scale) from a normal distribution around 1 of this
	// standard deviation instead of writing ones, so that a differential
	// test sees which weight a norm uses (ones hide a norm's weight, and
	// even which norm it is). The per-head Q/K norms stay ones: behind
	// them Gemma's attention has no 1/sqrt(d) scale, and weights above 1
	// sharpen its softmax until F16 rounding of the keys dominates.
	NormStd float32
	// Exact quantizes a freshly drawn normal row for every row of every
	// matrix, as llama-quantize would quantize a float model with these
	// weights (the k-quant reference quantizers make that take minutes for
	// a 1B model). Otherwise quantized matrices are assembled from blocks
	// drawn at random from a pool of poolBlocks blocks, each quantized from
	// normal data with the same reference quantizers: the same value
	// distribution and the same bytes per weight, made in seconds.
	Exact bool
	// Vocab, when set, is the file's tokenizer instead of the synthetic
	// one, and the shape's vocabulary size becomes its token count. A
	// file with no chat template keeps the shape family's template.
	Vocab *CopiedVocab
	// Template, when set, replaces the chat template (of either vocabulary).
	Template string
}

// tokenizer returns the tokenizer.* metadata of a file of shape s made
// with o (s.Vocab already sized to o.Vocab).
func (s Shape) tokenizer(o SynthOptions) ([]gguf.KV, error) {
	var tok []gguf.KV
	if o.Vocab == nil || !o.Vocab.Template {
		// Only the family's template is wanted from a synthetic vocabulary
		// beside a copied one; build one of the smallest size that holds it.
		size, text := s.Vocab, s.Text
		if o.Vocab != nil {
			size, text = 1024, 512
		}
		v, err := newBPEVocab(s.VocabStyle, size, text)
		if err != nil {
			return nil, err
		}
		tok = v.kv()
		if o.Vocab != nil {
			tok = tok[len(tok)-1:]
		}
	}
	if o.Vocab != nil {
		tok = append(slices.Clone(o.Vocab.KV), tok...)
	}
	if o.Template != "" {
		for i := range tok {
			if tok[i].Key == "tokenizer.chat_template" {
				tok[i].Value = o.Template
			}
		}
	}
	return tok, nil
}

// poolBlocks is the most distinct quantized blocks per type in the pool.
const poolBlocks = 1 << 14

// poolSize is the number of blocks of the pool for a file that holds
// blocks blocks of the type: a power of two, an eighth of them up to
// poolBlocks (so small files do not pay for a large pool).
func poolSize(blocks int64) int {
	n := 64
	for n < poolBlocks && int64(n)*8 <= blocks {
		n *= 2
	}
	return n
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func nameHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// rowRand returns the generator of row r of the stream named by key.
func rowRand(seed, key uint64, r int) *rand.Rand {
	a := splitmix(seed ^ splitmix(key))
	return rand.New(rand.NewPCG(a, splitmix(a^uint64(r))))
}

func normalRow(rng *rand.Rand, x []float32, std float32) {
	for i := range x {
		x[i] = float32(rng.NormFloat64()) * std
	}
}

// Synth writes a model of shape s with random weights as a file of type ft
// at out: a normal distribution (std 0.02) for matrices and biases, ones
// for norms, and a synthetic byte-level BPE vocabulary of the shape's size
// with its family's special tokens and chat template. The file is the same
// for the same seed, shape and type, whatever the thread count.
func Synth(ctx context.Context, s Shape, ft FileType, out string, o SynthOptions) (Result, error) {
	var res Result
	if o.Vocab != nil {
		// The embedding and the head take the copied vocabulary's size.
		s.Vocab, s.Text = o.Vocab.Tokens, o.Vocab.Tokens
	}
	if err := s.check(); err != nil {
		return res, err
	}
	if _, err := ft.DefaultType(); err != nil {
		return res, err
	}
	tok, err := s.tokenizer(o)
	if err != nil {
		return res, err
	}
	std := o.Std
	if std == 0 {
		std = 0.02
	}
	threads := threadCount(o.Threads)

	ts := s.tensors()
	infos := make([]gguf.TensorInfo, len(ts))
	names := make([]string, len(ts))
	for i, t := range ts {
		infos[i] = gguf.TensorInfo{Name: t.name, Type: quant.F32, Dims: t.dims}
		switch t.kind {
		case kindOrder:
			infos[i].Type = quant.I32
		case kindD2T:
			infos[i].Type = quant.I64
		}
		names[i] = t.name
	}
	types, err := Plan(infos, ft, s.Arch, s.Layers+s.NextN) // llama-quantize counts the MTP blocks
	if err != nil {
		return res, err
	}
	order := Order(names)
	outInfos := make([]gguf.TensorInfo, len(order))
	for k, i := range order {
		outInfos[k] = gguf.TensorInfo{Name: ts[i].name, Type: types[i], Dims: ts[i].dims}
	}

	w, err := createFile(out, s.metadata(tok, ft, o.Seed), outInfos)
	if err != nil {
		return res, err
	}
	// A writer goroutine overlaps writing a tensor with making the next.
	pending := make(chan []byte, 1)
	werr := make(chan error, 1)
	var writeFailed atomic.Bool
	go func() {
		var err error
		for d := range pending {
			if err == nil {
				if err = w.Write(d); err != nil {
					writeFailed.Store(true)
				}
			}
		}
		werr <- err
	}()
	fail := func(err error) (Result, error) {
		close(pending)
		<-werr
		w.abort()
		return res, err
	}

	pools := map[quant.Type][]byte{}
	blocks := map[quant.Type]int64{}
	for _, info := range outInfos {
		if size, err := info.Size(); err == nil {
			blocks[info.Type] += size / int64(info.Type.TypeSize())
		}
	}
	res.Types = map[quant.Type]int{}
	for k, i := range order {
		t, info := ts[i], outInfos[k]
		size, err := info.Size()
		if err != nil {
			return fail(err)
		}
		data := make([]byte, size)
		n := int(t.dims[0])
		switch t.kind {
		case kindNorm:
			var rng *rand.Rand
			if o.NormStd > 0 && !strings.HasSuffix(t.name, "attn_q_norm.weight") && !strings.HasSuffix(t.name, "attn_k_norm.weight") {
				rng = rowRand(o.Seed, nameHash(t.name), 0)
			}
			for j := 0; j < len(data); j += 4 {
				v := float32(1)
				if rng != nil {
					v += float32(rng.NormFloat64()) * o.NormStd
				}
				binary.LittleEndian.PutUint32(data[j:], math.Float32bits(v))
			}
		case kindSSMA:
			for j := 0; j < len(data); j += 4 {
				binary.LittleEndian.PutUint32(data[j:], math.Float32bits(-float32(1+(j/4)%16)))
			}
		case kindDecay:
			rng := rowRand(o.Seed, nameHash(t.name), 0)
			for j := 0; j < len(data); j += 4 {
				a := -float32(math.Exp(rng.NormFloat64() * 0.5))
				binary.LittleEndian.PutUint32(data[j:], math.Float32bits(a))
			}
		case kindOrder:
			perm := rowRand(o.Seed, nameHash(t.name), 0).Perm(n)
			for j, v := range perm {
				binary.LittleEndian.PutUint32(data[4*j:], uint32(v))
			}
		case kindD2T:
			// n distinct target ids, ascending (as a converter writes the
			// draft vocabulary's map), drawn from the target's s.Vocab.
			ids := rowRand(o.Seed, nameHash(t.name), 0).Perm(s.Vocab)[:n]
			slices.Sort(ids)
			for j, v := range ids {
				binary.LittleEndian.PutUint64(data[8*j:], uint64(v))
			}
		case kindRopeFreqs:
			freqs := llama3RopeFreqs(float64(s.RopeBase), s.HeadDim)
			if s.Arch == "gemma4" || s.Arch == "gemma4-assistant" {
				freqs = proportionalRopeFreqs(s.HeadDim, s.RopeDim)
			}
			for j, f := range freqs {
				binary.LittleEndian.PutUint32(data[4*j:], math.Float32bits(f))
			}
		default:
			key := nameHash(t.name)
			bs := info.Type.BlockSize()
			if o.Exact || bs == 1 {
				err = exactRows(ctx, threads, o.Seed, key, std, info.Type, data, n)
			} else {
				pool, ok := pools[info.Type]
				if !ok {
					if pool, err = makePool(ctx, threads, o.Seed, std, info.Type, poolSize(blocks[info.Type])); err != nil {
						return fail(err)
					}
					pools[info.Type] = pool
				}
				err = poolRows(ctx, threads, o.Seed, key, pool, info.Type, data, n)
			}
			if err != nil {
				return fail(fmt.Errorf("convert: tensor %q: %w", t.name, err))
			}
		}
		if writeFailed.Load() {
			break
		}
		pending <- data
		res.Types[info.Type]++
		res.Tensors++
	}
	close(pending)
	if err := <-werr; err != nil {
		w.abort()
		return res, err
	}
	if res.Bytes, err = w.finish(); err != nil {
		return res, err
	}
	return res, nil
}

// exactRows fills data with rows of n normal values quantized to t.
func exactRows(ctx context.Context, threads int, seed, key uint64, std float32, t quant.Type, data []byte, n int) error {
	rs, err := quant.RowSize(t, n)
	if err != nil {
		return err
	}
	return parallelRows(ctx, threads, len(data)/rs, func(r0, r1 int) error {
		x := make([]float32, n)
		for r := r0; r < r1; r++ {
			normalRow(rowRand(seed, key, r), x, std)
			if err := quant.QuantizeRow(t, x, data[r*rs:(r+1)*rs]); err != nil {
				return err
			}
		}
		return nil
	})
}

// makePool quantizes n blocks of normal values to t.
func makePool(ctx context.Context, threads int, seed uint64, std float32, t quant.Type, n int) ([]byte, error) {
	pool := make([]byte, n*t.TypeSize())
	key := nameHash("pool:" + t.String())
	err := exactRows(ctx, threads, seed, key, std, t, pool, t.BlockSize())
	return pool, err
}

// poolRows fills data with rows of n elements of type t made of blocks
// picked at random from pool.
func poolRows(ctx context.Context, threads int, seed, key uint64, pool []byte, t quant.Type, data []byte, n int) error {
	rs, err := quant.RowSize(t, n)
	if err != nil {
		return err
	}
	ts := t.TypeSize()
	mask := uint64(len(pool)/ts - 1) // the pool holds a power of two blocks
	return parallelRows(ctx, threads, len(data)/rs, func(r0, r1 int) error {
		for r := r0; r < r1; r++ {
			rng := rowRand(seed, key, r)
			row := data[r*rs : (r+1)*rs]
			var bits uint64
			for b := range rs / ts {
				if b%4 == 0 {
					bits = rng.Uint64()
				}
				j := int(bits & mask)
				bits >>= 16
				copy(row[b*ts:(b+1)*ts], pool[j*ts:(j+1)*ts])
			}
		}
		return nil
	})
}

// metadata returns the file's metadata, in the order llama.cpp's converter
// and quantizer write it, with tok as its tokenizer.* keys.
func (s Shape) metadata(tok []gguf.KV, ft FileType, seed uint64) *gguf.Builder {
	b := gguf.NewBuilder()
	a := s.Arch + "."
	b.Set("general.architecture", s.Arch)
	b.Set("general.type", "model")
	b.Set("general.name", "synth "+s.Name)
	b.Set("general.description", fmt.Sprintf("random weights in the shape of %s, made by geist synth (seed %d)", s.Name, seed))
	if s.Arch == "gemma4-assistant" || s.Arch == "eagle3" {
		s.drafterMetadata(b)
		for _, kv := range tok {
			b.Set(kv.Key, kv.Value)
		}
		b.Set("general.quantization_version", uint32(QuantizationVersion))
		b.Set("general.file_type", uint32(ft))
		return b
	}
	b.Set(a+"block_count", uint32(s.Layers+s.NextN))
	if s.NextN > 0 {
		b.Set(a+"nextn_predict_layers", uint32(s.NextN))
	}
	b.Set(a+"context_length", uint32(s.Ctx))
	b.Set(a+"embedding_length", uint32(s.Embd))
	if s.Arch == "gemma4" {
		ffn := make([]int32, s.Layers)
		for i := range ffn {
			ffn[i] = int32(s.ffn(i))
		}
		b.Set(a+"feed_forward_length", ffn)
	} else {
		b.Set(a+"feed_forward_length", uint32(s.FFN))
	}
	b.Set(a+"attention.head_count", uint32(s.Heads))
	if s.Arch == "gemma4" {
		kv, pat := make([]int32, s.Layers), make([]bool, s.Layers)
		for i := range kv {
			kv[i], pat[i] = int32(s.HeadsKV), s.swa(i)
		}
		b.Set(a+"attention.head_count_kv", kv)
		b.Set(a+"attention.key_length", uint32(s.HeadDim))
		b.Set(a+"attention.value_length", uint32(s.HeadDim))
		b.Set(a+"rope.dimension_count", uint32(s.HeadDim))
		b.Set(a+"attention.key_length_swa", uint32(s.HeadDimSWA))
		b.Set(a+"attention.value_length_swa", uint32(s.HeadDimSWA))
		b.Set(a+"rope.dimension_count_swa", uint32(s.HeadDimSWA))
		b.Set(a+"rope.freq_base_swa", float32(10000))
		b.Set(a+"attention.sliding_window", uint32(s.Window))
		b.Set(a+"attention.sliding_window_pattern", pat)
		b.Set(a+"attention.shared_kv_layers", uint32(s.SharedKV))
		b.Set(a+"embedding_length_per_layer_input", uint32(s.PerLayer))
		b.Set(a+"final_logit_softcapping", float32(30))
		b.Set(a+"vocab_size", uint32(s.Vocab))
	} else if s.Arch == "granitehybrid" {
		kv := make([]int32, s.Layers)
		for i := range kv {
			if s.attn(i) {
				kv[i] = int32(s.HeadsKV)
			}
		}
		b.Set(a+"attention.head_count_kv", kv)
		b.Set(a+"ssm.conv_kernel", uint32(s.SSMConv))
		b.Set(a+"ssm.state_size", uint32(s.SSMState))
		b.Set(a+"ssm.group_count", uint32(s.SSMGroups))
		b.Set(a+"ssm.inner_size", uint32(s.SSMInner))
		b.Set(a+"ssm.time_step_rank", uint32(s.SSMHeads))
		b.Set(a+"attention.scale", float32(1.0/128))
		b.Set(a+"embedding_scale", float32(12))
		b.Set(a+"residual_scale", float32(0.22))
		b.Set(a+"logit_scale", float32(6))
		b.Set(a+"expert_count", uint32(0))
		b.Set(a+"expert_used_count", uint32(0))
		b.Set(a+"rope.scaling.finetuned", false)
		b.Set(a+"vocab_size", uint32(s.Vocab))
	} else if s.Arch == "lfm2" {
		kv := make([]int32, s.Layers)
		for i := range kv {
			if s.attn(i) {
				kv[i] = int32(s.HeadsKV)
			}
		}
		b.Set(a+"attention.head_count_kv", kv)
		b.Set(a+"shortconv.l_cache", uint32(s.LCache))
		b.Set(a+"vocab_size", uint32(s.Vocab))
	} else {
		b.Set(a+"attention.head_count_kv", uint32(s.HeadsKV))
	}
	if s.Arch == "qwen35" {
		b.Set(a+"attention.key_length", uint32(s.HeadDim))
		b.Set(a+"attention.value_length", uint32(s.HeadDim))
		b.Set(a+"rope.dimension_count", uint32(s.RopeDim))
		pairs := s.RopeDim / 2 // interleaved sections covering every pair
		b.Set(a+"rope.dimension_sections", []int32{int32((pairs + 2) / 3), int32((pairs + 1) / 3), int32(pairs / 3), 0})
		b.Set(a+"ssm.conv_kernel", uint32(4))
		b.Set(a+"ssm.state_size", uint32(s.DNHead))
		b.Set(a+"ssm.group_count", uint32(s.DNKHeads))
		b.Set(a+"ssm.time_step_rank", uint32(s.DNVHeads))
		b.Set(a+"ssm.inner_size", uint32(s.DNVHeads*s.DNHead))
		b.Set(a+"full_attention_interval", uint32(s.Interval))
		b.Set(a+"vocab_size", uint32(s.Vocab))
	}
	if s.Arch == "gemma3" {
		b.Set(a+"attention.sliding_window", uint32(s.Window))
	}
	if s.Arch == "qwen3moe" {
		b.Set(a+"expert_count", uint32(s.Experts))
		b.Set(a+"expert_used_count", uint32(s.ExpertsUsed))
		b.Set(a+"expert_feed_forward_length", uint32(s.FFNExp))
	}
	b.Set(a+"rope.freq_base", s.RopeBase)
	b.Set(a+"attention.layer_norm_rms_epsilon", s.NormEps)
	if s.Heads*s.HeadDim != s.Embd && s.Arch != "gemma4" && s.Arch != "qwen35" {
		b.Set(a+"attention.key_length", uint32(s.HeadDim))
		b.Set(a+"attention.value_length", uint32(s.HeadDim))
	}
	if s.Arch == "llama" {
		b.Set(a+"attention.key_length", uint32(s.HeadDim))
		b.Set(a+"attention.value_length", uint32(s.HeadDim))
		b.Set(a+"vocab_size", uint32(s.Vocab))
		b.Set(a+"rope.dimension_count", uint32(s.HeadDim))
	}
	for _, kv := range tok {
		b.Set(kv.Key, kv.Value)
	}
	b.Set("general.quantization_version", uint32(QuantizationVersion))
	b.Set("general.file_type", uint32(ft))
	return b
}

// drafterMetadata writes a drafter's own keys, in the order llama.cpp's
// converter writes them (Gemma4AssistantModel; LlamaModel with is_eagle3).
func (s Shape) drafterMetadata(b *gguf.Builder) {
	a := s.Arch + "."
	b.Set(a+"context_length", uint32(s.Ctx))
	b.Set(a+"embedding_length", uint32(s.Embd))
	b.Set(a+"block_count", uint32(s.Layers))
	b.Set(a+"feed_forward_length", uint32(s.FFN))
	b.Set(a+"attention.head_count", uint32(s.Heads))
	if s.Arch == "eagle3" {
		b.Set(a+"attention.head_count_kv", uint32(s.HeadsKV))
		b.Set(a+"rope.freq_base", s.RopeBase)
		b.Set(a+"attention.layer_norm_rms_epsilon", s.NormEps)
		b.Set(a+"vocab_size", uint32(s.Vocab))
		b.Set(a+"rope.dimension_count", uint32(s.HeadDim))
		ls := make([]int32, len(s.TargetLayers))
		for i, l := range s.TargetLayers {
			ls[i] = int32(l)
		}
		b.Set(a+"target_layers", ls)
		b.Set(a+"target_hidden_size", uint32(s.EmbdTarget))
		b.Set(a+"norm_before_residual", false)
		b.Set(a+"norm_before_fc", false)
		return
	}
	kv, pat := make([]int32, s.Layers), make([]bool, s.Layers)
	for i := range kv {
		kv[i], pat[i] = int32(s.HeadsKV), s.swa(i)
	}
	b.Set(a+"attention.head_count_kv", kv)
	b.Set(a+"attention.layer_norm_rms_epsilon", s.NormEps)
	b.Set(a+"rope.freq_base", s.RopeBase)
	b.Set(a+"attention.key_length", uint32(s.HeadDim))
	b.Set(a+"attention.value_length", uint32(s.HeadDim))
	b.Set(a+"rope.dimension_count", uint32(s.HeadDim))
	b.Set(a+"vocab_size", uint32(s.Vocab))
	b.Set(a+"attention.key_length_swa", uint32(s.HeadDimSWA))
	b.Set(a+"attention.value_length_swa", uint32(s.HeadDimSWA))
	b.Set(a+"rope.dimension_count_swa", uint32(s.HeadDimSWA))
	b.Set(a+"rope.freq_base_swa", float32(10000))
	b.Set(a+"attention.sliding_window", uint32(s.Window))
	b.Set(a+"attention.sliding_window_pattern", pat)
	b.Set(a+"attention.shared_kv_layers", uint32(0))
	b.Set(a+"embedding_length_per_layer_input", uint32(0))
	b.Set(a+"embedding_length_out", uint32(s.EmbdTarget))
	b.Set(a+"nextn_predict_layers", uint32(s.Layers))
}
