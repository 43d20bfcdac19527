package model

import (
	"fmt"
	"math"

	"github.com/geisten/geist/engine/gguf"
)

// The architectures geist runs share one forward pass (forward.go) made
// of blocks: an attention block (grouped-query, optional Q/K norms, rope
// on some dimensions of some layers, a sliding window on some layers), a
// feed-forward block (SiLU or GELU gated, or a mixture of experts), RMS
// norms before and optionally after each branch, scales on the embedding,
// the branches and the logits. A family is a description: its defaults
// and the reader of its own metadata keys, which sets the switches of the
// blocks in Config. Which tensors a layer holds (fused or separate Q/K/V
// and gate/up, a router and experts) is read from the file itself.

// archInfo describes one family.
type archInfo struct {
	neox     bool // rope pairs are split halves (NEOX) instead of adjacent
	qkvBias  bool
	qkNorm   bool
	ropeBase float32
	conv     bool   // layers with head_count_kv 0 are short convolutions
	outNorm  string // the final norm's tensor (default output_norm)
	ffnNorm  string // the feed-forward norm's tensor in a layer (default ffn_norm.weight)
	gemma4   bool   // per-layer head counts and feed-forward widths
	ssm      bool   // layers with head_count_kv 0 are Mamba-2 layers (mamba2.go)
	// read reads the family's own keys into c after the common ones.
	read func(f *gguf.File, c *Config) error
}

var archs = map[string]archInfo{
	"llama":    {neox: false, ropeBase: 10000},
	"qwen2":    {neox: true, qkvBias: true, ropeBase: 1e6},
	"qwen3":    {neox: true, qkNorm: true, ropeBase: 1e6},
	"lfm2":     {neox: true, qkNorm: true, ropeBase: 1e6, conv: true, outNorm: "token_embd_norm.weight"},
	"gemma4":   {neox: true, qkNorm: true, ropeBase: 1e6, gemma4: true, read: readGemma4},
	"gemma3":   {neox: true, qkNorm: true, ropeBase: 1e6, read: readGemma3},
	"qwen3moe": {neox: true, qkNorm: true, ropeBase: 1e6, read: readMoE},
	"phi3":     {neox: true, ropeBase: 10000, read: readPhi3},
	"granite":  {neox: false, ropeBase: 10000, read: readGranite},
	"smollm3":  {neox: false, ropeBase: 10000, read: readSmolLM3},
	"qwen35":   {neox: true, qkNorm: true, ropeBase: 1e7, ffnNorm: "post_attention_norm.weight", read: readQwen35},
	// Granite 4.0-H: Mamba-2 and attention layers (mamba2.go).
	"granitehybrid": {neox: false, ropeBase: 10000, ssm: true, read: readGraniteHybrid},
}

// SupportedArchs names the architectures geist runs.
func SupportedArchs() []string {
	return []string{"llama", "qwen2", "qwen3", "lfm2", "gemma4", "gemma3", "qwen3moe", "phi3", "granite", "smollm3", "qwen35", "granitehybrid"}
}

// Variant holds the switches of the shared blocks that only some families
// set; the zero value is the llama pass.
type Variant struct {
	ResidScale  float32 // each branch's output × this before its residual add (granite; 0: 1)
	LogitScale  float32 // logits ÷ this (granite; 0: 1)
	NoRope      []bool  // layers whose queries and keys are not rotated (smollm3); nil: none
	RopeAttn    float32 // cos and sin × this (phi3's LongRoPE attention factor; 0: 1)
	RopeCtxOrig int     // a state of a longer context takes the long rope factors (phi3)
	// RopeScaleSWA is the frequency scale of the local layers' rope
	// (gemma3: 1 whatever the global layers' linear scaling).
	RopeScaleSWA float32
	// AttnGate: attn_q holds per head its queries then an output gate;
	// the attention output is × sigmoid(gate) (qwen35).
	AttnGate bool
	MoE
	SSM // the Mamba-2 layers' shape (granitehybrid; mamba2.go)
}

// MoE is the shape of a mixture-of-experts feed-forward block (qwen3moe):
// a router scores Experts experts per token, the ExpertsUsed best run
// (SiLU-gated, FFNExp wide) and their outputs are summed, weighted by the
// router's softmax renormalized over the chosen ones.
type MoE struct {
	Experts     int
	ExpertsUsed int
	FFNExp      int
}

// ropeOff reports whether layer l leaves queries and keys unrotated.
func (c *Config) ropeOff(l int) bool { return c.NoRope != nil && c.NoRope[l] }

