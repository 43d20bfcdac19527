package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/convert"
	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/quant"
)

// testShapes adds a small llama-family shape to the real ones, so the
// command can be run end to end in a second.
func testShapes(name string) (convert.Shape, error) {
	if name == "test-small" {
		return convert.Shape{
			Name: "test-small", Arch: "llama", Layers: 2, Embd: 256, Heads: 4, HeadsKV: 2, HeadDim: 64,
			FFN: 512, Vocab: 1024, Text: 1000, Ctx: 2048, RopeBase: 500000, NormEps: 1e-5,
			Tied: true, Llama3Rope: true, VocabStyle: convert.Llama3,
		}, nil
	}
	if name == "test-moe" { // qwen3-30b-a3b's form, small
		return convert.Shape{
			Name: "test-moe", Arch: "qwen3moe", Layers: 2, Embd: 256, Heads: 4, HeadsKV: 2, HeadDim: 64,
			FFN: 512, Vocab: 1024, Text: 1000, Ctx: 2048, RopeBase: 1e6, NormEps: 1e-6,
			VocabStyle: convert.Qwen2, Experts: 8, ExpertsUsed: 2, FFNExp: 128,
		}, nil
	}
	return convert.LookupShape(name)
}

func synthCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &cli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}
	code := 0
	if err := runSynth(context.Background(), e, args, testShapes); err != nil {
		code = 1
		errb.WriteString(err.Error())
		if _, ok := err.(cli.UsageError); ok {
			code = 2
		}
	}
	return code, out.String(), errb.String()
}

func TestSynthCommand(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.gguf")
	code, out, errs := synthCmd(t, "--shape", "test-small", "--type", "Q4_K_M", "-o", a, "--seed", "9")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "wrote "+a) || !strings.Contains(out, "Q6_K×") {
		t.Errorf("output %q", out)
	}
	f, err := gguf.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	if tt, _ := f.Tensor("token_embd.weight"); tt == nil || tt.Type != quant.Q6_K {
		t.Errorf("token_embd: %+v", tt)
	}
	f.Close()
	// The file runs: geist inspect and geist run read it.
	if code, out, errs := geist(t, "", "inspect", a); code != 0 || !strings.Contains(out, "llama") {
		t.Errorf("inspect: exit %d: %s %s", code, out, errs)
	}
	if code, _, errs := geist(t, "", "run", "-m", a, "-n", "4", "--temp", "0", "Once upon a time"); code != 0 {
		t.Errorf("run: exit %d: %s", code, errs)
	}
	// Same seed, same bytes.
	b := filepath.Join(dir, "b.gguf")
	if code, _, errs := synthCmd(t, "--shape", "test-small", "--type", "Q4_K_M", "-o", b, "--seed", "9", "-t", "1"); code != 0 {
		t.Fatal(errs)
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ab, bb) {
		t.Error("same seed, different files")
	}
}

// TestSynthMoE: a qwen3moe shape (qwen3-30b-a3b's form) loads and runs.
func TestSynthMoE(t *testing.T) {
	a := filepath.Join(t.TempDir(), "moe.gguf")
	if code, _, errs := synthCmd(t, "--shape", "test-moe", "--type", "Q4_0", "-o", a); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if code, out, errs := geist(t, "", "inspect", a); code != 0 || !strings.Contains(out, "8 experts of 128, 2 per token") {
		t.Errorf("inspect: exit %d: %s %s", code, out, errs)
	}
	if code, _, errs := geist(t, "", "run", "-m", a, "-n", "4", "--temp", "0", "Once upon a time"); code != 0 {
		t.Errorf("run: exit %d: %s", code, errs)
	}
	// A budget of nothing: inspect says so, run and bench read every
	// matrix from the file. A kernel set with no packed layout for Q4_0
	// (neon without the dot-product instructions, Cortex-A72) repacks
	// nothing under any budget, and says that instead.
	_, planned, _ := geist(t, "", "inspect", a)
	packs := !strings.Contains(planned, "nothing to repack")
	if code, out, errs := geist(t, "", "inspect", "--repack-budget", "none", a); code != 0 || (packs && !strings.Contains(out, "read from the file, 16 of 16 experts")) || (!packs && !strings.Contains(out, "nothing to repack")) {
		t.Errorf("inspect --repack-budget none: exit %d: %s %s", code, out, errs)
	}
	if code, _, errs := geist(t, "", "run", "-m", a, "--repack-budget", "none", "-n", "4", "--temp", "0", "Once upon a time"); code != 0 {
		t.Errorf("run --repack-budget none: exit %d: %s", code, errs)
	}
	if code, out, errs := geist(t, "", "bench", "-m", a, "--repack-budget", "64KiB", "-p", "8", "-n", "4", "-r", "1", "--batch", "2"); code != 0 || (packs && !strings.Contains(out, "repacked (budget 64.0 KiB)")) || !strings.Contains(out, "% of the weights), first repetition tg") {
		t.Errorf("bench --repack-budget 64KiB: exit %d: %s %s", code, out, errs)
	}
	if code, _, errs := geist(t, "", "run", "-m", a, "--repack-budget", "lots", "Hi"); code == 0 || !strings.Contains(errs, `repack budget "lots"`) {
		t.Errorf("a bad budget: exit %d: %s", code, errs)
	}
}

func TestSynthCommandErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.gguf")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--type", "Q4_0", "-o", out}, 2, "no shape"},
		{[]string{"--shape", "test-small", "-o", out}, 2, "no type"},
		{[]string{"--shape", "test-small", "--type", "Q4_0"}, 2, "no output"},
		{[]string{"--shape", "llama-70b", "--type", "Q4_0", "-o", out}, 2, "llama32-1b, qwen25-05b"},
		{[]string{"--shape", "test-small", "--type", "Q3_K_S", "-o", out}, 2, "unknown type"},
		{[]string{"--shape", "test-small", "--type", "Q4_0", "-o", filepath.Join(dir, "no", "x.gguf")}, 1, "no such file"},
		{[]string{"--shape", "test-small", "--type", "Q4_0", "-o", out, "extra"}, 2, "unexpected"},
	} {
		code, _, errs := synthCmd(t, c.args...)
		if code != c.code || !strings.Contains(errs, c.msg) {
			t.Errorf("%v: exit %d %q, want %d and %q", c.args, code, errs, c.code, c.msg)
		}
	}
	// Through the dispatcher: registered, usage errors exit 2.
	if code, _, errs := geist(t, "", "synth", "--shape", "nope", "--type", "Q4_0", "-o", out); code != 2 || !strings.Contains(errs, "geist synth: ") {
		t.Errorf("dispatcher: exit %d %q", code, errs)
	}
}

// TestSynthVocab: --vocab gives the file another GGUF's tokenizer, the
// embedding and head sized to it, and the file tokenizes text exactly as
// the source does (SentencePiece from a zoo model, byte-level BPE from
// llama.cpp's Qwen2 vocabulary); --template replaces the chat template.
func TestSynthVocab(t *testing.T) {
	dir := t.TempDir()
	text := "Turn on the kitchen lights, <|im_start|>set the thermostat to 21.5°C and add 🥛 to my list"
	tmpl := filepath.Join(dir, "t.jinja")
	qwen25 := zooTemplate(t, "Qwen-Qwen2.5-7B-Instruct")
	if err := os.WriteFile(tmpl, []byte(qwen25), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src      []string
		tokens   int
		template bool
	}{
		{[]string{"models", "tiny-qwen2-Q4_0.gguf"}, 4096, false},
		{[]string{"vocab", "ggml-vocab-qwen2.gguf"}, 151936, true},
	} {
		if c.tokens > 4096 && testing.Short() {
			continue // loading 151,936 tokens four times is slow under qemu
		}
		src := zoo.Path(t, c.src...)
		out := filepath.Join(dir, c.src[1])
		args := []string{"--shape", "test-small", "--type", "Q8_0", "-o", out, "--vocab", src}
		if c.template {
			args = append(args, "--template", tmpl)
		}
		code, stdout, errs := synthCmd(t, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", src, code, errs)
		}
		if !strings.Contains(stdout, fmt.Sprintf("(%d tokens)", c.tokens)) {
			t.Errorf("%s: output %q", src, stdout)
		}
		f, err := gguf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		emb, _ := f.Tensor("token_embd.weight")
		n, _ := f.Int("llama.vocab_size")
		sf, err := gguf.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range sf.KV {
			if !strings.HasPrefix(kv.Key, "tokenizer.") || (c.template && kv.Key == "tokenizer.chat_template") {
				continue
			}
			if v, _ := f.Value(kv.Key); !reflect.DeepEqual(v, kv.Value) {
				t.Errorf("%s: %s not copied", src, kv.Key)
			}
		}
		if got, _ := f.String("tokenizer.chat_template"); c.template && got != qwen25 {
			t.Errorf("%s: the chat template is not --template's", src)
		}
		sf.Close()
		f.Close()
		if emb == nil || emb.Dims[1] != int64(c.tokens) || n != int64(c.tokens) {
			t.Fatalf("%s: token_embd %v, vocab_size %d, want %d rows", src, emb, n, c.tokens)
		}
		for _, special := range [][]string{nil, {"--no-parse-special"}} {
			code, want, errs := geist(t, "", append(append([]string{"tokenize", "-m", src}, special...), text)...)
			if code != 0 {
				t.Fatalf("tokenize %s: %s", src, errs)
			}
			code, got, errs := geist(t, "", append(append([]string{"tokenize", "-m", out}, special...), text)...)
			if code != 0 {
				t.Fatalf("tokenize %s: %s", out, errs)
			}
			if got != want || len(want) < 20 {
				t.Errorf("%s %v: tokenized\n%s\nthe source:\n%s", src, special, got, want)
			}
		}
	}
	// A file without a tokenizer is refused before anything is written.
	bad := filepath.Join(dir, "bad.gguf")
	if code, _, errs := synthCmd(t, "--shape", "test-small", "--type", "Q8_0", "-o", bad, "--vocab", tmpl); code == 0 || !strings.Contains(errs, "t.jinja") {
		t.Errorf("a non-GGUF vocabulary: exit %d, %q", code, errs)
	}
	if _, err := os.Stat(bad); err == nil {
		t.Error("a file was written for a bad vocabulary")
	}
}
