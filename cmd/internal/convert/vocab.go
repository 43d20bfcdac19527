package convert

import (
	"fmt"
	"strings"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/tokenizer"
)

// VocabStyle selects the special tokens and pre-tokenizer of a synthetic
// byte-level BPE vocabulary.
type VocabStyle int

const (
	// Llama3 has llama.cpp's "llama-bpe" pre-tokenizer, <|begin_of_text|>
	// as BOS (added), <|eot_id|> as EOS and the header/eot chat tokens.
	Llama3 VocabStyle = iota
	// Qwen2 has the "qwen2" pre-tokenizer, no BOS added, <|im_end|> as EOS,
	// <|endoftext|> as padding and the ChatML tokens.
	Qwen2
	// LFM2 has the "lfm2" pre-tokenizer, <|startoftext|> as BOS (added),
	// <|im_end|> as EOS, <|pad|> as padding, ChatML and LFM2's tool tokens.
	LFM2
	// Gemma has Gemma's control tokens (<bos> added, <end_of_turn> as
	// EOS, <pad>) and turn template, over the "default" pre-tokenizer.
	Gemma
)

// Token types of tokenizer.ggml.token_type.
const (
	tokNormal      int32 = 1
	tokControl     int32 = 3
	tokUserDefined int32 = 4
	tokUnused      int32 = 5
)

// bpeVocab is a synthetic byte-level BPE vocabulary.
type bpeVocab struct {
	pre      string
	tokens   []string
	types    []int32
	merges   []string
	bos, eos int
	pad      int // -1: none
	addBOS   bool
	template string
}

var llama3Specials = []string{
	"<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>", "<|reserved_special_token_1|>",
	"<|finetune_right_pad_id|>", "<|reserved_special_token_2|>", "<|start_header_id|>", "<|end_header_id|>",
	"<|eom_id|>", "<|eot_id|>", "<|python_tag|>",
}

var qwen2Specials = []string{
	"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
	"<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
	"<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
	"</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
	"<|repo_name|>", "<|file_sep|>",
}

var lfm2Specials = []string{
	"<|pad|>", "<|startoftext|>", "<|endoftext|>", "<|fim_pre|>", "<|fim_mid|>", "<|fim_suf|>",
	"<|im_start|>", "<|im_end|>", "<|tool_list_start|>", "<|tool_list_end|>", "<|tool_call_start|>",
	"<|tool_call_end|>", "<|tool_response_start|>", "<|tool_response_end|>",
}

var gemmaSpecials = []string{"<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>"}

const gemmaTemplate = "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + (message['role'] == 'assistant' and 'model' or message['role']) + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"