// readGranite: Granite 3.x's multipliers. llama.cpp requires the logit
// scale; the others default to no scaling.
func readGranite(f *gguf.File, c *Config) (err error) {
	p := c.Arch + "."
	if _, ok := f.Value(p + "logit_scale"); !ok {
		return fmt.Errorf("model: missing metadata %q", p+"logit_scale")
	}
	for _, k := range []struct {
		key string
		v   *float32
	}{
		{"logit_scale", &c.LogitScale},
		{"residual_scale", &c.ResidScale},
		{"embedding_scale", &c.EmbdScale},
		{"attention.scale", &c.AttnScale},
	} {
		if *k.v, err = metaFloat(f, p+k.key, 0); err != nil {
			return err
		}
		if *k.v < 0 {
			return fmt.Errorf("model: metadata %q = %v must not be negative", p+k.key, *k.v)
		}
	}
	if c.LogitScale == 0 {
		return fmt.Errorf("model: metadata %q must not be 0", p+"logit_scale")
	}
	return nil
}

// readSmolLM3: every fourth layer has no rope (llama.cpp's constant
// n_no_rope_layer_step; the file has no key for it).
func readSmolLM3(f *gguf.File, c *Config) error {
	const step = 4
	c.NoRope = make([]bool, c.NLayer)
	for l := range c.NoRope {
		c.NoRope[l] = (l+1)%step == 0
	}
	return nil
}

// readPhi3: LongRoPE's attention factor and original context. llama.cpp
// ignores phi3's sliding window ("Phi SWA is currently disabled"), and so
// does geist.
func readPhi3(f *gguf.File, c *Config) (err error) {
	p := c.Arch + "."
	if c.RopeAttn, err = metaFloat(f, p+"rope.scaling.attn_factor", 0); err != nil {
		return err
	}
	if c.RopeAttn < 0 {
		return fmt.Errorf("model: rope attention factor %v must not be negative", c.RopeAttn)
	}
	c.RopeCtxOrig, err = metaInt(f, p+"rope.scaling.original_context_length", 0, false)
	return err
}

// readGemma3: local layers with a sliding window (every sixth layer is
// global unless the file says otherwise), their own rope base (10000
// unless rope.freq_base_swa) and no rope scaling, Q/K norms, sandwich
// norms, GELU, the embedding × sqrt(width) and the query scale of
// llama.cpp: 1/sqrt(head size), except for the 27B (62 layers), whose
// queries are scaled by 1/sqrt(width/heads).
func readGemma3(f *gguf.File, c *Config) (err error) {
	p := c.Arch + "."
	g := &c.Gemma
	g.HeadDimSWA, g.RopeDimSWA = c.HeadDim, c.RopeDim
	if g.RopeBaseSWA, err = metaFloat(f, p+"rope.freq_base_swa", 10000); err != nil {
		return err
	}
	if !(g.RopeBaseSWA > 0) {
		return fmt.Errorf("model: local rope base %v must be positive", g.RopeBaseSWA)
	}
	c.RopeScaleSWA = 1
	if g.Window, err = metaPositive(f, p+"attention.sliding_window", 0, false); err != nil {
		return err
	}
	if g.Window > 0 {
		period, err := metaInt(f, p+"attention.sliding_window_pattern", 6, false)
		if err != nil {
			return err
		}
		g.SWA = make([]bool, c.NLayer)
		for l := range g.SWA {
			g.SWA[l] = period > 0 && l%period < period-1
		}
	}
	if g.Softcap, err = metaFloat(f, p+"final_logit_softcapping", 0); err != nil {
		return err
	}
	if g.Softcap < 0 || (g.Softcap > 0 && g.Window > 0) {
		// llama.cpp caps the logits only without a window (its non-iswa pass).
		g.Softcap = 0
	}
	g.AttnScale = float32(1 / math.Sqrt(float64(c.HeadDim)))
	if c.NLayer == 62 {
		g.AttnScale = float32(1 / math.Sqrt(float64(c.NEmbd/c.NHead)))
	}
	g.EmbdScale = float32(math.Sqrt(float64(c.NEmbd)))
	g.PostNorms, g.GELU = true, true
	return nil
}

// readMoE: the experts' count, how many run per token and their width.
func readMoE(f *gguf.File, c *Config) (err error) {
	p := c.Arch + "."
	if c.Experts, err = metaInt(f, p+"expert_count", 0, true); err != nil {
		return err
	}
	if c.ExpertsUsed, err = metaInt(f, p+"expert_used_count", 0, true); err != nil {
		return err
	}
	if c.FFNExp, err = metaInt(f, p+"expert_feed_forward_length", 0, true); err != nil {
		return err
	}
	if c.Experts <= 0 || c.Experts > 1024 || c.ExpertsUsed <= 0 || c.ExpertsUsed > c.Experts || c.FFNExp <= 0 {
		return fmt.Errorf("model: %d experts, %d used per token, width %d: want 0 < used <= experts <= 1024 and a positive width", c.Experts, c.ExpertsUsed, c.FFNExp)
	}
	return nil
}
