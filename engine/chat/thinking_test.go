package chat

import "testing"

// TestThinkSplitter: a leading thinking block leaves the content however
// the answer is cut into pieces, and an answer without one is all content.
func TestThinkSplitter(t *testing.T) {
	for _, c := range []struct{ answer, thinking, content string }{
		{"<think>\nweigh it\n</think>\n\nIt is 4.", "\nweigh it\n", "It is 4."},
		{"\n<think></think>It is 4.", "", "It is 4."},
		{"It is 4. <think>no</think>", "", "It is 4. <think>no</think>"},
		{"<thin", "", "<thin"},
		{"<think>unfinished", "unfinished", ""},
	} {
		for size := 1; size <= len(c.answer); size++ {
			var ts ThinkSplitter
			var th, co string
			for i := 0; i < len(c.answer); i += size {
				a, b := ts.Add(c.answer[i:min(i+size, len(c.answer))], false)
				th, co = th+a, co+b
			}
			a, b := ts.Add("", true)
			th, co = th+a, co+b
			if th != c.thinking || co != c.content {
				t.Errorf("%q in pieces of %d: thinking %q content %q, want %q %q", c.answer, size, th, co, c.thinking, c.content)
			}
		}
	}
}
