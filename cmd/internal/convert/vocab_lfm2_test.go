package convert

import (
	"testing"

	"github.com/geisten/geist/engine/tokenizer"
)

// TestLFM2ToolTokens: LFM2's vocabulary has the tokens around its tool
// calls, <|tool_call_start|> and <|tool_call_end|>, as control tokens (as
// LiquidAI's files do): hidden from generated text until preserved, as
// the engine preserves the template's ToolTokens (engine/chat's
// ToolsLFM2), after which a generated call shows whole.
func TestLFM2ToolTokens(t *testing.T) {
	v, err := newBPEVocab(LFM2, 65536, 64400)
	if err != nil {
		t.Fatal(err)
	}
	voc := &tokenizer.Vocab{Model: "gpt2", Pre: v.pre, Tokens: v.tokens, Types: v.types, Merges: v.merges,
		BOS: int32(v.bos), EOS: int32(v.eos), EOT: -1, EOM: -1, UNK: -1, SEP: -1, PAD: -1, MASK: -1,
		FIMPre: -1, FIMSuf: -1, FIMMid: -1, FIMPad: -1, FIMRep: -1, FIMSep: -1}
	tok, err := tokenizer.New(voc)
	if err != nil {
		t.Fatal(err)
	}
	const answer = `<|tool_call_start|>[HassTurnOn(name="Kitchen")]<|tool_call_end|>`
	ids := tok.Encode(answer, false, true)
	if got := tok.Detokenize(ids, false, false); got != `[HassTurnOn(name="Kitchen")]` {
		t.Errorf("before Preserve: %q (the control tokens should not show)", got)
	}
	for _, s := range []string{"<|tool_call_start|>", "<|tool_call_end|>"} {
		if !tok.Preserve(s) {
			t.Errorf("%s is not a control token of the vocabulary", s)
		}
	}
	if got := tok.Detokenize(ids, false, false); got != answer {
		t.Errorf("after Preserve: %q, want %q", got, answer)
	}
	if len(ids) < 2 || tok.TokenText(ids[0]) != "<|tool_call_start|>" || tok.TokenText(ids[len(ids)-1]) != "<|tool_call_end|>" {
		t.Errorf("the tags are not single tokens: %v", ids)
	}
}