// The chat templates of the two families in their simplest form (Llama 3
// and ChatML); llama.cpp recognizes both.
const (
	llama3Template = "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
	chatMLTemplate = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

// byteTokens returns the 256 byte tokens of GPT-2's byte-to-unicode map in
// GPT-2's order: the printable bytes as themselves, then the others as the
// code points from U+0100 on.
func byteTokens() (order []string, byByte [256]string) {
	printable := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	for b := range 256 {
		if printable(b) {
			byByte[b] = string(rune(b))
			order = append(order, byByte[b])
		}
	}
	n := 0
	for b := range 256 {
		if !printable(b) {
			byByte[b] = string(rune(256 + n))
			order = append(order, byByte[b])
			n++
		}
	}
	return order, byByte
}

// newBPEVocab builds a vocabulary of size tokens: the 256 byte tokens, then
// text tokens made by merges up to text tokens in all, then the style's
// special tokens and filler up to size. The merges are deterministic: a
// space-prefixed letter and letter pairs first, then longer words grown one
// lowercase letter at a time, so ordinary English text tokenizes into
// multi-byte tokens as with a trained vocabulary.
func newBPEVocab(style VocabStyle, size, text int) (*bpeVocab, error) {
	var specials []string
	v := &bpeVocab{pad: -1}
	switch style {
	case Llama3:
		specials, v.pre, v.addBOS, v.template = llama3Specials, "llama-bpe", true, llama3Template
	case Qwen2:
		specials, v.pre, v.template = qwen2Specials, "qwen2", chatMLTemplate
	case LFM2:
		specials, v.pre, v.addBOS, v.template = lfm2Specials, "lfm2", true, "{{ bos_token }}"+chatMLTemplate
	case Gemma:
		specials, v.pre, v.addBOS, v.template = gemmaSpecials, "default", true, gemmaTemplate
	default:
		return nil, fmt.Errorf("convert: unknown vocabulary style %d", style)
	}
	if text < 256 || size < text+len(specials) {
		return nil, fmt.Errorf("convert: vocabulary of %d tokens with %d text tokens cannot hold 256 bytes and %d special tokens", size, text, len(specials))
	}
	v.tokens = make([]string, 0, size)
	v.types = make([]int32, 0, size)
	seen := make(map[string]bool, text)
	add := func(s string, t int32) {
		v.tokens = append(v.tokens, s)
		v.types = append(v.types, t)
		seen[s] = true
	}
	order, byByte := byteTokens()
	for _, s := range order {
		add(s, tokNormal)
	}
	space := byByte[' ']
	lower := strings.Split("etaoinsrhldcumfpgwybvkxjqz", "")
	upper := strings.Split("ETAOINSRHLDCUMFPGWYBVKXJQZ", "")
	merge := func(a, b string) bool {
		if len(v.tokens) >= text {
			return false
		}
		if !seen[a+b] {
			add(a+b, tokNormal)
			v.merges = append(v.merges, a+" "+b)
		}
		return true
	}
	var level []string
	for _, first := range [][]string{lower, upper} {
		for _, c := range first {
			if !merge(space, c) {
				break
			}
			level = append(level, space+c)
		}
	}
	for _, first := range [][]string{lower, upper} {
		for _, a := range first {
			for _, b := range lower {
				if !merge(a, b) {
					break
				}
				level = append(level, a+b)
			}
		}
	}
	for len(v.tokens) < text {
		var next []string
		for _, p := range level {
			for _, c := range lower {
				if !merge(p, c) {
					break
				}
				next = append(next, p+c)
			}
		}
		level = next
	}

	first := len(v.tokens)
	for _, s := range specials {
		t := tokControl
		if style == Qwen2 && (s == "<tool_call>" || s == "</tool_call>") {
			t = tokUserDefined
		}
		add(s, t)
	}
	reserved := 3
	for len(v.tokens) < size {
		if style == Llama3 {
			add(fmt.Sprintf("<|reserved_special_token_%d|>", reserved), tokControl)
			reserved++
		} else {
			add(fmt.Sprintf("[PAD%d]", len(v.tokens)), tokUnused)
		}
	}
	switch style {
	case Llama3:
		v.bos, v.eos = first, first+9 // <|begin_of_text|>, <|eot_id|>
	case Qwen2:
		v.bos, v.eos, v.pad = first, first+2, first // <|endoftext|>, <|im_end|>
	case LFM2:
		v.bos, v.eos, v.pad = first+1, first+7, first // <|startoftext|>, <|im_end|>, <|pad|>
	case Gemma:
		v.bos, v.eos, v.pad = first+2, first+6, first // <bos>, <end_of_turn>, <pad>
	}
	return v, nil
}

// kv returns the vocabulary as tokenizer.* metadata, in the order
// llama.cpp's converter writes it.
func (v *bpeVocab) kv() []gguf.KV {
	kv := []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "gpt2"},
		{Key: "tokenizer.ggml.pre", Value: v.pre},
		{Key: "tokenizer.ggml.tokens", Value: v.tokens},
		{Key: "tokenizer.ggml.token_type", Value: v.types},
		{Key: "tokenizer.ggml.merges", Value: v.merges},
		{Key: "tokenizer.ggml.bos_token_id", Value: uint32(v.bos)},
		{Key: "tokenizer.ggml.eos_token_id", Value: uint32(v.eos)},
	}
	if v.pad >= 0 {
		kv = append(kv, gguf.KV{Key: "tokenizer.ggml.padding_token_id", Value: uint32(v.pad)})
	}
	return append(kv,
		gguf.KV{Key: "tokenizer.ggml.add_bos_token", Value: v.addBOS},
		gguf.KV{Key: "tokenizer.chat_template", Value: v.template})
}

// CopiedVocab is a tokenizer taken from another GGUF file: all of its
// tokenizer.* metadata (vocabulary, merges or scores, token types,
// pre-tokenizer, special token ids and flags, chat template), in the
// file's order.
type CopiedVocab struct {
	KV       []gguf.KV
	Tokens   int  // entries of tokenizer.ggml.tokens
	Template bool // the file carries tokenizer.chat_template
}

// ReadVocab reads the tokenizer of the GGUF file at path under the GGUF
// reader's bounds (gguf.MaxMetadata bytes of metadata, gguf.MaxArray
// tokens) and checks that geist's tokenizer accepts it, so that a bad
// file is refused before a model is written around it.
func ReadVocab(path string) (*CopiedVocab, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("vocabulary %s: %w", path, err)
	}
	defer f.Close()
	tv, err := tokenizer.VocabFromMetadata(f.Value)
	if err != nil {
		return nil, fmt.Errorf("vocabulary %s: %w", path, err)
	}
	if _, err := tokenizer.New(tv); err != nil {
		return nil, fmt.Errorf("vocabulary %s: %w", path, err)
	}
	cv := &CopiedVocab{Tokens: len(tv.Tokens)}
	for _, kv := range f.KV {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			cv.KV = append(cv.KV, kv)
			cv.Template = cv.Template || kv.Key == "tokenizer.chat_template"
		}
	}
	return cv, nil
}
