package convert

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/sample"
	"github.com/geisten/geist/engine/tokenizer"
	"github.com/geisten/geist/quant"
)

// Small shapes of the two families, for speed: the qwen one has a width
// (128) that 256-element k-quant blocks do not fit, like Qwen2.5's 896.
var (
	testLlama = Shape{
		Name: "test-llama", Arch: "llama", Layers: 4, Embd: 256, Heads: 4, HeadsKV: 2, HeadDim: 64,
		FFN: 512, Vocab: 1536, Text: 1500, Ctx: 4096, RopeBase: 500000, NormEps: 1e-5,
		Tied: true, Llama3Rope: true, VocabStyle: Llama3,
	}
	testLFM2 = Shape{
		Name: "test-lfm2", Arch: "lfm2", Layers: 3, Embd: 256, Heads: 4, HeadsKV: 2, HeadDim: 64,
		FFN: 512, Vocab: 1024, Text: 990, Ctx: 2048, RopeBase: 1e6, NormEps: 1e-5,
		Tied: true, VocabStyle: LFM2, AttnLayers: []int{1}, LCache: 3,
	}
	// testGranite4H: Mamba-2 layers 0, 1 and 3 (two groups) beside
	// attention layers 2 and 4.
	testGranite4H = Shape{
		Name: "test-granite4h", Arch: "granitehybrid", Layers: 5, Embd: 256, Heads: 4, HeadsKV: 2, HeadDim: 64,
		FFN: 512, Vocab: 1024, Text: 990, Ctx: 1 << 20, RopeBase: 10000, NormEps: 1e-5,
		Tied: true, VocabStyle: Qwen2, AttnLayers: []int{2, 4},
		SSMInner: 512, SSMState: 64, SSMHeads: 8, SSMGroups: 2, SSMConv: 4,
	}
	// testGemma4 has per-layer embeddings and layers 5-9 reading the keys
	// and values of layers 3 (local) and 4 (global) with double-wide FFNs.
	testGemma4 = Shape{
		Name: "test-gemma4", Arch: "gemma4", Layers: 10, Embd: 256, Heads: 4, HeadsKV: 1, HeadDim: 128,
		FFN: 512, Vocab: 1024, Text: 990, Ctx: 4096, RopeBase: 1e6, NormEps: 1e-6,
		Tied: true, VocabStyle: Gemma, Period: 5, HeadDimSWA: 64, RopeDim: 32, Window: 8,
		SharedKV: 5, FFNShared: 1024, PerLayer: 64,
	}
	// testQwen35 has three gated DeltaNet layers and one gated attention
	// layer, as tiny-qwen35 in the zoo.
	testQwen35 = Shape{
		Name: "test-qwen35", Arch: "qwen35", Layers: 4, Embd: 256, Heads: 4, HeadsKV: 2, HeadDim: 64,
		FFN: 256, Vocab: 1024, Text: 990, Ctx: 4096, RopeBase: 1e7, NormEps: 1e-6,
		Tied: true, VocabStyle: Qwen2, RopeDim: 16, Interval: 4, DNKHeads: 4, DNVHeads: 4, DNHead: 64,
	}
	// testQwen35MTP is testQwen35 with an MTP block appended.
	testQwen35MTP = Shape{
		Name: "test-qwen35-mtp", Arch: "qwen35", Layers: 4, Embd: 256, Heads: 4, HeadsKV: 2, HeadDim: 64,
		FFN: 256, Vocab: 1024, Text: 990, Ctx: 4096, RopeBase: 1e7, NormEps: 1e-6,
		Tied: true, VocabStyle: Qwen2, RopeDim: 16, Interval: 4, DNKHeads: 4, DNVHeads: 4, DNHead: 64, NextN: 1,
	}
	testQwen = Shape{
		Name: "test-qwen", Arch: "qwen2", Layers: 3, Embd: 128, Heads: 2, HeadsKV: 1, HeadDim: 64,
		FFN: 512, Vocab: 1024, Text: 990, Ctx: 2048, RopeBase: 1e6, NormEps: 1e-6,
		Tied: true, QKVBias: true, VocabStyle: Qwen2,
	}
)

