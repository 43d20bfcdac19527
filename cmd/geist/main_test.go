package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/tokenizer"
	"github.com/geisten/geist/engine/zoo"
)

// geist runs the dispatcher like the binary would and returns its exit
// status, stdout and stderr.
func geist(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, &cli.Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

func TestRunReproducesLlamaCpp(t *testing.T) {
	model := zoo.Path(t, "models", "stories260K-F32.gguf")
	b, err := os.ReadFile(zoo.Path(t, "golden", "gen-stories260K-F32.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Cases []struct {
			Prompt string  `json:"prompt"`
			Tokens []int32 `json:"tokens"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := tokenizer.VocabFromMetadata(f.Value)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		t.Fatal(err)
	}
	c := g.Cases[0]
	if c.Prompt != "Once upon a time" || len(c.Tokens) != 96 {
		t.Fatalf("unexpected golden case %q with %d tokens", c.Prompt, len(c.Tokens))
	}
	want := tok.Detokenize(c.Tokens, false, false) + "\n"
	code, out, errs := geist(t, "", "run", "-m", model, "--temp", "0", "-n", "96", "--stats", "Once upon a time")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if out != want {
		t.Errorf("output\n%q\nwant llama.cpp's\n%q", out, want)
	}
	var st map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(errs)), &st); err != nil {
		t.Fatalf("--stats is not one JSON line: %q", errs)
	}
	for _, k := range []string{"prompt_tokens", "generated_tokens", "ttft_ms", "prefill_tok_s", "decode_tok_s"} {
		if _, ok := st[k]; !ok {
			t.Errorf("--stats lacks %s", k)
		}
	}
	if st["generated_tokens"].(float64) != 96 || st["prompt_tokens"].(float64) != 5 {
		t.Errorf("stats %v", st)
	}
	// The prompt from stdin gives the same text.
	if code, out2, _ := geist(t, "Once upon a time", "run", "-m", model, "--temp", "0", "-n", "96", "-"); code != 0 || out2 != want {
		t.Errorf("stdin prompt: exit %d, %q", code, out2)
	}
}

func TestTokenize(t *testing.T) {
	vocab := zoo.Path(t, "vocab", "ggml-vocab-llama-bpe.gguf")
	code, out, errs := geist(t, "", "tokenize", "-m", vocab, "Hello world<|eot_id|>")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var ids []int32
	if err := json.Unmarshal([]byte(out), &ids); err != nil {
		t.Fatalf("not a JSON array: %q", out)
	}
	if len(ids) != 4 || ids[0] != 128000 || ids[3] != 128009 {
		t.Errorf("ids %v: want BOS, two words, <|eot_id|>", ids)
	}
	_, out, _ = geist(t, "", "tokenize", "-m", vocab, "--no-special", "--no-parse-special", "Hello world<|eot_id|>")
	ids = nil
	json.Unmarshal([]byte(out), &ids)
	if len(ids) < 5 || ids[0] == 128000 {
		t.Errorf("--no-special --no-parse-special: %v", ids)
	}
}

func TestScore(t *testing.T) {
	model := zoo.Path(t, "models", "stories260K-Q8_0.gguf")
	code, out, errs := geist(t, "", "score", "-m", model, "--tokens", "[1,403,407,261,378]", "--top", "64")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r struct {
		Top [][]struct {
			ID      int32   `json:"id"`
			Logprob float64 `json:"logprob"`
		} `json:"top_logprobs"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Top) != 5 || len(r.Top[0]) != 64 || r.Top[4][0].ID != 432 {
		t.Errorf("shape %d×%d, last top %d", len(r.Top), len(r.Top[0]), r.Top[4][0].ID)
	}
}

func TestInspect(t *testing.T) {
	model := zoo.Path(t, "models", "tiny-qwen2-Q4_K_M.gguf")
	code, out, errs := geist(t, "", "inspect", model, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var info inspectInfo
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatal(err)
	}
	if info.Architecture != "qwen2" || !info.Supported || info.Layers != 2 || !info.TiedOutput || info.TensorTypes["Q4_K"] == 0 || info.VocabSize != 4096 {
		t.Errorf("%+v", info)
	}
	code, out, _ = geist(t, "", "inspect", model)
	if code != 0 || !strings.Contains(out, "architecture") {
		t.Errorf("text: %d %q", code, out)
	}
	if code, _, _ := geist(t, "", "version"); code != 0 {
		t.Error("version failed")
	}
}

// TestErrors: every error is one line on stderr and a non-zero exit.
func TestErrors(t *testing.T) {
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "notes.txt")
	os.WriteFile(notGGUF, []byte("these are not the weights you are looking for"), 0o644)
	model := zoo.Path(t, "models", "stories260K-F32.gguf")
	mamba := writeMamba(t, model, dir)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "-m", filepath.Join(dir, "missing.gguf"), "hi"}, "no such file"},
		{[]string{"run", "-m", notGGUF, "hi"}, "not a GGUF"},
		{[]string{"run", "-m", mamba, "hi"}, `unsupported architecture "mamba"`},
		{[]string{"run", "-m", model, "--ctx", "8", "--temp", "0", "Once upon a time there was a girl who liked to play"}, "prompt too long"},
		{[]string{"run", "-m", model, "--temp", "-1", "hi"}, "temperature"},
		{[]string{"run", "-m", model, "--top-p", "2", "hi"}, "top"},
		{[]string{"run", "-m", model, "--bogus", "hi"}, "unknown flag"},
		{[]string{"run", "-m", model}, "PROMPT"},
		{[]string{"run", "hi"}, "no model"},
		{[]string{"run", "-m", model, "-n", "x", "hi"}, "invalid argument"},
		{[]string{"score", "-m", model, "--tokens", "[1,99999]"}, "outside the vocabulary"},
		{[]string{"score", "-m", model, "--tokens", "nope"}, "JSON array"},
		{[]string{"tokenize", "-m", notGGUF, "x"}, "not a GGUF"},
		{[]string{"inspect", filepath.Join(dir, "missing.gguf")}, "no such file"},
		{[]string{"frobnicate"}, "unknown command"},
	}
	for _, c := range cases {
		code, out, errs := geist(t, "", c.args...)
		if code == 0 {
			t.Errorf("%v: exit 0, stdout %q", c.args, out)
			continue
		}
		if strings.Count(errs, "\n") != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: stderr %q, want one line mentioning %q", c.args, errs, c.want)
		}
	}
}

