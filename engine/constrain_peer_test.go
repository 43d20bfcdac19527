package engine

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/grammar"
	"github.com/geisten/geist/engine/zoo"
)

// TestGrammarMatchesLlamaCpp is the differential test against llama.cpp's
// grammar sampler: for the same GBNF grammar (hand-written ones, and the
// grammars geist makes of JSON schemas), llama-completion --temp 0
// --grammar-file and geist's constrained greedy decoding write the same
// text on the same model. It needs llama.cpp from ../shared/peer/setup.sh
// (a chroot at PEER_ROOT, default /opt/llamacpp-root) and root to enter
// it; otherwise (in CI) it is skipped. stories260K keeps it to a few seconds.
func TestGrammarMatchesLlamaCpp(t *testing.T) {
	root := os.Getenv("PEER_ROOT")
	if root == "" {
		root = "/opt/llamacpp-root"
	}
	if _, err := os.Stat(filepath.Join(root, "usr/bin/llama-completion")); err != nil || os.Geteuid() != 0 {
		t.Skipf("llama.cpp's llama-completion in %s (../shared/peer/setup.sh) and root to chroot into it are needed", root)
	}
	if testing.Short() {
		t.Skip("-short: llama.cpp runs natively only")
	}
	work, err := os.MkdirTemp(filepath.Join(root, "tmp"), "geist-grammar-")
	if err != nil {
		t.Skip(err)
	}
	defer os.RemoveAll(work)
	inside := "/" + strings.TrimPrefix(work, root+"/")
	grammars := map[string]string{
		"name-age":  `root ::= " {\"name\": \"" [a-z ]{1,20} "\", \"age\": " [0-9]{1,2} "}"`,
		"list":      "root ::= (\" -\" [ a-z]+ \"\\n\"){2,4}",
		"yes-no":    `root ::= " " ("yes" | "no" | "maybe") "." [ a-zA-Z]*`,
		"utf8":      `root ::= " " [a-zé]+ " " [^a-z\n]{1,5}`,
		"recursive": "root ::= \" \" expr\nexpr ::= term ([+*] term)*\nterm ::= [0-9]+ | \"(\" expr \")\"",
	}
	for name, schema := range map[string]string{
		"schema-object": `{"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "size": {"type": "integer", "minimum": 1, "maximum": 30}, "kind": {"enum": ["cat", "dog"]}}, "required": ["name", "size", "kind"]}`,
		"schema-array":  `{"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 4}`,
	} {
		g, err := grammar.FromSchema([]byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		grammars[name] = g
	}
	prompt := "Once upon a time"
	// The F32/F16 files must agree byte for byte. On a Q4_0 file (both
	// engines quantize the activations to 8 bits, with float noise
	// upstream flipping roundings) greedy decoding parts where two
	// tokens are near tied: there the test checks that llama.cpp's
	// token is geist's runner-up within the quantized envelope.
	for _, model := range []string{"stories260K-F32", "tiny-qwen2-F16", "tiny-qwen2-Q4_0"} {
		b, err := os.ReadFile(zoo.Path(t, "models", model+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, "m.gguf"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		e := load(t, model, Options{Ctx: 256, SelfSpec: SelfSpecOff})
		for name, g := range grammars {
			t.Run(model+"/"+name, func(t *testing.T) {
				if err := os.WriteFile(filepath.Join(work, "g.gbnf"), []byte(g+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				ids, got, _ := constrained(t, e, prompt, g, 48, SpecOptions{Mode: SpecAuto}, greedy())
				got = strings.TrimRight(got, "\n")
				// llama-completion's printed text is at times cut short on
				// this machine (at a different point from run to run, the same
				// command; once to nothing at all, which failed CI): a text
				// that stops short inside geist's without an end of
				// generation is asked for again, up to three times in all.
				var want string
				var ended bool
				for try := 0; try < 3; try++ {
					cmd := exec.Command("chroot", root, "/usr/bin/llama-completion", "-m", inside+"/m.gguf", "-p", prompt,
						"--grammar-file", inside+"/g.gbnf", "-n", "48", "--temp", "0", "-t", "1", "-no-cnv", "--no-warmup")
					out, err := cmd.Output()
					if err != nil {
						t.Fatalf("llama-completion: %v", err)
					}
					// llama.cpp prints the prompt, the text, then " [end of
					// text]" at an end of generation; newlines close it.
					want = strings.TrimPrefix(strings.TrimRight(string(out), "\n"), " "+prompt)
					ended = strings.HasSuffix(want, " [end of text]")
					want = strings.TrimRight(strings.TrimSuffix(want, " [end of text]"), "\n")
					if ended || len(want) >= len(got) || !strings.HasPrefix(got, want) {
						break
					}
					t.Logf("llama-completion try %d printed %d bytes, not ended; asking again", try+1, len(want))
				}
				// A text still cut short must be a prefix of geist's.
				switch {
				case got == want:
				case want != "" && strings.HasPrefix(got, want) && !ended:
					t.Logf("llama.cpp's text was cut after %d of %d bytes; that prefix agrees", len(want), len(got))
				case quantized(model):
					if gap, ok := nearTie(t, e, prompt, g, ids, want); ok {
						t.Logf("a near tie: geist's choice leads llama.cpp's by %.3f nats where they part (quantized files' logits differ by up to 0.4-0.8 nats between llama.cpp's own kernels, zoo README)\ngeist  %q\nllama.cpp %q", gap, got, want)
						return
					}
					fallthrough
				default:
					t.Errorf("geist  %q\nllama.cpp %q", got, want)
				}
			})
		}
	}
}

func quantized(model string) bool { return strings.Contains(model, "-Q") }

// nearTie finds where geist's greedy tokens ids (of text under grammar
// gbnf after prompt) part from llama.cpp's text want, and reports
// by how many nats geist's token there leads the best token the grammar
// allows that follows llama.cpp's text, and whether that is under half a
// nat.
func nearTie(t *testing.T, e *Engine, prompt, gbnf string, ids []int32, want string) (float64, bool) {
	c, err := e.CompileGrammar(gbnf)
	if err != nil {
		t.Fatal(err)
	}
	m := c.NewMatcher()
	v := c.Vocab()
	var text []byte
	for i, id := range ids {
		p := v.Piece(id)
		if next := string(text) + string(p); strings.HasPrefix(want, next) {
			text = append(text, p...)
			m.AcceptToken(id)
			continue
		}
		// Token i parts: score it against llama.cpp's alternatives.
		pre, _ := e.Tokens(&Request{Prompt: prompt})
		seq := append(append(pre[:len(pre):len(pre)], ids[:i]...), id)
		lps, err := e.Score(context.Background(), seq, e.model.NVocab)
		if err != nil {
			t.Fatal(err)
		}
		lp := map[int32]float64{}
		for _, x := range lps[len(seq)-2] {
			lp[x.ID] = x.Logprob
		}
		rest := want[len(text):]
		best := math.Inf(-1)
		for alt := int32(0); alt < int32(v.Size()); alt++ {
			if q := v.Piece(alt); len(q) > 0 && alt != id && strings.HasPrefix(rest, string(q)) && m.Allowed(alt) {
				best = max(best, lp[alt])
			}
		}
		gap := lp[id] - best
		return gap, gap >= 0 && gap < 0.5
	}
	return 0, false
}
