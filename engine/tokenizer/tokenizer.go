// Package tokenizer turns text into token ids and back exactly as llama.cpp
// does: SentencePiece-style vocabularies (tokenizer.ggml.model "llama") and
// byte-level BPE ("gpt2") with llama.cpp's pre-tokenizers, special-token
// parsing, BOS/EOS handling, end-of-generation detection and
// detokenization, from plain vocabulary data (see Vocab).
package tokenizer

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Token attributes, bit for bit as llama.cpp's llama_token_attr.
const (
	attrUnknown     uint16 = 1 << 0
	attrUnused      uint16 = 1 << 1
	attrNormal      uint16 = 1 << 2
	attrControl     uint16 = 1 << 3
	attrUserDefined uint16 = 1 << 4
	attrByte        uint16 = 1 << 5
	attrLStrip      uint16 = 1 << 7
	attrRStrip      uint16 = 1 << 8
	// attrPreserved (geist's, not llama.cpp's): a control token that
	// generated text renders as its text (Preserve).
	attrPreserved uint16 = 1 << 15
)

type modelType int

const (
	modelSPM modelType = iota
	modelBPE
	modelWPM // BERT's WordPiece (tokenizer.ggml.model "bert"): wpm.go
)

// Tokenizer encodes and decodes text for one vocabulary. It is safe for
// concurrent use.
type Tokenizer struct {
	typ   modelType
	vocab *Vocab
	pre   preConfig

	text  []string
	score []float32
	attr  []uint16
	ids   map[string]int32

	ranks   map[string]int32 // BPE merge ranks by "left right"
	byteTok [256]int32       // BPE: token of each single raw byte string, -1 if none

	bos, eos, eot, eom, unk, nl int32
	sep                         int32 // WordPiece: [SEP], appended after the text
	maxLen                      int   // WordPiece: the longest token text in bytes
	addBOS, addEOS, addSep      bool
	addSpacePrefix              bool
	cleanSpaces                 bool
	eog                         map[int32]struct{}
	special                     []int32 // control, user-defined and unknown tokens, longest first

	pieces   []byte  // token_to_piece(id, special=true) of every token, concatenated
	pieceOff []int32 // piece i is pieces[pieceOff[i]:pieceOff[i+1]]

	pool sync.Pool // *session scratch buffers
}