func synthFile(t *testing.T, s Shape, ft FileType, o SynthOptions) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), s.Name+"-"+ft.String()+".gguf")
	res, err := Synth(context.Background(), s, ft, out, o)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != res.Bytes || res.Tensors != len(s.tensors()) {
		t.Fatalf("result %+v, file has %d bytes, shape %d tensors", res, st.Size(), len(s.tensors()))
	}
	return out
}

// TestSynthTypes checks the tensor types of each file type against
// llama.cpp's rules, written out for these shapes.
func TestSynthTypes(t *testing.T) {
	cases := []struct {
		s    Shape
		ft   FileType
		want map[string]quant.Type
	}{
		{testLlama, MostlyQ4_0, map[string]quant.Type{
			"token_embd.weight": quant.Q6_K, "output_norm.weight": quant.F32, "rope_freqs.weight": quant.F32,
			"blk.0.attn_q.weight": quant.Q4_0, "blk.0.attn_v.weight": quant.Q4_0, "blk.3.ffn_down.weight": quant.Q4_0,
			"blk.2.attn_norm.weight": quant.F32,
		}},
		{testLlama, MostlyQ8_0, map[string]quant.Type{
			"token_embd.weight": quant.Q8_0, "blk.0.attn_v.weight": quant.Q8_0, "blk.1.ffn_norm.weight": quant.F32,
		}},
		// 4 layers: use_more_bits picks layers 2 ((2-0)%3 == 2) and 3 (>= 7*4/8).
		{testLlama, MostlyQ4_K_M, map[string]quant.Type{
			"token_embd.weight": quant.Q6_K, "blk.0.attn_v.weight": quant.Q4_K, "blk.1.attn_v.weight": quant.Q4_K,
			"blk.2.attn_v.weight": quant.Q6_K, "blk.3.attn_v.weight": quant.Q6_K, "blk.0.ffn_down.weight": quant.Q4_K,
			"blk.2.ffn_down.weight": quant.Q6_K, "blk.1.attn_q.weight": quant.Q4_K, "blk.1.ffn_up.weight": quant.Q4_K,
		}},
		{testLlama, MostlyF16, map[string]quant.Type{
			"token_embd.weight": quant.F16, "blk.0.attn_q.weight": quant.F16, "output_norm.weight": quant.F32,
		}},
		// Width 128: rows of 128 fall back from Q4_K to Q5_0 and from Q6_K
		// to Q8_0; ffn_down rows of 512 stay k-quants; the tied embedding
		// takes Q8_0 directly. 3 layers: more bits for layer 2 only.
		{testQwen, MostlyQ4_K_M, map[string]quant.Type{
			"token_embd.weight": quant.Q8_0, "blk.0.attn_q.weight": quant.Q5_0, "blk.2.attn_v.weight": quant.Q8_0,
			"blk.1.attn_v.weight": quant.Q5_0, "blk.2.ffn_down.weight": quant.Q6_K, "blk.1.ffn_down.weight": quant.Q4_K,
			"blk.0.attn_q.bias": quant.F32, "blk.0.ffn_gate.weight": quant.Q5_0,
		}},
		{testQwen, MostlyQ4_0, map[string]quant.Type{
			"token_embd.weight": quant.Q8_0, "blk.0.attn_q.weight": quant.Q4_0, "blk.0.attn_k.bias": quant.F32,
		}},
	}
	for _, c := range cases {
		t.Run(c.s.Name+"-"+c.ft.String(), func(t *testing.T) {
			path := synthFile(t, c.s, c.ft, SynthOptions{Seed: 1})
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for name, want := range c.want {
				tt, ok := f.Tensor(name)
				if !ok {
					t.Errorf("no tensor %s", name)
				} else if tt.Type != want {
					t.Errorf("%s is %s, want %s", name, tt.Type, want)
				}
			}
			if _, ok := f.Tensor("output.weight"); ok {
				t.Error("tied shape has output.weight")
			}
			if ft, _ := f.Int("general.file_type"); FileType(ft) != c.ft {
				t.Errorf("general.file_type %d, want %d", ft, c.ft)
			}
			if n, _ := f.Int(c.s.Arch + ".block_count"); int(n) != c.s.Layers {
				t.Errorf("block_count %d", n)
			}
			checkDistribution(t, f)
		})
	}
}

