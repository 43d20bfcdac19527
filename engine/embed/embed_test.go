package embed

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/zoo"
)

func open(t *testing.T, name string, o Options) (*Model, *zoo.EmbedGolden) {
	t.Helper()
	g, path := zoo.LoadEmbedGolden(t, name)
	m, err := Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, g
}

// TestEmbedGolden embeds the texts of every embed/ golden (tokenized here)
// in one request and compares each vector with llama-embedding's.
func TestEmbedGolden(t *testing.T) {
	names := zoo.EmbedModels
	if testing.Short() {
		// Under emulation the Q8_0 file of each family (the F16 ones took
		// most of this test's 48 s under A72): tokenizing and pooling are
		// the same Go on every CPU, the encoder's products engine/model's
		// tests under both emulated CPUs.
		names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !strings.HasSuffix(n, "-Q8_0") })
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			m, g := open(t, name, Options{})
			var texts []string
			for _, c := range g.Cases {
				texts = append(texts, c.Text)
				toks, _, err := m.Tokenize(c.Text, false)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(toks, c.Tokens) {
					t.Errorf("%q: tokens %v, llama.cpp %v", c.Text, toks, c.Tokens)
				}
			}
			res, err := m.Embed(context.Background(), Texts(texts, true))
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			for i, c := range g.Cases {
				want += len(c.Tokens)
				if _, _, _, err := g.CompareEmbedding(res.Embeddings[i], c.Embedding); err != nil {
					t.Errorf("%q: %v", c.Text, err)
				}
			}
			if res.Tokens != want {
				t.Errorf("%d tokens counted, want %d", res.Tokens, want)
			}
		})
	}
}

// TestEmbedBatchInvariant checks that a text's vector is bit for bit the
// same alone and in requests of other sizes and batch widths.
func TestEmbedBatchInvariant(t *testing.T) {
	names := []string{"tiny-bert-embed-Q8_0", "tiny-qwen3-embed-Q8_0", "tiny-gemma-embed-F16", "tiny-nomic-embed-Q8_0"}
	if testing.Short() {
		names = names[:2] // the encoder's own test covers every family
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			_, g := open(t, name, Options{})
			var texts []string
			for _, c := range g.Cases {
				texts = append(texts, c.Text)
			}
			var ref [][]float32
			for _, bt := range []int{1, 64, 4096} {
				m, _ := open(t, name, Options{BatchTokens: bt})
				res, err := m.Embed(context.Background(), Texts(texts, true))
				if err != nil {
					t.Fatal(err)
				}
				alone, err := m.Embed(context.Background(), Texts(texts[3:4], true))
				if err != nil {
					t.Fatal(err)
				}
				if ref == nil {
					ref = res.Embeddings
				}
				for i := range texts {
					if !bitsEqual(res.Embeddings[i], ref[i]) {
						t.Fatalf("batch tokens %d: text %d differs", bt, i)
					}
				}
				if !bitsEqual(alone.Embeddings[0], ref[3]) {
					t.Fatalf("batch tokens %d: text 3 alone differs from in the batch", bt)
				}
			}
		})
	}
}

func bitsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestEmbedBounds checks truncation, dimensions and the request bounds.
func TestEmbedBounds(t *testing.T) {
	m, _ := open(t, "tiny-bert-embed-Q8_0", Options{Ctx: 16, MaxInputs: 3, MaxTokens: 40})
	long := strings.Repeat("hello world ", 20)
	ctx := context.Background()
	if _, err := m.Embed(ctx, Texts([]string{long}, false)); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "truncate") {
		t.Errorf("too long without truncate: %v", err)
	}
	toks, cut, err := m.Tokenize(long, true)
	if err != nil || !cut || len(toks) != 16 || toks[0] != 2 || toks[15] != 3 {
		t.Errorf("truncated: %v %v %v", toks, cut, err)
	}
	res, err := m.Embed(ctx, Texts([]string{long}, true))
	if err != nil || res.Tokens != 16 {
		t.Fatalf("truncate: %v, %d tokens", err, res.Tokens)
	}
	d, err := m.Embed(ctx, Request{Inputs: []Input{{Text: long}}, Truncate: true, Dimensions: 32})
	if err != nil || len(d.Embeddings[0]) != 32 {
		t.Fatalf("dimensions: %v", err)
	}
	var sum float64
	for _, x := range d.Embeddings[0] {
		sum += float64(x) * float64(x)
	}
	if math.Abs(sum-1) > 1e-5 {
		t.Errorf("dimensions: norm² %v", sum)
	}
	for _, r := range []Request{
		{},
		Texts([]string{"a", "b", "c", "d"}, true),
		Texts([]string{long, long, long}, true),
		{Inputs: []Input{{Text: "a"}}, Dimensions: -1},
		{Inputs: []Input{{Text: "a"}}, Dimensions: m.Dim() + 1},
		{Inputs: []Input{{Tokens: []int32{2, 99999}}}},
		{Inputs: []Input{{Tokens: []int32{}}}},
	} {
		if _, err := m.Embed(ctx, r); !errors.Is(err, ErrInput) {
			t.Errorf("%+v: %v, want ErrInput", r, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Embed(cctx, Texts([]string{"a"}, true)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	tk, err := m.Embed(ctx, Request{Inputs: []Input{{Tokens: toks}}})
	if err != nil || !bitsEqual(tk.Embeddings[0], res.Embeddings[0]) {
		t.Errorf("token input: %v", err)
	}
}

// TestOpenRefusesGenerator checks a text-generation model is refused
// with a clear error.
func TestOpenRefusesGenerator(t *testing.T) {
	path := zoo.Path(t, "models", "tiny-llama-F16.gguf")
	_, err := Open(path, Options{})
	if err == nil || !strings.Contains(err.Error(), "not an embedding model") {
		t.Errorf("got %v", err)
	}
}

// TestGenerateRefusesEmbedding checks that loading an embedding model to
// generate text fails with a clear error.
func TestGenerateRefusesEmbedding(t *testing.T) {
	for _, name := range []string{"tiny-bert-embed-Q8_0", "tiny-qwen3-embed-Q8_0"} {
		_, path := zoo.LoadEmbedGolden(t, name)
		_, err := engine.Load(path, engine.Options{})
		if !errors.Is(err, engine.ErrEmbeddingModel) || !strings.Contains(err.Error(), "embeddings") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// BenchmarkEmbed embeds the golden texts of a tiny model in one request
// (tokens/s is the figure).
func BenchmarkEmbed(b *testing.B) {
	for _, name := range []string{"tiny-bert-embed-Q8_0", "tiny-qwen3-embed-Q8_0"} {
		b.Run(name, func(b *testing.B) {
			g, path := zoo.LoadEmbedGolden(b, name)
			m, err := Open(path, Options{Threads: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			var texts []string
			for _, c := range g.Cases {
				texts = append(texts, c.Text)
			}
			req := Texts(texts, true)
			tokens := 0
			b.ResetTimer()
			for b.Loop() {
				res, err := m.Embed(context.Background(), req)
				if err != nil {
					b.Fatal(err)
				}
				tokens += res.Tokens
			}
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
