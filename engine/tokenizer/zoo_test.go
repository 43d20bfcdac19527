package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/geisten/geist/engine/gguf"
)

var zooVocabs = []string{
	"llama-spm", "phi-3", "gpt-2", "llama-bpe", "qwen2", "qwen35",
	"deepseek-llm", "deepseek-coder", "falcon", "mpt",
}

// zooDir locates the conformance zoo: $GEIST_ZOO, else ../shared/zoo from
// the repository root. It skips the test when the zoo is absent.
func zooDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("GEIST_ZOO")
	if dir == "" {
		root, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
				break
			}
			parent := filepath.Dir(root)
			if parent == root {
				t.Skip("GEIST_ZOO: zoo not found (no go.mod above the test directory)")
			}
			root = parent
		}
		dir = filepath.Join(root, "..", "shared", "zoo")
	}
	if _, err := os.Stat(filepath.Join(dir, "vocab")); err != nil {
		t.Skipf("GEIST_ZOO: zoo not found at %s", dir)
	}
	return dir
}

var (
	zooMu    sync.Mutex
	zooCache = map[string]*Tokenizer{}
)

// zooTokenizer loads vocab/ggml-vocab-<name>.gguf once per test binary.
func zooTokenizer(t testing.TB, name string) *Tokenizer {
	t.Helper()
	dir := zooDir(t)
	zooMu.Lock()
	defer zooMu.Unlock()
	if tk, ok := zooCache[name]; ok {
		return tk
	}
	f, err := gguf.Open(filepath.Join(dir, "vocab", "ggml-vocab-"+name+".gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := VocabFromMetadata(f.Value)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	tk, err := New(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	zooCache[name] = tk
	return tk
}

// diffIDs describes the first difference between two id lists, or "".
func diffIDs(want, got []int32) string {
	n := min(len(want), len(got))
	i := 0
	for i < n && want[i] == got[i] {
		i++
	}
	if i == n && len(want) == len(got) {
		return ""
	}
	return fmt.Sprintf("first difference at index %d\n want %v\n  got %v", i, want, got)
}

func (t *Tokenizer) describe(ids []int32) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%q", id, t.TokenText(id))
	}
	return b.String()
}

// TestVocabTestVectors runs llama.cpp's test-tokenizer-0 vectors
// (vocab/*.gguf.inp/.out): no BOS, special tokens not parsed, as
// test-tokenizer-0 calls common_tokenize(ctx, text, false, false).
func TestVocabTestVectors(t *testing.T) {
	t.Parallel()
	dir := zooDir(t)
	for _, name := range zooVocabs {
		t.Run(name, func(t *testing.T) {
			tk := zooTokenizer(t, name)
			base := filepath.Join(dir, "vocab", "ggml-vocab-"+name+".gguf")
			inp, err := os.ReadFile(base + ".inp")
			if err != nil {
				t.Fatal(err)
			}
			out, err := os.ReadFile(base + ".out")
			if err != nil {
				t.Fatal(err)
			}
			texts := splitTests(string(inp))
			lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			if len(texts) != len(lines) {
				t.Fatalf("%d inputs, %d outputs", len(texts), len(lines))
			}
			pass := 0
			for i, text := range texts {
				var want []int32
				for _, f := range strings.Fields(lines[i]) {
					x, err := strconv.Atoi(f)
					if err != nil {
						t.Fatalf("line %d: %v", i+1, err)
					}
					want = append(want, int32(x))
				}
				got := tk.Encode(text, false, false)
				if d := diffIDs(want, got); d != "" {
					t.Errorf("test %d %q: %s\n want %s\n  got %s", i, text, d, tk.describe(want), tk.describe(got))
					continue
				}
				pass++
			}
			t.Logf("%s: %d/%d test vectors pass", name, pass, len(texts))
		})
	}
}

// splitTests splits an .inp file as test-tokenizer-0 does.
func splitTests(raw string) []string {
	const sep = "\n__ggml_vocab_test__\n"
	var out []string
	for pos := 0; pos < len(raw); {
		next := strings.Index(raw[pos:], sep)
		if next < 0 {
			out = append(out, raw[pos:])
			break
		}
		out = append(out, raw[pos:pos+next])
		pos += next + len(sep)
	}
	return out
}

type goldenFile struct {
	Tokenize []struct {
		Text         string  `json:"text"`
		AddSpecial   bool    `json:"add_special"`
		ParseSpecial bool    `json:"parse_special"`
		Tokens       []int32 `json:"tokens"`
	} `json:"tokenize"`
	Detokenize []struct {
		Tokens []int32 `json:"tokens"`
		Text   string  `json:"text"`
	} `json:"detokenize"`
}

func loadGolden(t *testing.T, dir, name string) *goldenFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "golden", "tokenize-"+name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("tokenize-%s.json: %v", name, err)
	}
	return &g
}

