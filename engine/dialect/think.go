package dialect

import "strings"

// ThinkMarks are the texts that open and close a model's thinking block.
type ThinkMarks struct{ Open, Close string }

// ThinkTags: <think>...</think> (Qwen 3, DeepSeek-R1, SmolLM3, Granite
// 3.3), the marks of every dialect but Gemma 4's.
var ThinkTags = ThinkMarks{"<think>", "</think>"}

// ThinkSplitter moves a thinking block at the start of an answer out of
// its content, as the answer streams in pieces: <think>...</think> (Qwen
// 3, DeepSeek-R1, SmolLM3) for the zero value, the marks given for one
// from NewThinkSplitter (Gemma 4's thought channel). Text that may still
// become a mark is held back until the next piece (or the final one)
// decides it.
type ThinkSplitter struct {
	marks   ThinkMarks
	pending string
	state   int // 0: start undecided, 1: thinking, 2: content, 3: blank after the block
}

// NewThinkSplitter returns a splitter for the thinking blocks between
// marks (a Dialect's ThinkMarks).
func NewThinkSplitter(marks ThinkMarks) ThinkSplitter {
	return ThinkSplitter{marks: marks}
}

// Undecided reports whether the start of the answer does not yet tell
// whether it thinks (nothing but blanks, or part of the opening mark).
func (t *ThinkSplitter) Undecided() bool { return t.state == 0 }

// InBlock reports whether the answer is inside its thinking block.
func (t *ThinkSplitter) InBlock() bool { return t.state == 1 }

// Add takes the next piece of the answer (final: the last one) and
// returns what of it, and of what was held back, is thinking and what is
// content.
func (t *ThinkSplitter) Add(text string, final bool) (thinking, content string) {
	if t.marks.Open == "" {
		t.marks = ThinkTags
	}
	open, close := t.marks.Open, t.marks.Close
	t.pending += text
	for {
		switch t.state {
		case 0:
			trimmed := strings.TrimLeft(t.pending, " \t\r\n")
			switch {
			case strings.HasPrefix(trimmed, open):
				t.pending, t.state = trimmed[len(open):], 1
				continue
			case !final && strings.HasPrefix(open, trimmed):
				return "", ""
			}
			t.state = 2
		case 1:
			if i := strings.Index(t.pending, close); i >= 0 {
				thinking += t.pending[:i]
				t.pending, t.state = t.pending[i+len(close):], 3
				continue
			}
			keep := 0
			if !final {
				keep = partialSuffix(t.pending, close)
			}
			thinking += t.pending[:len(t.pending)-keep]
			t.pending = t.pending[len(t.pending)-keep:]
			return thinking, ""
		case 3: // the blank lines after the block are neither
			if t.pending = strings.TrimLeft(t.pending, " \t\r\n"); t.pending == "" && !final {
				return thinking, ""
			}
			t.state = 2
		case 2:
			content, t.pending = t.pending, ""
			return thinking, content
		}
	}
}
