package appliance

import "github.com/geisten/geist/engine/chat"

// AnswerSplit shapes an answer as the engine streams it, for the core
// and for geist run alike: Token takes each token id, Text each piece of
// text that follows them. It splits a leading thinking block from the
// content (chat.ThinkSplitter), counts the block's tokens, and keeps the
// token ids of the content, which a conversation stores with it. The
// zero value splits <think> blocks; NewAnswerSplit the model's own marks.
type AnswerSplit struct {
	split chat.ThinkSplitter
	ids   []int32
	// thinking counts the block's tokens, undecided those whose text does
	// not yet tell, fresh those since the last piece of text.
	thinking, undecided, fresh int
	sawThinking                bool
	// start is the index of the content's first token in ids, -1 when no
	// token boundary falls where the content starts (a token held the
	// block's end or its blank lines and the content's first bytes).
	start   int
	started bool
}

// NewAnswerSplit returns an AnswerSplit for the thinking blocks between
// marks (the template's chat.Template.ThinkMarks: Gemma 4's thought
// channel).
func NewAnswerSplit(marks chat.ThinkMarks) AnswerSplit {
	return AnswerSplit{split: chat.NewThinkSplitter(marks)}
}

// Token takes the next token id of the answer.
func (a *AnswerSplit) Token(id int32) {
	a.ids = append(a.ids, id)
	a.undecided++
	a.fresh++
}

// Text takes the next piece of the answer's text and returns what of it,
// and of what was held back, is thinking and what is content.
func (a *AnswerSplit) Text(b string) (thinking, content string) {
	was := a.split.InBlock()
	thinking, content = a.split.Add(b, false)
	switch {
	case thinking != "" || was || a.split.InBlock(): // the closing tag is thinking too
		a.thinking, a.undecided = a.thinking+a.undecided, 0
	case !a.split.Undecided():
		a.undecided = 0
	}
	a.note(thinking, content, content == b && a.fresh == 1)
	a.fresh = 0
	return thinking, content
}

// InBlock reports whether the answer is inside its thinking block.
func (a *AnswerSplit) InBlock() bool { return a.split.InBlock() }

// Flush returns what the splitter held back at the end of the answer.
func (a *AnswerSplit) Flush() (thinking, content string) {
	thinking, content = a.split.Add("", true)
	a.note(thinking, content, false)
	return thinking, content
}

// note records where the content starts: at the last token when that
// token's whole text is the content's first piece (whole).
func (a *AnswerSplit) note(thinking, content string, whole bool) {
	a.sawThinking = a.sawThinking || thinking != ""
	if content == "" || a.started {
		return
	}
	a.started, a.start = true, -1
	if whole {
		a.start = len(a.ids) - 1
	}
}

// ThinkingTokens is how many of the answer's tokens its thinking block
// took (its tags included).
func (a *AnswerSplit) ThinkingTokens() int { return a.thinking }

// ContentTokens returns the token ids whose text is exactly the content:
// all of them for an answer that did not think; after a thinking block,
// those that follow it and its blank lines, when a token boundary falls
// where the content starts (nil otherwise, and for an answer with no
// content).
func (a *AnswerSplit) ContentTokens() []int32 {
	if !a.sawThinking && a.thinking == 0 {
		return a.ids
	}
	if !a.started || a.start < 0 {
		return nil
	}
	return a.ids[a.start:]
}
