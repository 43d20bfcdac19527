package tokenizer

import (
	"bytes"
	"errors"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/geisten/geist/engine/gguf"
)

// tinySPM builds a small SentencePiece vocabulary by hand.
func tinySPM(t testing.TB) *Tokenizer {
	t.Helper()
	v := &Vocab{
		Model: "llama",
		BOS:   1, EOS: 2, UNK: 0, EOT: -1, EOM: -1, SEP: -1, PAD: -1, MASK: -1,
		FIMPre: -1, FIMSuf: -1, FIMMid: -1, FIMPad: -1, FIMRep: -1, FIMSep: -1,
		AddBOS: true, AddSpacePrefix: true,
	}
	add := func(s string, score float32, typ int32) {
		v.Tokens = append(v.Tokens, s)
		v.Scores = append(v.Scores, score)
		v.Types = append(v.Types, typ)
	}
	add("<unk>", 0, TypeUnknown)
	add("<s>", 0, TypeControl)
	add("</s>", 0, TypeControl)
	for b := 0; b < 256; b++ {
		add("<0x"+strings.ToUpper(string("0123456789abcdef"[b>>4])+string("0123456789abcdef"[b&15]))+">", 0, TypeByte)
	}
	add("▁", -1, TypeNormal)
	add("h", -2, TypeNormal)
	add("i", -2, TypeNormal)
	add("hi", -1, TypeNormal)
	add("▁hi", -0.5, TypeNormal)
	add("<|user|>", 0, TypeUserDefined)
	tk, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestSPMHandBuilt(t *testing.T) {
	t.Parallel()
	tk := tinySPM(t)
	id := func(s string) int32 {
		x, ok := tk.TokenID(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		return x
	}
	got := tk.Encode("hi", true, false)
	want := []int32{1, id("▁hi")}
	if d := diffIDs(want, got); d != "" {
		t.Fatal(d)
	}
	// "é" has no token: byte fallback.
	got = tk.Encode("é", false, false)
	want = []int32{id("▁"), id("<0xC3>"), id("<0xA9>")}
	if d := diffIDs(want, got); d != "" {
		t.Fatal(d)
	}
	// User-defined tokens match even without parseSpecial, and the text
	// after a special token gets the space prefix again (llama.cpp).
	got = tk.Encode("<|user|>hi", false, false)
	want = []int32{id("<|user|>"), id("▁hi")}
	if d := diffIDs(want, got); d != "" {
		t.Fatal(d)
	}
	// Control tokens only with parseSpecial.
	if got := tk.Encode("</s>", false, true); len(got) != 1 || got[0] != 2 {
		t.Fatalf("parseSpecial: got %v", got)
	}
	if got := tk.Encode("</s>", false, false); len(got) < 2 {
		t.Fatalf("no parseSpecial: got %v", got)
	}
	if s := tk.Detokenize([]int32{id("▁hi"), id("<0xC3>"), id("<0xA9>")}, false, false); s != "hié" {
		t.Fatalf("Detokenize = %q", s)
	}
	if s := tk.Detokenize([]int32{1, id("▁hi")}, true, false); s != " hi" {
		t.Fatalf("Detokenize removing BOS = %q", s)
	}
	// The hidden BOS still uses up the leading-space removal (llama.cpp).
	if s := tk.Detokenize([]int32{1, id("▁hi"), 2}, false, false); s != " hi" {
		t.Fatalf("Detokenize without special = %q", s)
	}
	if !tk.IsEOG(2) || tk.IsEOG(1) {
		t.Fatal("EOG set wrong")
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	if _, err := New(&Vocab{Model: "t5", Tokens: []string{"a"}}); err == nil || !strings.Contains(err.Error(), "t5") {
		t.Fatalf("unsupported model: %v", err)
	}
	if _, err := New(&Vocab{Model: "bert", Tokens: []string{"a"}, UNK: -1, BOS: -1, EOS: -1, SEP: -1}); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Fatalf("WordPiece without an unknown token: %v", err)
	}
	if _, err := New(&Vocab{Model: "gpt2", Pre: "klingon", Tokens: []string{"a"}}); err == nil || !strings.Contains(err.Error(), "klingon") {
		t.Fatalf("unsupported pre: %v", err)
	}
	if _, err := New(&Vocab{Model: "llama", Tokens: []string{"a", "a"}, BOS: -1, EOS: -1, UNK: -1}); err == nil {
		t.Fatal("duplicate tokens accepted")
	}
}

func TestVocabFromMetadataErrors(t *testing.T) {
	t.Parallel()
	meta := map[string]any{"tokenizer.ggml.model": "llama"}
	get := func(k string) (any, bool) { v, ok := meta[k]; return v, ok }
	if _, err := VocabFromMetadata(get); !errors.Is(err, ErrMissingKey) || !strings.Contains(err.Error(), "tokenizer.ggml.tokens") {
		t.Fatalf("missing tokens: %v", err)
	}
	meta["tokenizer.ggml.tokens"] = []int32{1}
	if _, err := VocabFromMetadata(get); err == nil || !strings.Contains(err.Error(), "tokenizer.ggml.tokens") {
		t.Fatalf("wrong type: %v", err)
	}
	meta["tokenizer.ggml.tokens"] = []string{"a", "b"}
	meta["tokenizer.ggml.bos_token_id"] = "x"
	if _, err := VocabFromMetadata(get); err == nil || !strings.Contains(err.Error(), "bos_token_id") {
		t.Fatalf("wrong id type: %v", err)
	}
	meta["tokenizer.ggml.bos_token_id"] = uint32(1)
	meta["tokenizer.ggml.model"] = "gpt2"
	if _, err := VocabFromMetadata(get); !errors.Is(err, ErrMissingKey) || !strings.Contains(err.Error(), "merges") {
		t.Fatalf("missing merges: %v", err)
	}
}

func TestCleanSpaces(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"a , b . c ! d ?":    "a, b. c! d?",
		"it ' s":             "it's",
		"I 'm here":          "I'm here",
		"we 're , they 've":  "we're, they've",
		"don 't , we 'll":    "don 't, we 'll",
		" ' ":                "'",
		"":                   "",
		"x":                  "x",
		"a ' b ' c":          "a'b'c",
		"rock 'n' roll 'd x": "rock 'n' roll 'd x",
	} {
		if got := string(cleanSpaces([]byte(in))); got != want {
			t.Errorf("cleanSpaces(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCompletePrefix(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want int
	}{
		{"", 0}, {"abc", 3}, {"a\xC3", 1}, {"a\xC3\xA9", 3}, {"\xE2\x96", 0}, {"x\xF0\x9F\xA6", 1},
		{"\xF0\x9F\xA6\x99", 4}, {"a\x80", 2}, {"a\xFF", 2}, {"a\xC3A", 3}, {"a\xE2A\x96", 4},
	} {
		if got := completePrefix([]byte(c.in)); got != c.want {
			t.Errorf("completePrefix(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// TestDecoderSplitsUTF8 streams characters whose bytes arrive in separate
// byte tokens and checks that no partial character is emitted.
func TestDecoderSplitsUTF8(t *testing.T) {
	t.Parallel()
	tk := tinySPM(t)
	text := "hi 🦙 é ✅"
	ids := tk.Encode(text, true, false)
	d := tk.NewDecoder()
	var out []byte
	for _, id := range ids {
		chunk := d.Add(id)
		if !utf8.Valid(chunk) {
			t.Fatalf("token %d: emitted invalid UTF-8 %q", id, chunk)
		}
		out = append(out, chunk...)
	}
	out = append(out, d.Flush()...)
	if want := " " + text; string(out) != want {
		t.Fatalf("streamed %q, want %q", out, want)
	}
	// A dangling lead byte comes out on Flush.
	d = tk.NewDecoder()
	if chunk := d.Add(tk.byteToToken(0xF0)); len(chunk) != 0 {
		t.Fatalf("incomplete sequence emitted: %q", chunk)
	}
	if rest := d.Flush(); !bytes.Equal(rest, []byte{0xF0}) {
		t.Fatalf("Flush = %q", rest)
	}
}

func TestDecoderNoAllocs(t *testing.T) {
	tk := zooTokenizer(t, "llama-bpe")
	ids := tk.Encode("Hello, world! 🦙 Ünïcödé streaming test, with some numbers 12345.", false, false)
	d := tk.NewDecoder()
	for _, id := range ids { // warm up the buffer
		d.Add(id)
	}
	d.Flush()
	allocs := testing.AllocsPerRun(100, func() {
		for _, id := range ids {
			d.Add(id)
		}
		d.Flush()
	})
	if allocs != 0 {
		t.Fatalf("Decoder allocates %.1f times per run", allocs)
	}
}

// TestLoadTime loads the largest vocabulary (qwen2, 151k tokens, 151k
// merges) and logs the time (speed is judged by benchmarks, not by
// timed tests).
func TestLoadTime(t *testing.T) {
	dir := zooDir(t)
	f, err := gguf.Open(filepath.Join(dir, "vocab", "ggml-vocab-qwen2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start := time.Now()
	v, err := VocabFromMetadata(f.Value)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(v); err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	t.Logf("qwen2 vocab: VocabFromMetadata+New in %v", el)
}

func TestSpecialIDs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name          string
		bos, eos, eot int32
		addBOS        bool
		eog           []string
	}{
		{"llama-spm", 1, 2, -1, true, []string{"</s>"}},
		{"llama-bpe", 128000, 128001, 128009, true, []string{"<|end_of_text|>", "<|eot_id|>"}},
		{"qwen2", 151643, 151643, 151645, false, []string{"<|endoftext|>", "<|im_end|>"}},
		{"phi-3", 1, 32000, 32007, true, []string{"<|endoftext|>", "<|end|>"}},
		{"gpt-2", 50256, 50256, 50256, false, []string{"<|endoftext|>"}},
	} {
		tk := zooTokenizer(t, c.name)
		if tk.BOS() != c.bos || tk.EOS() != c.eos || tk.EOT() != c.eot || tk.AddBOS() != c.addBOS {
			t.Errorf("%s: BOS %d EOS %d EOT %d addBOS %v", c.name, tk.BOS(), tk.EOS(), tk.EOT(), tk.AddBOS())
		}
		for _, s := range c.eog {
			id, ok := tk.TokenID(s)
			if !ok || !tk.IsEOG(id) {
				t.Errorf("%s: %q not end-of-generation", c.name, s)
			}
		}
		if tk.NL() < 0 || string(tk.TokenToPiece(tk.NL(), false)) != "\n" {
			t.Errorf("%s: newline token %d", c.name, tk.NL())
		}
	}
}

const benchText = `The quick brown fox jumps over the lazy dog. Tokenizers split text into pieces;
this benchmark mixes English prose, code like func main() { fmt.Println("hi") }, numbers 3.14159,
and a bit of Unicode: naïve café, Ελληνικά, русский, 日本語のテキスト, 🦙🚀✅. `

// encodeBench tokenizes ~2000 tokens of text.
func encodeBench(b *testing.B, name string) {
	tk := zooTokenizer(b, name)
	text := strings.Repeat(benchText, 1)
	for len(tk.Encode(text, false, false)) < 2000 {
		text += benchText
	}
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tk.Encode(text, true, true)
	}
}

func BenchmarkEncodeSPM(b *testing.B)    { encodeBench(b, "llama-spm") }
func BenchmarkEncodeLlama3(b *testing.B) { encodeBench(b, "llama-bpe") }
func BenchmarkEncodeQwen2(b *testing.B)  { encodeBench(b, "qwen2") }
func BenchmarkEncodeDSLLM(b *testing.B)  { encodeBench(b, "deepseek-llm") }

// TestEncodeSpeed guards the "2000-token prompt in milliseconds" budget.
func TestEncodeSpeed(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("short")
	}
	for _, name := range []string{"llama-spm", "llama-bpe", "qwen2"} {
		tk := zooTokenizer(t, name)
		text := benchText
		for len(tk.Encode(text, false, false)) < 2000 {
			text += benchText
		}
		start := time.Now()
		const runs = 5
		for range runs {
			tk.Encode(text, true, true)
		}
		el := time.Since(start) / runs
		t.Logf("%s: %d tokens in %v", name, len(tk.Encode(text, false, false)), el)
	}
}

func BenchmarkNewLlama3(b *testing.B) {
	f, err := gguf.Open(filepath.Join(zooDir(b), "vocab", "ggml-vocab-llama-bpe.gguf"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	v, err := VocabFromMetadata(f.Value)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(v); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLongInputsLinear feeds inputs that make naive regex scanning
// quadratic (long whitespace runs, long words, alternating newlines).
// Time is logged, not asserted; -short (the emulated runs) skips it.
func TestLongInputsLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: long pathological inputs are slow under emulation")
	}
	inputs := []string{
		strings.Repeat(" ", 100000) + "x",
		strings.Repeat("a", 100000),
		strings.Repeat("\n ", 50000) + "x",
		strings.Repeat("\t", 50000) + strings.Repeat("\u3000", 20000) + "y",
		strings.Repeat("1", 100000),
		strings.Repeat("!", 100000),
	}
	for _, name := range zooVocabs {
		tk := zooTokenizer(t, name)
		for i, s := range inputs {
			start := time.Now()
			tk.Encode(s, true, true)
			t.Logf("%s: input %d (%d bytes) in %v", name, i, len(s), time.Since(start))
		}
	}
}

// TestStdlibOnly keeps the package's non-test code on the standard library
// (and off engine/gguf): the tokenizer works from plain vocabulary data.
func TestStdlibOnly(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
				t.Errorf("%s imports %s: only the standard library is allowed", name, path)
			}
		}
	}
}

// TestConcurrentEncode shares one Tokenizer between goroutines.
func TestConcurrentEncode(t *testing.T) {
	t.Parallel()
	tk := zooTokenizer(t, "qwen2")
	texts := []string{benchText, "Hello, world!", "<|im_start|>user\nhi<|im_end|>", "日本語 🦙 1234567"}
	want := make([][]int32, len(texts))
	for i, s := range texts {
		want[i] = tk.Encode(s, true, true)
	}
	errc := make(chan string, 4)
	for g := range 4 {
		go func() {
			for n := range 50 {
				i := (g + n) % len(texts)
				if d := diffIDs(want[i], tk.Encode(texts[i], true, true)); d != "" {
					errc <- d
					return
				}
			}
			errc <- ""
		}()
	}
	for range 4 {
		if d := <-errc; d != "" {
			t.Error(d)
		}
	}
}
