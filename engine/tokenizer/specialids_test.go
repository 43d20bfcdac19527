package tokenizer

import (
	"strings"
	"testing"
)

// TestSpecialIDsOutOfRange: a BOS or EOS id past the vocabulary is
// refused at load, naming the key and the vocabulary's size (issue 33:
// it was accepted, the default id kept); other special ids out of range
// are left off as llama.cpp does.
func TestSpecialIDsOutOfRange(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		key  string
		id   uint32
		want string
	}{
		{"tokenizer.ggml.bos_token_id", 7, "tokenizer.ggml.bos_token_id = 7 is out of range: the vocabulary has 3 tokens"},
		{"tokenizer.ggml.eos_token_id", 1 << 31, "tokenizer.ggml.eos_token_id = 2147483648 is out of range"},
		{"tokenizer.ggml.padding_token_id", 99, ""},
	} {
		meta := map[string]any{"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": []string{"<s>", "</s>", "a"}, c.key: c.id}
		get := func(k string) (any, bool) { v, ok := meta[k]; return v, ok }
		v, err := VocabFromMetadata(get)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %d: %v", c.key, c.id, err)
		case c.want == "" && v.PAD != -1:
			t.Errorf("%s %d: PAD %d, want -1 (off)", c.key, c.id, v.PAD)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %d: %v, want an error containing %q", c.key, c.id, err, c.want)
		}
	}
}
