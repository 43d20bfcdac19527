package tokenizer

import (
	"fmt"
	"sort"
	"unicode"
	"unicode/utf8"
)

// WordPiece (BERT, tokenizer.ggml.model "bert"), as llama.cpp's WPM
// tokenizer does it. The vocabulary is stored as llama.cpp's converter
// writes it: a word-initial piece as "▁piece", a "##piece" continuation
// as "piece". Encoding:
//   - the text is split into words: each code point is mapped to the first
//     code point of its canonical decomposition (so "ü" becomes "u": the
//     accent goes; wpm_nfd.go), lower-cased; white space ends a word; NUL, U+FFFD and
//     control characters are dropped; punctuation, ASCII symbols and CJK
//     ideographs are words of their own;
//   - each word, prefixed with "▁", is cut greedily into the longest
//     pieces of the vocabulary from left to right; a word that cannot be
//     cut to its end becomes one unknown token;
//   - with addSpecial, [CLS] (the BOS) goes first and [SEP] last.
//
// llama.cpp always lower-cases and strips accents for this model type
// (BERT's uncased vocabularies, as all-MiniLM, bge-small and
// nomic-embed-text use): no GGUF key says otherwise.

// initWPM checks what WordPiece needs and finds the longest piece.
func (t *Tokenizer) initWPM() error {
	if t.unk < 0 {
		return fmt.Errorf("tokenizer: WordPiece vocabulary without an unknown token (tokenizer.ggml.unknown_token_id)")
	}
	if t.sep < 0 {
		t.sep = t.eos
	}
	if t.addBOS && t.bos < 0 {
		return fmt.Errorf("tokenizer: WordPiece vocabulary adds [CLS] but has no tokenizer.ggml.bos_token_id")
	}
	if (t.addSep || t.addEOS) && t.sep < 0 {
		return fmt.Errorf("tokenizer: WordPiece vocabulary adds [SEP] but has no tokenizer.ggml.seperator_token_id")
	}
	for _, s := range t.text {
		t.maxLen = max(t.maxLen, len(s))
	}
	return nil
}

// wpmEncode tokenizes the fragments of text (raw parts and special
// tokens) and appends the ids to dst.
func (t *Tokenizer) wpmEncode(s *session, dst []int32, text string, frags []fragment, addSpecial bool) []int32 {
	if addSpecial && t.addBOS {
		dst = append(dst, t.bos)
	}
	for _, f := range frags {
		if f.token >= 0 {
			dst = append(dst, f.token)
			continue
		}
		dst = t.wpmText(s, dst, text[f.start:f.end])
	}
	if addSpecial && (t.addSep || t.addEOS) {
		dst = append(dst, t.sep)
	}
	return dst
}

// wpmText splits raw text into words and appends each word's pieces.
func (t *Tokenizer) wpmText(s *session, dst []int32, text string) []int32 {
	w := append(s.buf[:0], "\xe2\x96\x81"...) // the word being built, after its ▁
	flush := func() {
		if len(w) > 3 {
			dst = t.wpmWord(dst, w)
		}
		w = w[:3]
	}
	for _, r := range text {
		r = nfdFirst(r)
		fl := cptFlags(r)
		if fl&flagWhitespace != 0 {
			flush()
			continue
		}
		if r == 0 || r == utf8.RuneError || fl&flagControl != 0 {
			continue
		}
		lr := unicode.ToLower(r)
		if fl&flagPunctuation != 0 || (r < 0x7F && fl&flagSymbol != 0) || isCJK(r) {
			flush()
			w = utf8.AppendRune(w, lr)
			flush()
			continue
		}
		w = utf8.AppendRune(w, lr)
	}
	flush()
	s.buf = w
	return dst
}

// wpmWord appends the pieces of one word (with its leading ▁): the
// longest vocabulary match at each position, or one unknown token when
// some position has none.
func (t *Tokenizer) wpmWord(dst []int32, w []byte) []int32 {
	n0 := len(dst)
	for i := 0; i < len(w); {
		found := false
		for j := min(len(w), i+t.maxLen); j > i; j-- {
			if id := t.lookupBytes(w[i:j]); id >= 0 {
				dst = append(dst, id)
				i = j
				found = true
				break
			}
		}
		if !found {
			return append(dst[:n0], t.unk)
		}
	}
	return dst
}

// nfdFirst maps r to the first code point of its canonical decomposition
// (the letter without its accents), as llama.cpp's
// unicode_cpts_normalize_nfd does: from the table of wpm_nfd.go, and by
// arithmetic for Hangul syllables (their leading consonant).
func nfdFirst(r rune) rune {
	if r < 0xC0 {
		return r
	}
	if r >= 0xAC00 && r <= 0xD7A3 {
		return 0x1100 + (r-0xAC00)/588
	}
	c := uint32(r)
	i := sort.Search(len(nfdRanges), func(i int) bool { return nfdRanges[i][1] >= c })
	if i < len(nfdRanges) && nfdRanges[i][0] <= c {
		return rune(nfdRanges[i][2])
	}
	return r
}

// isCJK reports whether r is a CJK ideograph, which BERT makes a word of
// its own.
func isCJK(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) || (r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) || (r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) || (r >= 0x2B920 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) || (r >= 0x2F800 && r <= 0x2FA1F)
}