// checkDistribution dequantizes a matrix and checks mean and spread.
func checkDistribution(t *testing.T, f *gguf.File) {
	t.Helper()
	tt, _ := f.Tensor("blk.1.attn_q.weight")
	x := make([]float32, tt.Elements())
	if err := quant.DequantizeRow(tt.Type, tt.Data, x); err != nil {
		t.Fatal(err)
	}
	var s, s2 float64
	for _, v := range x {
		s += float64(v)
		s2 += float64(v) * float64(v)
	}
	mean := s / float64(len(x))
	std := math.Sqrt(s2/float64(len(x)) - mean*mean)
	if math.Abs(mean) > 0.002 || std < 0.017 || std > 0.023 {
		t.Errorf("blk.1.attn_q.weight (%s): mean %.4f std %.4f, want about 0 and 0.02", tt.Type, mean, std)
	}
	n, _ := f.Tensor("blk.0.attn_norm.weight")
	if v := math.Float32frombits(uint32(n.Data[0]) | uint32(n.Data[1])<<8 | uint32(n.Data[2])<<16 | uint32(n.Data[3])<<24); v != 1 {
		t.Errorf("norm weight %v, want 1", v)
	}
}

// TestSynthLoads: the files load in the engine, score finite log-probs,
// and the vocabulary round-trips text through geist's tokenizer.
func TestSynthLoads(t *testing.T) {
	for _, s := range []Shape{testLlama, testQwen, testLFM2, testGemma4, testGranite4H, testQwen35, testQwen35MTP} {
		for _, ft := range []FileType{MostlyQ4_0, MostlyQ4_K_M, MostlyQ8_0} {
			t.Run(s.Name+"-"+ft.String(), func(t *testing.T) {
				path := synthFile(t, s, ft, SynthOptions{Seed: 7})
				e, err := engine.Load(path, engine.Options{Threads: 2, Ctx: 64})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				tok := e.Tokenizer()
				if tok.NTokens() != s.Vocab {
					t.Errorf("%d tokens, want %d", tok.NTokens(), s.Vocab)
				}
				text := "Once upon a time, there was a little girl named Lily.\nShe said: \"héllo 123\"!"
				ids := tok.Encode(text, false, false)
				if got := tok.Detokenize(ids, false, false); got != text {
					t.Errorf("round trip: %q", got)
				}
				if len(ids) >= len(text) {
					t.Errorf("%d tokens for %d bytes: merges do not apply", len(ids), len(text))
				}
				lp, err := e.Score(context.Background(), tok.Encode("Once upon a time", true, false), 3)
				if err != nil {
					t.Fatal(err)
				}
				for _, pos := range lp {
					for _, l := range pos {
						if math.IsNaN(float64(l.Logprob)) || math.IsInf(float64(l.Logprob), 0) {
							t.Fatalf("log-prob %v", l.Logprob)
						}
					}
				}
				chat := tok.Encode("<|im_start|><|eot_id|>", false, true)
				if s.VocabStyle == Gemma {
					chat = tok.Encode("<start_of_turn>", false, true)
				}
				if s.VocabStyle != Llama3 && !tok.IsControl(chat[0]) || s.VocabStyle == Llama3 && !tok.IsEOG(chat[len(chat)-1]) {
					t.Errorf("special tokens not parsed: %v", chat)
				}
				if !tok.IsEOG(tok.EOS()) {
					t.Errorf("EOS %d is not end of generation", tok.EOS())
				}
				if s.NextN > 0 { // the file's MTP block drafts
					st, err := e.Generate(context.Background(), engine.Request{Prompt: "Once upon a time", MaxTokens: 8,
						Sampling: sample.Params{TopP: 1, RepeatPenalty: 1}, Spec: engine.SpecOptions{Mode: engine.SpecMTP, Fixed: true, Chains: true, DraftMax: 3}})
					if err != nil {
						t.Fatal(err)
					}
					if st.Drafters["mtp"].Drafted == 0 {
						t.Errorf("the MTP block drafted nothing: %+v", st.Drafters)
					}
				}
			})
		}
	}
}

