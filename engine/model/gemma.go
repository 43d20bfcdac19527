package model

import (
	"fmt"
	"math"
	"sync"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/neon/ggml"
	"github.com/geisten/geist/quant"
)

// Gemma 4 (llama.cpp's gemma4): the parts of the forward pass that the
// other families do not have. The description here is read from the file
// as llama.cpp's converter writes it; the pass itself is the shared one
// (forward.go) with these switches.

// perLayerInts reads a key that is either one integer or one per layer;
// it returns the largest value and the per-layer values (nil for a single
// integer).
func perLayerInts(f *gguf.File, key string, n int) (int, []int, error) {
	v, ok := f.Value(key)
	if !ok {
		return 0, nil, fmt.Errorf("model: missing metadata %q", key)
	}
	if x, ok := gguf.AsInt(v); ok {
		if x <= 0 || x > math.MaxInt32 {
			return 0, nil, fmt.Errorf("model: metadata %q = %d is out of range", key, x)
		}
		return int(x), nil, nil
	}
	arr, ok := intArray(v)
	if !ok {
		return 0, nil, fmt.Errorf("model: metadata %q has type %T, want an integer or one per layer", key, v)
	}
	if len(arr) != n {
		return 0, nil, fmt.Errorf("model: metadata %q has %d entries for %d layers", key, len(arr), n)
	}
	out, most := make([]int, n), 0
	for l, x := range arr {
		if x <= 0 || x > math.MaxInt32 {
			return 0, nil, fmt.Errorf("model: metadata %q of layer %d is %d", key, l, x)
		}
		out[l] = int(x)
		most = max(most, int(x))
	}
	return most, out, nil
}

// intArray returns a metadata array of integers as int64s.
func intArray(v any) ([]int64, bool) {
	var arr []int64
	switch a := v.(type) {
	case []int32:
		for _, x := range a {
			arr = append(arr, int64(x))
		}
	case []uint32:
		for _, x := range a {
			arr = append(arr, int64(x))
		}
	case []int64:
		arr = a
	default:
		return nil, false
	}
	return arr, true
}

// readGemma4 reads Gemma 4's keys into c (whose common keys ReadConfig
// has read: key_length is the global layers' head size).
func readGemma4(f *gguf.File, c *Config) error {
	p := c.Arch + "."
	var err error
	g := &c.Gemma
	if g.HeadDimSWA, err = metaInt(f, p+"attention.key_length_swa", c.HeadDim, false); err != nil {
		return err
	}
	if g.RopeDimSWA, err = metaInt(f, p+"rope.dimension_count_swa", g.HeadDimSWA, false); err != nil {
		return err
	}
	if g.RopeBaseSWA, err = metaFloat(f, p+"rope.freq_base_swa", 10000); err != nil {
		return err
	}
	if g.Window, err = metaPositive(f, p+"attention.sliding_window", 0, true); err != nil {
		return err
	}
	switch {
	case g.HeadDimSWA <= 0 || g.HeadDimSWA%2 != 0:
		return fmt.Errorf("model: local head size %d must be positive and even", g.HeadDimSWA)
	case g.RopeDimSWA <= 0 || g.RopeDimSWA > g.HeadDimSWA || g.RopeDimSWA%2 != 0:
		return fmt.Errorf("model: local rope dimension %d must be even and at most the head size %d", g.RopeDimSWA, g.HeadDimSWA)
	case !(g.RopeBaseSWA > 0):
		return fmt.Errorf("model: local rope base %v must be positive", g.RopeBaseSWA)
	case g.Window <= 0:
		return fmt.Errorf("model: sliding window %d must be positive", g.Window)
	case c.HeadDimV != c.HeadDim:
		return fmt.Errorf("model: gemma4 key and value head sizes differ (%d, %d)", c.HeadDim, c.HeadDimV)
	}
	g.SWA = make([]bool, c.NLayer)
	switch v, _ := f.Value(p + "attention.sliding_window_pattern"); pat := v.(type) {
	case []bool:
		if len(pat) != c.NLayer {
			return fmt.Errorf("model: sliding_window_pattern has %d entries for %d layers", len(pat), c.NLayer)
		}
		copy(g.SWA, pat)
	default:
		// A period (llama.cpp's default 5 for gemma4): the last layer of
		// every period is global.
		period, err := metaInt(f, p+"attention.sliding_window_pattern", 5, false)
		if err != nil {
			return err
		}
		for l := range g.SWA {
			g.SWA[l] = period > 0 && l%period < period-1
		}
	}
	shared, err := metaInt(f, p+"attention.shared_kv_layers", 0, false)
	if err != nil {
		return err
	}
	if shared > 0 {
		// llama.cpp's reuse: a layer past the first n-shared reads the
		// keys and values of the last own-KV layer of its kind.
		first := c.NLayer - shared
		g.KVFrom = make([]int, c.NLayer)
		for l := range g.KVFrom {
			g.KVFrom[l] = l
			if l >= first {
				src := first - 1
				if g.SWA[l] {
					src = first - 2
				}
				if src < 0 || g.SWA[src] != g.SWA[l] {
					return fmt.Errorf("model: shared_kv_layers %d: layer %d has no earlier layer of its kind to read", shared, l)
				}
				g.KVFrom[l] = src
			}
		}
	}
	if g.PerLayerEmbd, err = metaInt(f, p+"embedding_length_per_layer_input", 0, false); err != nil {
		return err
	}
	if g.Softcap, err = metaFloat(f, p+"final_logit_softcapping", 0); err != nil {
		return err
	}
	if g.Softcap < 0 {
		return fmt.Errorf("model: final_logit_softcapping %v must not be negative", g.Softcap)
	}
	g.AttnScale = 1
	g.EmbdScale = float32(math.Sqrt(float64(c.NEmbd)))
	g.PostNorms, g.GELU, g.VNorm = true, true, true
	return nil
}

