package tokenizer

import (
	"slices"
	"testing"
)

// preSplit runs a pre-tokenizer and returns the words (not byte-encoded).
func preSplit(t *testing.T, pre, text string) []string {
	t.Helper()
	cfg, ok := lookupPre(pre)
	if !ok {
		t.Fatalf("no pre-tokenizer %q", pre)
	}
	p := &pretokState{cps: decodeCpts(nil, text)}
	for _, c := range p.cps {
		p.flags = append(p.flags, cptFlags(c))
	}
	segs := []int{len(p.cps)}
	for _, split := range cfg.splitters {
		segs = split(p, segs)
	}
	var words []string
	start := 0
	for _, n := range segs {
		words = append(words, string(p.cps[start:start+n]))
		start += n
	}
	return words
}

// TestPreSplits pins the word splits of the pre-tokenizers, including
// those without zoo vectors (Tekken, GPT-4o, MiniCPM5), whose expectations
// follow from llama.cpp's regexes as std::regex runs them on the collapsed
// text (non-ASCII letters count as both upper and lower case there).
func TestPreSplits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pre, text string
		want      []string
	}{
		{"gpt-2", "Hello world's  end!\n", []string{"Hello", " world", "'s", " ", " end", "!", "\n"}},
		{"llama-bpe", "I'M 12345 ok\r\n\r\n  x", []string{"I", "'M", " ", "123", "45", " ok", "\r\n\r\n", " ", " x"}},
		{"qwen2", "abc 123 ?!\n\nx", []string{"abc", " ", "1", "2", "3", " ?!\n\n", "x"}},
		{"tekken", "Hello World HELLOworld helloWORLD", []string{"Hello", " World", " HELLOworld", " hello", "WORLD"}},
		{"tekken", "ÜBER 2024 a/b\n/x", []string{"Ü", "BER", " ", "2", "0", "2", "4", " a", "/b", "\n", "/x"}},
		{"tekken", "a!\n/\n 9", []string{"a", "!\n/\n", " ", "9"}},
		{"tekken", "don't", []string{"don", "'t"}},
		{"gpt-4o", "don't WE'LL 12345", []string{"don't", " WE'LL", " ", "123", "45"}},
		{"gpt-4o", "  x\n\n y", []string{" ", " x", "\n\n", " y"}},
		{"minicpm5", "a1234567b", []string{"a", "123", "456", "7", "b"}},
		{"falcon", "x=1234,y", []string{"x", "=", "123", "4", ",", "y"}},
		{"deepseek-llm", "Hi 你好 123\n  ", []string{"Hi", " ", "你好", " ", "123", "\n", "  "}},
	} {
		if got := preSplit(t, c.pre, c.text); !slices.Equal(got, c.want) {
			t.Errorf("%s %q:\n got %q\nwant %q", c.pre, c.text, got, c.want)
		}
	}
}
