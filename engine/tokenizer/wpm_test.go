package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/geisten/geist/engine/gguf"
)

// embedGolden is the part of an embed/golden file the tokenizer checks.
type embedGolden struct {
	Cases []struct {
		Text   string  `json:"text"`
		Tokens []int32 `json:"tokens"`
	} `json:"cases"`
}

// TestWordPieceGolden tokenizes every text of the zoo's WordPiece
// (bert, nomic-bert) and SentencePiece embedding goldens and compares
// with llama.cpp's tokens, specials added as the vocabulary says.
func TestWordPieceGolden(t *testing.T) {
	dir := filepath.Join(zooDir(t), "embed")
	for _, name := range []string{"tiny-bert-embed-F16", "tiny-nomic-embed-Q8_0", "tiny-qwen3-embed-F16", "tiny-gemma-embed-Q8_0"} {
		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open(filepath.Join(dir, "models", name+".gguf"))
			if err != nil {
				t.Skip(err)
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
			raw, err := os.ReadFile(filepath.Join(dir, "golden", "embed-"+name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var g embedGolden
			if err := json.Unmarshal(raw, &g); err != nil {
				t.Fatal(err)
			}
			if len(g.Cases) == 0 {
				t.Fatal("no cases")
			}
			for _, c := range g.Cases {
				got := tk.Encode(c.Text, true, true)
				if !slices.Equal(got, c.Tokens) {
					t.Errorf("%q: %s", c.Text, diffIDs(got, c.Tokens))
				}
			}
		})
	}
}

// TestWordPieceWords checks the pre-tokenization on hand-made cases: case
// and accents, punctuation and ASCII symbols as words of their own, CJK
// ideographs, control characters dropped, a word that cannot be cut
// becoming one unknown token.
func TestWordPieceWords(t *testing.T) {
	v := &Vocab{Model: "bert", BOS: 1, EOS: -1, EOT: -1, EOM: -1, UNK: 0, SEP: 2, PAD: -1, MASK: -1,
		FIMPre: -1, FIMSuf: -1, FIMMid: -1, FIMPad: -1, FIMRep: -1, FIMSep: -1, AddBOS: true, AddSep: true,
		Tokens: []string{"[UNK]", "[CLS]", "[SEP]", "▁hello", "▁mun", "chen", "▁!", "▁$", "▁中", "▁国", "▁a", "b", "▁«"},
		Types:  []int32{TypeControl, TypeControl, TypeControl, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}}
	tk, err := New(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text string
		want []int32
	}{
		{"Hello", []int32{1, 3, 2}},
		{"HELLO!!", []int32{1, 3, 6, 6, 2}},
		{"  München\t$", []int32{1, 4, 5, 7, 2}},
		{"中国", []int32{1, 8, 9, 2}},
		{"a\x00b\x01", []int32{1, 10, 11, 2}},
		{"abc hello", []int32{1, 0, 3, 2}},
		{"«a»", []int32{1, 12, 10, 0, 2}},
		{"", []int32{1, 2}},
	} {
		if got := tk.Encode(c.text, true, false); !slices.Equal(got, c.want) {
			t.Errorf("%q: got %v, want %v", c.text, got, c.want)
		}
	}
	if got := tk.Encode("hello", false, false); !slices.Equal(got, []int32{3}) {
		t.Errorf("without specials: %v", got)
	}
	if got := string(tk.TokenToPiece(3, false)) + string(tk.TokenToPiece(5, false)); got != " hellochen" {
		t.Errorf("pieces: %q", got)
	}
}

// TestNFDFirst checks the accent table and the Hangul arithmetic.
func TestNFDFirst(t *testing.T) {
	for _, c := range []struct{ in, want rune }{
		{'a', 'a'}, {'ü', 'u'}, {'Ü', 'U'}, {'ß', 'ß'}, {'é', 'e'}, {'ñ', 'n'}, {'Å', 'A'}, {'ǖ', 'u'},
		{'ώ', 'ω'}, {'й', 'и'}, {'한', 0x1112}, {'가', 0x1100}, {'中', '中'}, {'\uF900', '\u8C48'}, {'😀', '😀'},
	} {
		if got := nfdFirst(c.in); got != c.want {
			t.Errorf("nfdFirst(%q) = %q (%U), want %q", c.in, got, got, c.want)
		}
	}
	for i := 1; i < len(nfdRanges); i++ {
		if nfdRanges[i][0] <= nfdRanges[i-1][1] || nfdRanges[i][0] > nfdRanges[i][1] {
			t.Fatalf("nfdRanges not sorted at %d: %v %v", i, nfdRanges[i-1], nfdRanges[i])
		}
	}
}

// FuzzWordPiece checks WordPiece encoding never panics, gives ids in
// range and puts [CLS] first and [SEP] last (it is lossy: no round trip).
func FuzzWordPiece(f *testing.F) {
	for _, s := range []string{"", "Hello, world!", "naïve café 🦙", "日本語", "\xff\xfe\xc3", "a\u00a0b\u3000c\u200bd", "[CLS] x [SEP]", "Ǖ한\uF900"} {
		f.Add(s)
	}
	path := filepath.Join(zooDir(f), "embed", "models", "tiny-bert-embed-Q8_0.gguf")
	gf, err := gguf.Open(path)
	if err != nil {
		f.Skip(err)
	}
	defer gf.Close()
	v, err := VocabFromMetadata(gf.Value)
	if err != nil {
		f.Fatal(err)
	}
	tk, err := New(v)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, parse := range []bool{false, true} {
			ids := tk.Encode(s, true, parse)
			if len(ids) < 2 || ids[0] != tk.BOS() || ids[len(ids)-1] != tk.sep {
				t.Fatalf("%q: %v", s, ids)
			}
			for _, id := range ids {
				if id < 0 || int(id) >= tk.NTokens() {
					t.Fatalf("%q: id %d out of range", s, id)
				}
			}
		}
	})
}
