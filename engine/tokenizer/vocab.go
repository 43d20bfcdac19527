package tokenizer

import (
	"errors"
	"fmt"
)

// Token types as GGUF stores them in tokenizer.ggml.token_type.
const (
	TypeUndefined   int32 = 0
	TypeNormal      int32 = 1
	TypeUnknown     int32 = 2
	TypeControl     int32 = 3
	TypeUserDefined int32 = 4
	TypeUnused      int32 = 5
	TypeByte        int32 = 6
)

// Vocab is a vocabulary as GGUF metadata describes it, with llama.cpp's
// defaults already applied (see VocabFromMetadata). Special token ids are -1
// when the vocabulary has none.
type Vocab struct {
	Model string // tokenizer.ggml.model: "llama" (SentencePiece) or "gpt2" (byte-level BPE)
	Pre   string // tokenizer.ggml.pre: the BPE pre-tokenizer
	Name  string // general.name: llama.cpp derives some token attributes from it (Phi-3)
	Arch  string // general.architecture: likewise (nomic-bert-moe, jina-bert-v3)

	Tokens []string  // tokenizer.ggml.tokens
	Scores []float32 // tokenizer.ggml.scores; nil means all zero
	Types  []int32   // tokenizer.ggml.token_type; nil means all normal
	Merges []string  // tokenizer.ggml.merges: "left right", rank = index

	BOS, EOS, EOT, EOM, UNK, SEP, PAD, MASK        int32
	FIMPre, FIMSuf, FIMMid, FIMPad, FIMRep, FIMSep int32

	AddBOS         bool // prepend BOS when encoding with addSpecial
	AddEOS         bool // append EOS when encoding with addSpecial
	AddSep         bool
	AddSpacePrefix bool // SentencePiece: prefix text with a space
}

// ErrMissingKey reports a required metadata key that is absent.
var ErrMissingKey = errors.New("tokenizer: missing metadata key")

