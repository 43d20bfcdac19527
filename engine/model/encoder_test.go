package model

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/zoo"
)

func openEncoder(t *testing.T, path string) *Encoder {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	e, err := LoadEncoder(f)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestEncoderGolden embeds llama.cpp's tokens of every case of every
// embed/ golden and compares with llama-embedding's vectors within the
// golden's tolerance.
func TestEncoderGolden(t *testing.T) {
	for _, name := range shortEmbedModels() {
		t.Run(name, func(t *testing.T) {
			g, path := zoo.LoadEmbedGolden(t, name)
			e := openEncoder(t, path)
			if e.Pooling.String() != g.Pooling {
				t.Errorf("pooling %s, golden %s", e.Pooling, g.Pooling)
			}
			worst := 0.0
			for _, c := range g.Cases {
				out := [][]float32{make([]float32, e.Dim)}
				if err := e.Embed(context.Background(), [][]int32{c.Tokens}, out); err != nil {
					t.Fatal(err)
				}
				mx, _, _, err := g.CompareEmbedding(out[0], c.Embedding)
				worst = math.Max(worst, mx)
				if err != nil {
					t.Errorf("%q (%d tokens): %v", c.Text, len(c.Tokens), err)
				}
			}
			t.Logf("worst max |diff| %.3g (tolerance %.3g)", worst, g.Tolerance.MaxAbs)
		})
	}
}

// shortEmbedModels are the embedding files the encoder tests run: all of
// them natively; under -short (the emulated runs) the Q8_0 file of each
// family, whose encoder layers are the same for every weight type: the
// F16 files (tiny-qwen3-embed-F16 alone took 38 s of the 67 s of
// TestEncoderBatchInvariant under A72) multiply by the F16 kernels that
// the decoders' conformance tests run under both emulated CPUs.
func shortEmbedModels() []string {
	if !testing.Short() {
		return zoo.EmbedModels
	}
	var q []string
	for _, n := range zoo.EmbedModels {
		if strings.HasSuffix(n, "-Q8_0") {
			q = append(q, n)
		}
	}
	return q
}

// TestEncoderBatchInvariant embeds the golden texts together, in several
// orders and batch shapes, and checks each vector is bit for bit the one
// the text gets alone.
func TestEncoderBatchInvariant(t *testing.T) {
	for _, name := range shortEmbedModels() {
		t.Run(name, func(t *testing.T) {
			g, path := zoo.LoadEmbedGolden(t, name)
			e := openEncoder(t, path)
			var seqs [][]int32
			for _, c := range g.Cases {
				seqs = append(seqs, c.Tokens)
			}
			alone := make([][]float32, len(seqs))
			for i, s := range seqs {
				alone[i] = make([]float32, e.Dim)
				if err := e.Embed(context.Background(), [][]int32{s}, alone[i:i+1]); err != nil {
					t.Fatal(err)
				}
			}
			threads := []int{1, 3}
			if testing.Short() {
				// The emulated runs: batches over three workers only,
				// which shows batching and the split together.
				threads = threads[1:]
			}
			for _, threads := range threads {
				e.Threads = threads
				// All together, reversed, and in pairs.
				orders := [][]int{}
				all, rev := []int{}, []int{}
				for i := range seqs {
					all = append(all, i)
					rev = append(rev, len(seqs)-1-i)
				}
				orders = append(orders, all, rev)
				for i := 0; i+1 < len(seqs) && !testing.Short(); i += 2 {
					orders = append(orders, []int{i + 1, i})
				}
				for _, ord := range orders {
					batch := make([][]int32, len(ord))
					out := make([][]float32, len(ord))
					for j, i := range ord {
						batch[j] = seqs[i]
						out[j] = make([]float32, e.Dim)
					}
					if err := e.Embed(context.Background(), batch, out); err != nil {
						t.Fatal(err)
					}
					for j, i := range ord {
						for d := range out[j] {
							if math.Float32bits(out[j][d]) != math.Float32bits(alone[i][d]) {
								t.Fatalf("threads %d, order %v: text %d differs at %d: %v alone, %v in the batch", threads, ord, i, d, alone[i][d], out[j][d])
							}
						}
					}
				}
			}
		})
	}
}

// TestEncoderRefuses checks bad input gets an error, not a panic.
func TestEncoderRefuses(t *testing.T) {
	g, path := zoo.LoadEmbedGolden(t, "tiny-bert-embed-Q8_0")
	_ = g
	e := openEncoder(t, path)
	out := [][]float32{make([]float32, e.Dim)}
	for _, seq := range [][]int32{{}, {-1}, {int32(e.NVocab)}, make([]int32, e.CtxTrain+1)} {
		if err := e.Embed(context.Background(), [][]int32{seq}, out); err == nil {
			t.Errorf("%d tokens: no error", len(seq))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Embed(ctx, [][]int32{{2, 3}}, out); err == nil {
		t.Error("cancelled context: no error")
	}
}