// TestGoldenTokenize checks golden/tokenize-*.json tokenize cases.
func TestGoldenTokenize(t *testing.T) {
	t.Parallel()
	dir := zooDir(t)
	for _, name := range zooVocabs {
		t.Run(name, func(t *testing.T) {
			tk := zooTokenizer(t, name)
			g := loadGolden(t, dir, name)
			pass := 0
			for i, c := range g.Tokenize {
				text := c.Text
				if !c.ParseSpecial {
					// These cases came from llama-tokenize, which
					// unescapes its input first ("\\n" is a newline).
					text = processEscapes(text)
				}
				got := tk.Encode(text, c.AddSpecial, c.ParseSpecial)
				want := c.Tokens
				if want == nil {
					want = []int32{}
				}
				if d := diffIDs(want, got); d != "" {
					t.Errorf("case %d %q add_special=%v parse_special=%v: %s\n want %s\n  got %s",
						i, c.Text, c.AddSpecial, c.ParseSpecial, d, tk.describe(want), tk.describe(got))
					continue
				}
				pass++
			}
			t.Logf("%s: tokenize %d/%d pass", name, pass, len(g.Tokenize))
		})
	}
}

// TestGoldenDetokenize checks golden/tokenize-*.json detokenize cases.
// They come from llama-server's /detokenize, which concatenates
// token_to_piece(id, special=true): the streaming Decoder with Special set
// must reproduce them. llama_detokenize(remove_special=false,
// unparse_special=true) gives the same text unless the vocabulary asks for
// clean_spaces (GPT-2, Llama 3, Falcon, MPT), whose clean-up the server
// does not apply; there the golden text must equal Detokenize's before its
// clean-up, which TestCleanSpaces covers.
func TestGoldenDetokenize(t *testing.T) {
	t.Parallel()
	dir := zooDir(t)
	for _, name := range zooVocabs {
		t.Run(name, func(t *testing.T) {
			tk := zooTokenizer(t, name)
			g := loadGolden(t, dir, name)
			pass, passDetok := 0, 0
			d := tk.NewDecoder()
			d.Special = true
			var got []byte
			for i, c := range g.Detokenize {
				got = got[:0]
				for _, id := range c.Tokens {
					got = append(got, d.Add(id)...)
				}
				got = append(got, d.Flush()...)
				if string(got) != c.Text {
					t.Errorf("case %d %v: streamed\n want %q\n  got %q", i, c.Tokens, c.Text, got)
					continue
				}
				pass++
				want := c.Text
				if tk.cleanSpaces {
					want = string(cleanSpaces([]byte(want)))
				}
				if det := tk.Detokenize(c.Tokens, false, true); det != want {
					t.Errorf("case %d %v: Detokenize\n want %q\n  got %q", i, c.Tokens, want, det)
					continue
				}
				passDetok++
			}
			t.Logf("%s: detokenize %d/%d streamed, %d/%d Detokenize", name, pass, len(g.Detokenize), passDetok, len(g.Detokenize))
		})
	}
}

// processEscapes is llama.cpp's string_process_escapes (common.cpp), which
// llama-tokenize applies to its input.
func processEscapes(s string) string {
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			out = append(out, s[i])
			continue
		}
		i++
		switch c := s[i]; c {
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case '\'', '"', '\\':
			out = append(out, c)
		case 'x':
			if i+2 < len(s) {
				if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
					out = append(out, byte(v))
					i += 2
					continue
				}
			}
			out = append(out, '\\', c)
		default:
			out = append(out, '\\', c)
		}
	}
	return string(out)
}

// TestGenPrompts encodes the prompts of golden/gen-*.json with the vocab
// of their models and compares with the prompt_tokens llama.cpp used (BOS
// added as the vocab says); the families of new/ too (one vocabulary, but
// each file's own BOS and special-token settings, and phi3's control
// tokens).
func TestGenPrompts(t *testing.T) {
	t.Parallel()
	dir := zooDir(t)
	models := []string{"stories260K-F32", "tiny-llama-F32", "tiny-qwen2-F16", "tiny-qwen3-F16"}
	for _, fam := range []string{"gemma3", "qwen3moe", "phi3", "granite", "smollm3", "lfm2", "gemma4"} {
		models = append(models, filepath.Join("new", "tiny-"+fam+"-F16"))
	}
	for _, model := range models {
		sub, model := filepath.Split(model)
		t.Run(model, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(dir, sub, "golden", "gen-"+model+".json"))
			if err != nil {
				t.Skip(err)
			}
			var g struct {
				Cases []struct {
					Prompt       string  `json:"prompt"`
					PromptTokens []int32 `json:"prompt_tokens"`
				} `json:"cases"`
			}
			if err := json.Unmarshal(b, &g); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(filepath.Join(dir, sub, "models", model+".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			v, err := VocabFromMetadata(f.Value)
			if err != nil {
				t.Fatal(err)
			}
			tk, err := New(v)
			if err != nil {
				t.Fatal(err)
			}
			pass := 0
			for i, c := range g.Cases {
				got := tk.Encode(c.Prompt, true, true)
				if d := diffIDs(c.PromptTokens, got); d != "" {
					t.Errorf("case %d %q: %s", i, c.Prompt, d)
					continue
				}
				pass++
			}
			t.Logf("%s: %d/%d prompts", model, pass, len(g.Cases))
		})
	}
}