// gemmaLayer loads the tensors a Gemma 4 layer adds.
func (l loader) gemmaLayer(L *Layer, p string, c *Config) (err error) {
	if L.PostAttnNorm, err = l.vector(p+"post_attention_norm.weight", c.NEmbd); err != nil {
		return err
	}
	if L.PostFFNNorm, err = l.vector(p+"post_ffw_norm.weight", c.NEmbd); err != nil {
		return err
	}
	if _, ok := l.f.Tensor(p + "layer_output_scale.weight"); ok {
		s, err := l.vector(p+"layer_output_scale.weight", 1)
		if err != nil {
			return err
		}
		L.OutScale = s[0]
	}
	if c.PerLayerEmbd > 0 {
		if L.PLEGate, err = l.matrix(p+"inp_gate.weight", c.PerLayerEmbd, c.NEmbd); err != nil {
			return err
		}
		if L.PLEProj, err = l.matrix(p+"proj.weight", c.NEmbd, c.PerLayerEmbd); err != nil {
			return err
		}
		if L.PLENorm, err = l.vector(p+"post_norm.weight", c.NEmbd); err != nil {
			return err
		}
	}
	return nil
}

// loadPerLayerEmbd loads E2B/E4B's per-layer embedding tables.
func (m *Model) loadPerLayerEmbd(l loader, c *Config) (err error) {
	w := c.NLayer * c.PerLayerEmbd
	if m.PLETokEmbd, err = l.matrix("per_layer_token_embd.weight", c.NVocab, w); err != nil {
		return err
	}
	if m.PLEModel, err = l.matrix("per_layer_model_proj.weight", w, c.NEmbd); err != nil {
		return err
	}
	m.PLEModelN, err = l.vector("per_layer_proj_norm.weight", c.PerLayerEmbd)
	return err
}

// The GELU of ggml's CPU backend (GGML_GELU_FP16): the tanh approximation
// looked up in a table over half-precision inputs, 0 below -10 and the
// identity above 10.
var (
	geluOnce  sync.Once
	geluTable []uint16
)