// TestSessions: a conversation continues across invocations, can be listed,
// shown, exported and deleted.
func TestSessions(t *testing.T) {
	model := zoo.Path(t, "models", "stories260K-Q4_0.gguf")
	dir := t.TempDir()
	for i, q := range []string{"Once upon a time", "Then what happened?"} {
		code, _, errs := geist(t, "", "run", "-m", model, "--data-dir", dir, "--session", "story", "-n", "12", "--temp", "0", "--stats", q)
		if code != 0 {
			t.Fatalf("turn %d: exit %d: %s", i, code, errs)
		}
	}
	code, out, _ := geist(t, "", "sessions", "--data-dir", dir, "list")
	if code != 0 || !strings.Contains(out, "story") || !strings.Contains(out, "4") {
		t.Errorf("list: %d %q", code, out)
	}
	code, out, _ = geist(t, "", "sessions", "--data-dir", dir, "show", "story")
	if code != 0 || !strings.Contains(out, "Then what happened?") {
		t.Errorf("show: %d %q", code, out)
	}
	code, out, _ = geist(t, "", "sessions", "--data-dir", dir, "export", "story")
	var doc struct {
		ID    string `json:"id"`
		Turns []struct {
			Role string `json:"role"`
			Text string `json:"text"`
		} `json:"turns"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || doc.ID != "story" || len(doc.Turns) != 4 || doc.Turns[2].Text != "Then what happened?" {
		t.Errorf("export: %d %q", code, out)
	}
	if code, _, errs := geist(t, "", "sessions", "--data-dir", dir, "delete", "story"); code != 0 {
		t.Errorf("delete: %s", errs)
	}
	if code, _, errs := geist(t, "", "sessions", "--data-dir", dir, "show", "story"); code == 0 || !strings.Contains(errs, "not found") {
		t.Errorf("show after delete: %d %q", code, errs)
	}
}

// TestSessionContextOverflow: a conversation longer than the context drops
// its oldest turns, keeps the system prompt and says so in --stats.
func TestSessionContextOverflow(t *testing.T) {
	model := zoo.Path(t, "models", "stories260K-Q4_0.gguf")
	dir := t.TempDir()
	var last map[string]any
	for i := 0; i < 6; i++ {
		code, _, errs := geist(t, "", "run", "-m", model, "--data-dir", dir, "--session", "long", "--system", "Tell stories.",
			"--ctx", "128", "-n", "16", "--temp", "0", "--stats", "Once upon a time there was a little girl")
		if code != 0 {
			t.Fatalf("turn %d: exit %d: %s", i, code, errs)
		}
		lines := strings.Split(strings.TrimSpace(errs), "\n")
		last = nil
		json.Unmarshal([]byte(lines[len(lines)-1]), &last)
	}
	if d, _ := last["dropped_turns"].(float64); d < 2 {
		t.Errorf("no turns dropped after 6 long turns in a 128-token context: %v", last)
	}
}

// TestCommandHelp: -h and --help print each command's usage and flags
// once, on stdout, and exit 0; a usage error is one line on stderr, exit 2.
func TestCommandHelp(t *testing.T) {
	for _, c := range commands {
		for _, h := range []string{"-h", "--help"} {
			code, out, errs := geist(t, "", c.name, h)
			if code != 0 || strings.Count(out, "usage: geist "+c.name) != 1 || errs != "" {
				t.Errorf("geist %s %s: exit %d, stdout %q, stderr %q", c.name, h, code, out, errs)
			}
		}
		if c.name == "version" || c.name == "gpio" {
			continue
		}
		code, out, errs := geist(t, "", c.name, "--no-such-flag")
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "unknown flag") {
			t.Errorf("geist %s --no-such-flag: exit %d, stdout %q, stderr %q", c.name, code, out, errs)
		}
	}
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		if code, out, errs := geist(t, "", args...); code != 0 || !strings.Contains(out, "usage: geist COMMAND") || errs != "" {
			t.Errorf("geist %v: exit %d, %q %q", args, code, out, errs)
		}
	}
	if code, out, _ := geist(t, "", "help", "run"); code != 0 || !strings.Contains(out, "usage: geist run") {
		t.Errorf("geist help run: exit %d, %q", code, out)
	}
	if code, out, errs := geist(t, ""); code != 2 || out != "" || !strings.Contains(errs, "usage: geist COMMAND") {
		t.Errorf("geist alone: exit %d, %q %q", code, out, errs)
	}
	_, v, _ := geist(t, "", "version")
	for _, args := range [][]string{{"--version"}, {"-V"}} {
		if code, out, _ := geist(t, "", args...); code != 0 || out != v || !strings.HasPrefix(out, "geist ") {
			t.Errorf("geist %v: exit %d, %q (version: %q)", args, code, out, v)
		}
	}
}

// writeMamba writes dir/mamba.gguf, a model of an unsupported
// architecture: a copy of model with another name.
func writeMamba(t *testing.T, model, dir string) string {
	t.Helper()
	f, err := gguf.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := gguf.NewBuilder()
	b.CopyKV(f)
	b.Set("general.architecture", "mamba")
	for _, tn := range f.Tensors {
		b.AddTensor(tn.Name, tn.Type, tn.Dims, tn.Data)
	}
	mamba := filepath.Join(dir, "mamba.gguf")
	if err := b.WriteFile(mamba); err != nil {
		t.Fatal(err)
	}
	return mamba
}
