package appliance_test

import (
	"slices"
	"testing"

	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
)

// thinkerOwnBlank is a thinking model whose blank lines after the block
// are a token of their own (as Qwen3's "\n\n" is): the content's tokens
// are 4 and 5.
var thinkerOwnBlank = []string{"<think>", "weigh it", "</think>", "\n\n", "It is four.", " Done."}

// TestAnswerSplitTokens: the token ids kept with an answer are exactly
// its content's: all of them without thinking, those after the block and
// its blank lines with it, none when a token holds both the block's end
// (or its blank lines) and the content's start, or when nothing follows
// the block.
func TestAnswerSplitTokens(t *testing.T) {
	for _, c := range []struct {
		name           string
		pieces         []string
		content        string
		thinkingTokens int
		ids            []int32
	}{
		{"no thinking", []string{"It", " is", " four."}, "It is four.", 0, []int32{0, 1, 2}},
		{"a tag-like start", []string{"<", "b>", " bold"}, "<b> bold", 0, []int32{0, 1, 2}},
		{"thinking, blank token", thinkerOwnBlank, "It is four. Done.", 3, []int32{4, 5}},
		{"thinking, blank in the content's token", appliancetest.ThinkerPieces, appliancetest.ThinkerContent, 4, nil},
		{"thinking only", []string{"<think>", "hm", "</think>"}, "", 3, nil},
	} {
		var a appliance.AnswerSplit
		var content string
		for i, p := range c.pieces {
			a.Token(int32(i))
			_, co := a.Text(p)
			content += co
		}
		_, co := a.Flush()
		content += co
		if content != c.content || a.ThinkingTokens() != c.thinkingTokens || !slices.Equal(a.ContentTokens(), c.ids) {
			t.Errorf("%s: content %q, %d thinking tokens, ids %v; want %q, %d, %v", c.name, content, a.ThinkingTokens(), a.ContentTokens(), c.content, c.thinkingTokens, c.ids)
		}
	}
}

// TestSessionKeepsContentTokens: a session keeps a thinking answer's
// content with the token ids of that content (not the block's), and an
// answer whose content no token boundary starts keeps its content alone.
func TestSessionKeepsContentTokens(t *testing.T) {
	script := thinkerOwnBlank
	eng := &appliancetest.Engine{Script: func(engine.Request) []string { return script }}
	store := appliance.NewMemorySessions(8, 20)
	c := start(t, eng, func(cfg *appliance.Config) { cfg.Sessions = store })
	outcome(t, submit(t, c, appliance.Request{Text: "q", Session: "s"}))
	script = appliancetest.ThinkerPieces
	outcome(t, submit(t, c, appliance.Request{Text: "q", Session: "s"}))
	h, _ := store.Load("s")
	if len(h) != 4 || h[1].Content != "It is four. Done." || !slices.Equal(h[1].Tokens, []int32{4, 5}) ||
		h[3].Content != appliancetest.ThinkerContent || h[3].Tokens != nil {
		t.Errorf("stored %+v", h)
	}
}