// New builds a tokenizer for v. It fails on an unsupported model or
// pre-tokenizer and on malformed vocabularies (duplicate tokens, mismatched
// array lengths).
func New(v *Vocab) (*Tokenizer, error) {
	if v == nil {
		return nil, fmt.Errorf("tokenizer: nil vocab")
	}
	t := &Tokenizer{vocab: v}
	switch v.Model {
	case "llama":
		t.typ = modelSPM
	case "bert":
		t.typ = modelWPM
	case "gpt2":
		t.typ = modelBPE
		cfg, ok := lookupPre(v.Pre)
		if !ok {
			return nil, fmt.Errorf("tokenizer: unsupported pre-tokenizer %q", v.Pre)
		}
		t.pre = cfg
	default:
		return nil, fmt.Errorf("tokenizer: unsupported tokenizer model %q", v.Model)
	}
	n := len(v.Tokens)
	if n == 0 {
		return nil, fmt.Errorf("tokenizer: empty vocabulary")
	}
	if v.Scores != nil && len(v.Scores) != n {
		return nil, fmt.Errorf("tokenizer: %d scores for %d tokens", len(v.Scores), n)
	}
	if v.Types != nil && len(v.Types) != n {
		return nil, fmt.Errorf("tokenizer: %d token types for %d tokens", len(v.Types), n)
	}
	t.text = make([]string, n)
	t.score = make([]float32, n)
	t.attr = make([]uint16, n)
	t.ids = make(map[string]int32, n)
	for i, s := range v.Tokens {
		if s == "" {
			s = fmt.Sprintf("[EMPTY_%d]", i)
		}
		if j, dup := t.ids[s]; dup {
			return nil, fmt.Errorf("tokenizer: duplicate token %q has ids %d and %d", s, j, i)
		}
		t.ids[s] = int32(i)
		t.text[i] = s
		if v.Scores != nil {
			t.score[i] = v.Scores[i]
		}
		t.attr[i] = attrNormal
		if v.Types != nil {
			switch v.Types[i] {
			case TypeUnknown:
				t.attr[i] = attrUnknown
			case TypeUnused:
				t.attr[i] = attrUnused
			case TypeNormal:
				t.attr[i] = attrNormal
			case TypeControl:
				t.attr[i] = attrControl
			case TypeUserDefined:
				t.attr[i] = attrUserDefined
			case TypeByte:
				t.attr[i] = attrByte
			default:
				t.attr[i] = 0 // undefined
			}
		}
	}
	check := func(name string, id int32) error {
		if id < -1 || id >= int32(n) {
			return fmt.Errorf("tokenizer: %s id %d out of range [0,%d)", name, id, n)
		}
		return nil
	}
	for _, c := range []struct {
		name string
		id   int32
	}{{"BOS", v.BOS}, {"EOS", v.EOS}, {"EOT", v.EOT}, {"EOM", v.EOM}, {"UNK", v.UNK}, {"SEP", v.SEP},
		{"PAD", v.PAD}, {"MASK", v.MASK}, {"FIM PRE", v.FIMPre}, {"FIM SUF", v.FIMSuf}, {"FIM MID", v.FIMMid},
		{"FIM PAD", v.FIMPad}, {"FIM REP", v.FIMRep}, {"FIM SEP", v.FIMSep}} {
		if err := check(c.name, c.id); err != nil {
			return nil, err
		}
	}
	t.bos, t.eos, t.eot, t.eom, t.unk, t.sep = v.BOS, v.EOS, v.EOT, v.EOM, v.UNK, v.SEP
	t.addBOS, t.addEOS, t.addSep, t.addSpacePrefix = v.AddBOS, v.AddEOS, v.AddSep, v.AddSpacePrefix
	if t.typ == modelWPM {
		if err := t.initWPM(); err != nil {
			return nil, err
		}
	}
	if t.addBOS && t.bos < 0 {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set")
	}
	if t.addEOS && t.eos < 0 {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.add_eos_token is true, but tokenizer.ggml.eos_token_id is not set")
	}

	if t.typ == modelBPE {
		t.cleanSpaces = t.pre.cleanSpaces
		// Merge ranks keyed by "left right", split at the first space past
		// the first byte as llama.cpp does; the first of duplicates wins.
		t.ranks = make(map[string]int32, len(v.Merges))
		for i, m := range v.Merges {
			if len(m) < 2 || strings.IndexByte(m[1:], ' ') < 0 {
				continue // llama.cpp files it under ("", ""), which never matches
			}
			if _, seen := t.ranks[m]; !seen {
				t.ranks[m] = int32(i)
			}
		}
		for b := 0; b < 256; b++ {
			t.byteTok[b] = t.lookup(string([]byte{byte(b)}))
		}
	}

	// Newline token.
	t.nl = -1
	if t.typ == modelWPM {
		t.nl = v.PAD
	} else if t.typ == modelSPM {
		t.nl = t.byteToToken('\n')
		if t.nl < 0 {
			t.nl = v.PAD
		}
	} else {
		if ids := t.encodeText(nil, "\n"); len(ids) > 0 {
			t.nl = ids[0]
		} else {
			t.nl = v.PAD
		}
	}

	t.detectSpecial()

	// Special tokens for tokenizer_st_partition, longest text first.
	for id := range t.attr {
		if t.attr[id]&(attrControl|attrUserDefined|attrUnknown) != 0 {
			t.special = append(t.special, int32(id))
		}
	}
	slices.SortStableFunc(t.special, func(a, b int32) int {
		return cmp.Compare(len(t.text[b]), len(t.text[a]))
	})

	t.buildPieces()

	// Per-token attributes llama.cpp sets by pre-tokenizer, architecture and
	// model name.
	name := strings.ToLower(v.Name)
	containsAny := func(s string, subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(s, sub) {
				return true
			}
		}
		return false
	}
	if containsAny(v.Pre, "jina-v2-de", "jina-v2-es", "jina-v2-code") || containsAny(v.Arch, "nomic-bert-moe", "jina-bert-v3") {
		if id, ok := t.ids["<mask>"]; ok {
			t.attr[id] |= attrLStrip
		}
	} else if containsAny(name, "phi-3", "phi3") {
		for _, id := range t.special {
			t.attr[id] |= attrRStrip
		}
		if id, ok := t.ids["</s>"]; ok {
			t.attr[id] |= attrRStrip
		}
		for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			if id, ok := t.ids[s]; ok {
				t.attr[id] &^= attrRStrip
			}
		}
	} else if strings.Contains(name, "modern-bert") {
		if id, ok := t.ids["[MASK]"]; ok {
			t.attr[id] |= attrLStrip
		}
	}
	return t, nil
}

