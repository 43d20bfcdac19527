package dialect

import (
	"testing"
)

// splitAll runs answer through a splitter for marks in pieces of size
// bytes (0: cut once, at cut), and returns what it called thinking and
// content.
func splitAll(marks ThinkMarks, answer string, size, cut int) (thinking, content string) {
	ts := NewThinkSplitter(marks)
	add := func(s string, final bool) {
		a, b := ts.Add(s, final)
		thinking, content = thinking+a, content+b
	}
	if size == 0 {
		add(answer[:cut], false)
		add(answer[cut:], false)
	} else {
		for i := 0; i < len(answer); i += size {
			add(answer[i:min(i+size, len(answer))], false)
		}
	}
	add("", true)
	return thinking, content
}

// TestThinkSplitter: a leading thinking block leaves the content however
// the answer is cut into pieces (pieces of every size, and two pieces cut
// at every byte), and an answer without one is all content: <think>
// blocks (the zero value's and ThinkTags) and Gemma 4's thought channel.
func TestThinkSplitter(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		marks                     ThinkMarks
		answer, thinking, content string
	}{
		{ThinkMarks{}, "<think>\nweigh it\n</think>\n\nIt is 4.", "\nweigh it\n", "It is 4."},
		{ThinkTags, "\n<think></think>It is 4.", "", "It is 4."},
		{ThinkTags, "It is 4. <think>no</think>", "", "It is 4. <think>no</think>"},
		{ThinkTags, "<thin", "", "<thin"},
		{ThinkTags, "<think>unfinished", "unfinished", ""},
		{ThinkTags, "<|channel>thought\nhm<channel|>It is 4.", "", "<|channel>thought\nhm<channel|>It is 4."},
		{GemmaThought, "<|channel>thought\nweigh it<channel|>It is 4.", "weigh it", "It is 4."},
		{GemmaThought, "<|channel>thought\n<channel|>\n<|tool_call>call:f{}<tool_call|>", "", "<|tool_call>call:f{}<tool_call|>"},
		{GemmaThought, "\n<|channel>thought\n2 + 2\n<channel|>\n\nIt is 4.", "2 + 2\n", "It is 4."},
		{GemmaThought, "<|channel>thought\nunfinished <chan", "unfinished <chan", ""},
		{GemmaThought, "<|channel>thoughts", "", "<|channel>thoughts"},
		{GemmaThought, "<|chan", "", "<|chan"},
		{GemmaThought, "It is 4. <|channel>thought\nno<channel|>", "", "It is 4. <|channel>thought\nno<channel|>"},
		{GemmaThought, "<think>no</think>It is 4.", "", "<think>no</think>It is 4."},
	} {
		for size := 1; size <= len(c.answer); size++ {
			if th, co := splitAll(c.marks, c.answer, size, 0); th != c.thinking || co != c.content {
				t.Errorf("%q in pieces of %d: thinking %q content %q, want %q %q", c.answer, size, th, co, c.thinking, c.content)
			}
		}
		for cut := 0; cut <= len(c.answer); cut++ {
			if th, co := splitAll(c.marks, c.answer, 0, cut); th != c.thinking || co != c.content {
				t.Errorf("%q cut at %d: thinking %q content %q, want %q %q", c.answer, cut, th, co, c.thinking, c.content)
			}
		}
	}
}
