package convert

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/quant"
)

// TestQuantizeMatchesLlamaCpp quantizes the zoo's float models and compares
// every tensor (name, order, type, shape, bytes) and the metadata with the
// zoo's files that llama-quantize made from the same source: this is what
// proves the per-tensor type rules and the quantizers.
func TestQuantizeMatchesLlamaCpp(t *testing.T) {
	// llama-quantize read F32 weights. Where the zoo holds that F32 file
	// (tiny-llama, stories260K) every byte must match; from an F16 or BF16
	// rounding of the weights (all the zoo holds for the qwen models) only
	// the types, order and metadata can.
	cases := []struct {
		src, ft, ref string
		sameSource   bool
	}{
		{"tiny-llama-F32", "Q4_0", "tiny-llama-Q4_0", true},
		{"tiny-llama-F32", "Q8_0", "tiny-llama-Q8_0", true},
		{"tiny-llama-F32", "Q4_K_M", "tiny-llama-Q4_K_M", true},
		{"stories260K-F32", "Q4_0", "stories260K-Q4_0", true},
		{"stories260K-F32", "Q8_0", "stories260K-Q8_0", true},
		{"tiny-llama-BF16", "Q4_K_M", "tiny-llama-Q4_K_M", false},
		{"tiny-llama-F16", "Q8_0", "tiny-llama-Q8_0", false},
		{"tiny-qwen2-F16", "Q4_0", "tiny-qwen2-Q4_0", false},
		{"tiny-qwen2-F16", "Q8_0", "tiny-qwen2-Q8_0", false},
		{"tiny-qwen2-F16", "Q4_K_M", "tiny-qwen2-Q4_K_M", false},
		{"tiny-qwen3-F16", "Q4_0", "tiny-qwen3-Q4_0", false},
		{"tiny-qwen3-F16", "Q8_0", "tiny-qwen3-Q8_0", false},
		{"tiny-qwen3-F16", "Q4_K_M", "tiny-qwen3-Q4_K_M", false},
	}
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.ref, func(t *testing.T) {
			if !c.sameSource && testing.Short() {
				t.Skip("types-only check: not under -short")
			}
			src := zoo.Path(t, "models", c.src+".gguf")
			ref := zoo.Path(t, "models", c.ref+".gguf")
			if _, err := os.Stat(src); err != nil {
				t.Skipf("GEIST_ZOO: %v", err)
			}
			ft, err := ParseFileType(c.ft)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, c.ref+".gguf")
			res, err := Quantize(context.Background(), src, out, ft, 2)
			if err != nil {
				t.Fatal(err)
			}
			compareFiles(t, out, ref, c.sameSource)
			if c.sameSource {
				a, _ := os.ReadFile(out)
				b, _ := os.ReadFile(ref)
				if !bytes.Equal(a, b) {
					k := 0
					for k < len(a) && k < len(b) && a[k] == b[k] {
						k++
					}
					t.Errorf("files differ (%d and %d bytes) at %d: % x vs % x", len(a), len(b), k, a[k:k+16], b[k:k+16])
				}
			}
			t.Logf("%s -> %s: %s, %d bytes", c.src, c.ft, res.TypeSummary(), res.Bytes)
		})
	}
}