// detectSpecial finds EOT/EOM/FIM tokens by their text, marks control-looking
// tokens as control, and builds the end-of-generation set, as llama.cpp's
// loader does. llama.cpp walks a hash map, so when several texts qualify for
// one role (Qwen: <|im_end|> and <|endoftext|> for EOT) its choice depends
// on hash order; here the text listed first wins. Either way both are EOG.
func (t *Tokenizer) detectSpecial() {
	v := t.vocab
	fimPre, fimSuf, fimMid, fimPad, fimRep, fimSep := v.FIMPre, v.FIMSuf, v.FIMMid, v.FIMPad, v.FIMRep, v.FIMSep
	roles := []struct {
		id    *int32
		texts []string
	}{
		{&t.eot, []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
			"<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}},
		{&t.eom, []string{"<|eom_id|>"}},
		{&fimPre, []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"}},
		{&fimSuf, []string{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"}},
		{&fimMid, []string{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"}},
		{&fimPad, []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
		{&fimRep, []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
		{&fimSep, []string{"<|file_sep|>"}},
	}
	for _, r := range roles {
		if *r.id >= 0 {
			continue
		}
		for _, s := range r.texts {
			if id, ok := t.ids[s]; ok {
				*r.id = id
				t.attr[id] |= attrControl
				break
			}
		}
	}

	// Unused tokens: control tokens whose text says so.
	for id, s := range t.text {
		if t.attr[id]&attrControl != 0 && strings.Contains(s, "unused") {
			t.attr[id] |= attrUnused
		}
	}

	t.eog = make(map[int32]struct{})
	for _, id := range []int32{fimPad, fimRep, fimSep} {
		if id >= 0 {
			t.eog[id] = struct{}{}
		}
	}
	for _, s := range []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
		"<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
		"<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~["} {
		if id, ok := t.ids[s]; ok {
			t.eog[id] = struct{}{}
			t.attr[id] |= attrControl
		}
	}
	for _, s := range []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"} {
		if id, ok := t.ids[s]; ok {
			t.attr[id] = attrUserDefined
		}
	}
	for _, id := range []int32{t.eos, t.eot, t.eom} {
		if id >= 0 {
			t.eog[id] = struct{}{}
		}
	}
	has := func(s string) (int32, bool) {
		id, ok := t.ids[s]
		if !ok {
			return -1, false
		}
		_, in := t.eog[id]
		return id, in
	}
	_, hasReturn := has("<|return|>")
	_, hasCall := has("<|call|>")
	_, hasCalls := has("<|calls|>")
	_, hasFlush := has("<|flush|>")
	endID, hasEnd := has("<|end|>")
	hasCall = hasCall || hasCalls
	if (hasReturn && hasCall && hasEnd) || (hasCall && hasFlush && hasEnd) {
		delete(t.eog, endID)
		t.attr[endID] = attrUserDefined
	}
	if _, hasTool := has("<|tool_response>"); hasTool {
		if sID, hasS := has("</s>"); hasS {
			delete(t.eog, sID)
			t.attr[sID] = attrNormal
		}
	}
}

// lookup returns the id of token text s, or -1.
func (t *Tokenizer) lookup(s string) int32 {
	if id, ok := t.ids[s]; ok {
		return id
	}
	return -1
}

// byteToToken is llama.cpp's byte_to_token for SentencePiece vocabularies:
// "<0xXX>", falling back to the byte itself; -1 if neither exists.
func (t *Tokenizer) byteToToken(b byte) int32 {
	const hex = "0123456789ABCDEF"
	buf := [6]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'}
	if id, ok := t.ids[string(buf[:])]; ok {
		return id
	}
	return t.lookup(string([]byte{b}))
}

// NTokens returns the vocabulary size.
func (t *Tokenizer) NTokens() int { return len(t.text) }

// TokenText returns the raw text of token id as stored in the vocabulary
// ("" for ids out of range).
func (t *Tokenizer) TokenText(id int32) string {
	if id < 0 || int(id) >= len(t.text) {
		return ""
	}
	return t.text[id]
}

// TokenID returns the id of the token whose raw text is s.
func (t *Tokenizer) TokenID(s string) (int32, bool) {
	id, ok := t.ids[s]
	return id, ok
}

func (t *Tokenizer) hasAttr(id int32, a uint16) bool {
	return id >= 0 && int(id) < len(t.attr) && t.attr[id]&a != 0
}

// Preserve makes the control token whose text is s render as its text in
// generated text (TokenToPiece without special, and so the streaming
// Decoder and a grammar's view of the vocabulary), as llama.cpp's
// preserved tokens are: the tokens that open and close a tool call
// (Phi-4-mini's <|tool_call|>), which a parser must see and a grammar must
// be able to force. It reports whether s is such a token. Call it before
// the tokenizer is shared.
func (t *Tokenizer) Preserve(s string) bool {
	id, ok := t.ids[s]
	if !ok || t.attr[id]&attrControl == 0 || t.IsEOG(id) {
		return false
	}
	t.attr[id] |= attrPreserved
	return true
}

// IsControl reports whether id is a control token (BOS, EOS, <|im_end|>, ...).
func (t *Tokenizer) IsControl(id int32) bool { return t.hasAttr(id, attrControl) }

// IsEOG reports whether id ends generation (EOS, EOT, EOM and the tokens
// llama.cpp recognises by text, such as <|im_end|> or <|endoftext|>).
func (t *Tokenizer) IsEOG(id int32) bool {
	_, ok := t.eog[id]
	return ok
}

// BOS returns the beginning-of-sequence id, -1 if none.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS returns the end-of-sequence id, -1 if none.
func (t *Tokenizer) EOS() int32 { return t.eos }

// EOT returns the end-of-turn id, -1 if none.
func (t *Tokenizer) EOT() int32 { return t.eot }

// NL returns the newline token id, -1 if none.
func (t *Tokenizer) NL() int32 { return t.nl }

// AddBOS reports whether Encode with addSpecial prepends BOS.
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// Around returns the special tokens Encode with addSpecial puts before
// and after the text: BOS (or BERT's [CLS]) and EOS (or [SEP]) as the
// vocabulary asks.
func (t *Tokenizer) Around() (pre, post []int32) {
	if t.addBOS {
		pre = []int32{t.bos}
	}
	switch {
	case t.typ == modelWPM && (t.addSep || t.addEOS):
		post = []int32{t.sep}
	case t.typ != modelWPM && t.addEOS:
		post = []int32{t.eos}
	}
	return pre, post
}

// Model is the tokenizer.ggml.model of the vocabulary ("llama", "gpt2",
// "bert").
func (t *Tokenizer) Model() string { return t.vocab.Model }