// VocabFromMetadata reads the tokenizer.ggml.* keys through get (for example
// (*gguf.File).Value) and applies llama.cpp's defaults: BOS/EOS/UNK ids per
// model type, add_bos/add_eos/add_space_prefix per model and pre-tokenizer,
// and ids out of range disabled or ignored as llama.cpp does.
func VocabFromMetadata(get func(key string) (any, bool)) (*Vocab, error) {
	v := &Vocab{
		BOS: -1, EOS: -1, EOT: -1, EOM: -1, UNK: -1, SEP: -1, PAD: -1, MASK: -1,
		FIMPre: -1, FIMSuf: -1, FIMMid: -1, FIMPad: -1, FIMRep: -1, FIMSep: -1,
	}
	var err error
	if v.Model, err = metaString(get, "tokenizer.ggml.model", true); err != nil {
		return nil, err
	}
	if v.Pre, err = metaString(get, "tokenizer.ggml.pre", false); err != nil {
		return nil, err
	}
	if v.Name, err = metaString(get, "general.name", false); err != nil {
		return nil, err
	}
	if v.Arch, err = metaString(get, "general.architecture", false); err != nil {
		return nil, err
	}
	raw, ok := get("tokenizer.ggml.tokens")
	if !ok {
		return nil, fmt.Errorf("%w: tokenizer.ggml.tokens", ErrMissingKey)
	}
	if v.Tokens, ok = raw.([]string); !ok {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.tokens: want string array, got %T", raw)
	}
	n := len(v.Tokens)
	if raw, ok := get("tokenizer.ggml.scores"); ok {
		switch s := raw.(type) {
		case []float32:
			v.Scores = s
		case []int32:
			v.Scores = make([]float32, len(s))
			for i, x := range s {
				v.Scores[i] = float32(x)
			}
		default:
			return nil, fmt.Errorf("tokenizer: tokenizer.ggml.scores: want float32 or int32 array, got %T", raw)
		}
		if len(v.Scores) < n {
			return nil, fmt.Errorf("tokenizer: tokenizer.ggml.scores: %d entries for %d tokens", len(v.Scores), n)
		}
		v.Scores = v.Scores[:n]
	}
	if raw, ok := get("tokenizer.ggml.token_type"); ok {
		if v.Types, ok = raw.([]int32); !ok {
			return nil, fmt.Errorf("tokenizer: tokenizer.ggml.token_type: want int32 array, got %T", raw)
		}
		if len(v.Types) < n {
			return nil, fmt.Errorf("tokenizer: tokenizer.ggml.token_type: %d entries for %d tokens", len(v.Types), n)
		}
		v.Types = v.Types[:n]
	}

	// Defaults per model type (llama_vocab::impl::load).
	switch v.Model {
	case "llama":
		v.BOS, v.EOS, v.UNK = 1, 2, 0
		v.AddSpacePrefix, v.AddBOS = true, true
	case "bert":
		// llama.cpp's WPM defaults (bert-base-uncased's ids): [CLS] is
		// the BOS, [SEP] follows the text.
		v.BOS, v.UNK, v.SEP, v.PAD, v.MASK = 101, 100, 102, 0, 103
		v.AddBOS, v.AddSep = true, true
	case "gpt2":
		raw, ok := get("tokenizer.ggml.merges")
		if !ok {
			return nil, fmt.Errorf("%w: tokenizer.ggml.merges", ErrMissingKey)
		}
		if v.Merges, ok = raw.([]string); !ok {
			return nil, fmt.Errorf("tokenizer: tokenizer.ggml.merges: want string array, got %T", raw)
		}
		v.BOS, v.EOS = 11, 11
		if cfg, ok := lookupPre(v.Pre); ok {
			v.AddBOS = cfg.addBOS
		}
	}
	if b, ok, err := metaBool(get, "tokenizer.ggml.add_space_prefix"); err != nil {
		return nil, err
	} else if ok {
		v.AddSpacePrefix = b
	}

	ids := []struct {
		key string
		id  *int32
	}{
		{"tokenizer.ggml.bos_token_id", &v.BOS},
		{"tokenizer.ggml.eos_token_id", &v.EOS},
		{"tokenizer.ggml.eot_token_id", &v.EOT},
		{"tokenizer.ggml.eom_token_id", &v.EOM},
		{"tokenizer.ggml.unknown_token_id", &v.UNK},
		{"tokenizer.ggml.seperator_token_id", &v.SEP},
		{"tokenizer.ggml.padding_token_id", &v.PAD},
		{"tokenizer.ggml.mask_token_id", &v.MASK},
		{"tokenizer.ggml.fim_pre_token_id", &v.FIMPre},
		{"tokenizer.ggml.fim_suf_token_id", &v.FIMSuf},
		{"tokenizer.ggml.fim_mid_token_id", &v.FIMMid},
		{"tokenizer.ggml.fim_pad_token_id", &v.FIMPad},
		{"tokenizer.ggml.fim_rep_token_id", &v.FIMRep},
		{"tokenizer.ggml.fim_sep_token_id", &v.FIMSep},
		{"tokenizer.ggml.prefix_token_id", &v.FIMPre},
		{"tokenizer.ggml.suffix_token_id", &v.FIMSuf},
		{"tokenizer.ggml.middle_token_id", &v.FIMMid},
	}
	for _, it := range ids {
		if *it.id >= int32(n) {
			*it.id = -1 // default out of range: disabled
		}
		raw, ok := get(it.key)
		if !ok {
			continue
		}
		x, ok := asUint(raw)
		if !ok {
			return nil, fmt.Errorf("tokenizer: %s: want an unsigned integer, got %T", it.key, raw)
		}
		if x < uint64(n) {
			*it.id = int32(x)
		} else if it.id == &v.BOS || it.id == &v.EOS {
			// Every prompt starts with BOS and every answer ends at EOS:
			// a file that names neither in its vocabulary is broken
			// (llama.cpp keeps the default id, and ends answers at a
			// token it never sees).
			return nil, fmt.Errorf("tokenizer: %s = %d is out of range: the vocabulary has %d tokens", it.key, x, n)
		} // else: llama.cpp keeps the default
	}
	for _, it := range []struct {
		key string
		dst *bool
	}{
		{"tokenizer.ggml.add_bos_token", &v.AddBOS},
		{"tokenizer.ggml.add_eos_token", &v.AddEOS},
		{"tokenizer.ggml.add_sep_token", &v.AddSep},
	} {
		b, ok, err := metaBool(get, it.key)
		if err != nil {
			return nil, err
		}
		if ok {
			*it.dst = b
		}
	}
	return v, nil
}

func metaString(get func(string) (any, bool), key string, required bool) (string, error) {
	raw, ok := get(key)
	if !ok {
		if required {
			return "", fmt.Errorf("%w: %s", ErrMissingKey, key)
		}
		return "", nil
	}
	s, ok := raw.(string)
	if !ok {
		return "", fmt.Errorf("tokenizer: %s: want string, got %T", key, raw)
	}
	return s, nil
}

func metaBool(get func(string) (any, bool), key string) (val, present bool, err error) {
	raw, ok := get(key)
	if !ok {
		return false, false, nil
	}
	b, ok := raw.(bool)
	if !ok {
		return false, false, fmt.Errorf("tokenizer: %s: want bool, got %T", key, raw)
	}
	return b, true, nil
}

// asUint accepts any non-negative integer value.
func asUint(v any) (uint64, bool) {
	switch x := v.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	case int8:
		return uint64(x), x >= 0
	case int16:
		return uint64(x), x >= 0
	case int32:
		return uint64(x), x >= 0
	case int64:
		return uint64(x), x >= 0
	case int:
		return uint64(x), x >= 0
	}
	return 0, false
}