// compareFiles compares tensor names, order, types and shapes, metadata,
// and when bytes is set the tensor data.
func compareFiles(t *testing.T, got, want string, withBytes bool) {
	t.Helper()
	g, err := gguf.Open(got)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	w, err := gguf.Open(want)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if len(g.Tensors) != len(w.Tensors) {
		t.Fatalf("%d tensors, want %d", len(g.Tensors), len(w.Tensors))
	}
	for i := range w.Tensors {
		gt, wt := &g.Tensors[i], &w.Tensors[i]
		if gt.Name != wt.Name || gt.Type != wt.Type || !reflect.DeepEqual(gt.Dims, wt.Dims) {
			t.Errorf("tensor %d: %s %s %v, want %s %s %v", i, gt.Name, gt.Type, gt.Dims, wt.Name, wt.Type, wt.Dims)
			continue
		}
		if withBytes && !bytes.Equal(gt.Data, wt.Data) {
			t.Errorf("tensor %s (%s): bytes differ", gt.Name, gt.Type)
		}
	}
	for _, kv := range w.KV {
		v, ok := g.Value(kv.Key)
		if !ok || !reflect.DeepEqual(v, kv.Value) {
			t.Errorf("metadata %s = %s, want %s", kv.Key, short(v), short(kv.Value))
		}
	}
	if len(g.KV) != len(w.KV) {
		t.Errorf("%d metadata keys, want %d", len(g.KV), len(w.KV))
	}
}

func short(v any) string {
	s := fmt.Sprintf("%T %v", v, v)
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}

// TestPlanFallbacks checks the type rules on shapes the zoo lacks: rows
// that no block fits, Qwen2.5's width of 896 (not a multiple of 256), tied
// output, and the layers that Q4_K_M gives more bits.
func TestPlanFallbacks(t *testing.T) {
	cases := []struct {
		ncols int64
		in    quant.Type
		want  quant.Type
	}{
		{256, quant.Q4_K, quant.Q4_K},
		{896, quant.Q4_K, quant.Q5_0},
		{896, quant.Q6_K, quant.Q8_0},
		{80, quant.Q6_K, quant.F16},
		{172, quant.Q4_0, quant.F16},
		{172, quant.Q8_0, quant.F16},
		{896, quant.Q3_K, quant.Q4_0},
		{896, quant.Q5_K, quant.Q5_1},
	}
	for _, c := range cases {
		if got := fallback(c.in, c.ncols); got != c.want {
			t.Errorf("fallback(%s, %d) = %s, want %s", c.in, c.ncols, got, c.want)
		}
	}
	// 16 layers: llama.cpp's use_more_bits picks 0, 1, 4, 7, 10, 13, 14, 15.
	var more []int
	for i := range 16 {
		if useMoreBits(i, 16) {
			more = append(more, i)
		}
	}
	if want := []int{0, 1, 4, 7, 10, 13, 14, 15}; !reflect.DeepEqual(more, want) {
		t.Errorf("useMoreBits(·, 16) = %v, want %v", more, want)
	}
	// Order: outside blocks first, then by block number (10 after 9).
	names := []string{"blk.10.a", "blk.9.b", "token_embd.weight", "blk.9.a", "output_norm.weight", "blk.1.x"}
	var got []string
	for _, i := range Order(names) {
		got = append(got, names[i])
	}
	if want := []string{"output_norm.weight", "token_embd.weight", "blk.1.x", "blk.9.a", "blk.9.b", "blk.10.a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Order = %v, want %v", got, want)
	}
}

func TestQuantizeErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := ParseFileType("Q3_K_XL"); err == nil {
		t.Error("ParseFileType(Q3_K_XL): no error")
	}
	if _, err := Quantize(ctx, filepath.Join(dir, "missing.gguf"), filepath.Join(dir, "o.gguf"), MostlyQ4_0, 1); err == nil {
		t.Error("missing input: no error")
	}
	src := zoo.Path(t, "models", "stories260K-Q8_0.gguf")
	if _, err := Quantize(ctx, src, filepath.Join(dir, "o.gguf"), MostlyQ4_0, 1); err == nil {
		t.Error("requantizing a Q8_0 file: no error")
	}
	f32 := zoo.Path(t, "models", "stories260K-F32.gguf")
	if _, err := Quantize(ctx, f32, filepath.Join(dir, "no", "such", "dir", "o.gguf"), MostlyQ4_0, 1); err == nil {
		t.Error("unwritable output: no error")
	}
	if _, err := os.Stat(filepath.Join(dir, "o.gguf.tmp")); err == nil {
		t.Error("temporary file left behind")
	}
}