// TestSynthVocab checks the vocabulary: sizes, special ids, merges that
// only join existing tokens, and that geist's tokenizer accepts it.
func TestSynthVocab(t *testing.T) {
	for _, c := range []struct {
		style      VocabStyle
		size, text int
		bos, eos   string
	}{
		{Llama3, 128256, 128000, "<|begin_of_text|>", "<|eot_id|>"},
		{Qwen2, 151936, 151643, "<|endoftext|>", "<|im_end|>"},
		{LFM2, 65536, 64400, "<|startoftext|>", "<|im_end|>"},
		{Gemma, 262144, 262000, "<bos>", "<end_of_turn>"},
	} {
		v, err := newBPEVocab(c.style, c.size, c.text)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.tokens) != c.size || len(v.types) != c.size || len(v.merges) != c.text-256 {
			t.Fatalf("%d tokens, %d types, %d merges", len(v.tokens), len(v.types), len(v.merges))
		}
		if v.tokens[c.text] != c.bos && c.style == Llama3 || v.tokens[v.bos] != c.bos || v.tokens[v.eos] != c.eos {
			t.Errorf("bos %d %q eos %d %q", v.bos, v.tokens[v.bos], v.eos, v.tokens[v.eos])
		}
		index := map[string]bool{}
		for i, s := range v.tokens[:c.text] {
			if index[s] {
				t.Fatalf("duplicate token %q", s)
			}
			if i >= 256 {
				l, r, _ := strings.Cut(v.merges[i-256], " ")
				if !index[l] || !index[r] || l+r != s {
					t.Fatalf("merge %d %q does not make token %q from earlier tokens", i-256, v.merges[i-256], s)
				}
			}
			index[s] = true
		}
		voc := &tokenizer.Vocab{Model: "gpt2", Pre: v.pre, Tokens: v.tokens, Types: v.types, Merges: v.merges,
			BOS: int32(v.bos), EOS: int32(v.eos), EOT: -1, EOM: -1, UNK: -1, SEP: -1, PAD: -1, MASK: -1,
			FIMPre: -1, FIMSuf: -1, FIMMid: -1, FIMPad: -1, FIMRep: -1, FIMSep: -1}
		tok, err := tokenizer.New(voc)
		if err != nil {
			t.Fatal(err)
		}
		text := "Once upon a time, there was a little girl named Lily. She loved to play outside."
		ids := tok.Encode(text, false, false)
		if got := tok.Detokenize(ids, false, false); got != text || len(ids) > len(text)/2 {
			t.Errorf("%d tokens for %d bytes, round trip %q", len(ids), len(text), got)
		}
	}
	if _, err := newBPEVocab(Llama3, 300, 290); err == nil {
		t.Error("no room for specials: no error")
	}
}