func geluF32(x float32) float32 {
	const sqrt2OverPi, coefA = 0.79788456080286535587989211986876, 0.044715
	return 0.5 * x * float32(1+math.Tanh(float64(float32(sqrt2OverPi)*x*(1+float32(coefA)*x*x))))
}

func initGELU() {
	geluTable = make([]uint16, 1<<16)
	for i := range geluTable {
		geluTable[i] = ggml.FP32ToFP16(geluF32(ggml.FP16ToFP32(uint16(i))))
	}
}

// GELUMul computes gate[i] = gelu(gate[i]) * up[i] as ggml_vec_geglu_f32.
func GELUMul(gate, up []float32) {
	geluOnce.Do(initGELU)
	_ = up[len(gate)-1]
	for i, x := range gate {
		switch {
		case x <= -10:
			gate[i] = 0
		case x >= 10:
			gate[i] = x * up[i]
		default:
			gate[i] = ggml.FP16ToFP32(geluTable[ggml.FP32ToFP16(x)]) * up[i]
		}
	}
}

// GELU applies gelu in place (ggml_vec_gelu_f32).
func GELU(x []float32) {
	geluOnce.Do(initGELU)
	for i, v := range x {
		switch {
		case v <= -10:
			x[i] = 0
		case v >= 10:
		default:
			x[i] = ggml.FP16ToFP32(geluTable[ggml.FP32ToFP16(v)])
		}
	}
}

// softcap maps logits to c·tanh(logits/c), as ggml's scale, tanh, scale.
func softcap(x []float32, c float32) {
	inv := 1 / c
	for i, v := range x {
		x[i] = float32(math.Tanh(float64(v*inv))) * c
	}
}

// perLayerBatch computes the per-layer embedding inputs of the batch
// (E2B/E4B) into s.ple [n][NLayer][PerLayerEmbd]: the normed projection of
// each token's scaled embedding × 1/sqrt(NEmbd), plus its row of
// per_layer_token_embd × sqrt(PerLayerEmbd), × 1/sqrt 2 (llama.cpp's
// project_per_layer_inputs).
func (s *State) perLayerBatch(tokens []int32) {
	m, c := s.m, &s.m.Config
	n, w, E := len(tokens), c.PerLayerEmbd, c.NEmbd
	W := c.NLayer * w
	s.mul(s.x, n, product{w: m.PLEModel, out: s.ple})
	ps := float32(1 / math.Sqrt(float64(E)))
	te := float32(math.Sqrt(float64(w)))
	is := float32(1 / math.Sqrt(2))
	for i, t := range tokens {
		quant.DequantizeRow(m.PLETokEmbd.Type, m.PLETokEmbd.Row(int(t), s.pleRow), s.pleTok)
		out := s.ple[i*W : (i+1)*W]
		for j := range out {
			out[j] *= ps
		}
		for l := range c.NLayer {
			o := out[l*w : (l+1)*w]
			RMSNorm(o, o, m.PLEModelN, c.NormEps)
			for j := range o {
				o[j] = (o[j] + s.pleTok[l*w+j]*te) * is
			}
		}
	}
}

// perLayerBlock adds layer l's per-layer embedding branch to the residual
// stream of the n batch tokens: proj(gelu(gate·x) ⊙ input), normed.
func (s *State) perLayerBlock(l, n int) {
	c, L := &s.m.Config, &s.m.Layers[l]
	w, E, W := c.PerLayerEmbd, c.NEmbd, c.NLayer*c.PerLayerEmbd
	s.mul(s.x, n, product{w: L.PLEGate, out: s.pleG})
	for i := 0; i < n; i++ {
		g := s.pleG[i*w : (i+1)*w]
		GELU(g)
		in := s.ple[i*W+l*w : i*W+(l+1)*w]
		for j := range g {
			g[j] *= in[j]
		}
	}
	s.mul(s.pleG, n, product{w: L.PLEProj, out: s.proj})
	for i := 0; i < n; i++ {
		RMSNorm(s.proj[i*E:(i+1)*E], s.proj[i*E:(i+1)*E], L.PLENorm, c.NormEps)
	}
	addTo(s.x[:n*E], s.proj[:n*E])
}