// TestSynthDeterministic: the same seed gives the same file whatever the
// thread count; another seed gives other weights.
func TestSynthDeterministic(t *testing.T) {
	for _, ft := range []FileType{MostlyQ4_K_M, MostlyQ4_0} {
		a, _ := os.ReadFile(synthFile(t, testQwen, ft, SynthOptions{Seed: 3, Threads: 1}))
		b, _ := os.ReadFile(synthFile(t, testQwen, ft, SynthOptions{Seed: 3, Threads: 3}))
		c, _ := os.ReadFile(synthFile(t, testQwen, ft, SynthOptions{Seed: 4, Threads: 2}))
		if !bytes.Equal(a, b) {
			t.Errorf("%s: seed 3 with 1 and 3 threads differ", ft)
		}
		if len(a) != len(c) || bytes.Equal(a, c) {
			t.Errorf("%s: seeds 3 and 4 give the same file (or other sizes)", ft)
		}
	}
}

// TestSynthExactThenQuantize: an exact synth of type F32, quantized, is the
// very file an exact synth of the quantized type writes: synth and quantize
// agree on types, order, metadata and bytes.
func TestSynthExactThenQuantize(t *testing.T) {
	f32 := synthFile(t, testQwen, AllF32, SynthOptions{Seed: 5, Exact: true})
	for _, ft := range []FileType{MostlyQ4_0, MostlyQ4_K_M} {
		direct := synthFile(t, testQwen, ft, SynthOptions{Seed: 5, Exact: true})
		quantized := filepath.Join(t.TempDir(), "q.gguf")
		if _, err := Quantize(context.Background(), f32, quantized, ft, 2); err != nil {
			t.Fatal(err)
		}
		a, _ := os.ReadFile(direct)
		b, _ := os.ReadFile(quantized)
		if !bytes.Equal(a, b) {
			t.Errorf("%s: exact synth and quantized F32 synth differ (%d and %d bytes)", ft, len(a), len(b))
		}
	}
}

func TestSynthErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := LookupShape("llama-7b"); err == nil || !strings.Contains(err.Error(), "llama32-1b") {
		t.Errorf("unknown shape: %v", err)
	}
	dir := t.TempDir()
	if _, err := Synth(ctx, testQwen, FileType(99), filepath.Join(dir, "x.gguf"), SynthOptions{}); err == nil {
		t.Error("unknown file type: no error")
	}
	bad := testQwen
	bad.Heads, bad.HeadsKV = 3, 2
	if _, err := Synth(ctx, bad, MostlyQ4_0, filepath.Join(dir, "x.gguf"), SynthOptions{}); err == nil {
		t.Error("3 query heads over 2 key/value heads: no error")
	}
	if _, err := Synth(ctx, testQwen, MostlyQ4_0, filepath.Join(dir, "missing", "x.gguf"), SynthOptions{}); err == nil {
		t.Error("unwritable output: no error")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	out := filepath.Join(dir, "cancelled.gguf")
	if _, err := Synth(cctx, testLlama, MostlyQ4_0, out, SynthOptions{}); err == nil {
		t.Error("cancelled: no error")
	}
	if _, err := os.Stat(out + ".tmp"); err == nil {
		t.Error("cancelled synth left its temporary file")
	}
}

// TestSynthFullShape writes the real llama32-1b shape (1.2e9 weights) and
// loads it; not under -short. (qwen25-05b's type mix is covered by the
// small qwen shape, whose width also misses the k-quant blocks.)
func TestSynthFullShape(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 730 MiB file: not under -short")
	}
	for _, name := range []string{"llama32-1b"} {
		s, err := LookupShape(name)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		path := synthFile(t, s, MostlyQ4_0, SynthOptions{Seed: 1})
		t.Logf("%s Q4_0: %.1fs, %d weights", name, time.Since(start).Seconds(), s.Params())
		e, err := engine.Load(path, engine.Options{Threads: 2, Ctx: 32})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Score(context.Background(), e.Tokenizer().Encode("Hello world", true, false), 1); err != nil {
			t.Error(err)
		}
		e.Close()
	}
}
