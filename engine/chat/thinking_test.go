package chat

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/geisten/geist/engine/zoo"
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

// TestThinkMarks: the marks and their control tokens follow the
// template's text: Gemma 4's thought channel for its template, <think>
// for Qwen 3's, SmolLM3's and a template without either.
func TestThinkMarks(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]ThinkMarks{
		"google-gemma-4-31B-it":    GemmaThought,
		"Qwen-Qwen3-0.6B":          ThinkTags,
		"HuggingFaceTB-SmolLM3-3B": ThinkTags,
		"google-gemma-3-1b-it":     ThinkTags,
	} {
		tmpl := compileGolden(t, name)
		if got := tmpl.ThinkMarks(); got != want {
			t.Errorf("%s: ThinkMarks %q, want %q", name, got, want)
		}
		tokens := tmpl.ThinkTokens()
		if want == GemmaThought && (len(tokens) != 2 || tokens[0] != "<|channel>" || tokens[1] != "<channel|>") || want != GemmaThought && tokens != nil {
			t.Errorf("%s: ThinkTokens %q", name, tokens)
		}
	}
}

// compileGolden compiles the zoo's template of that name.
func compileGolden(t *testing.T, name string) *Template {
	t.Helper()
	raw, err := os.ReadFile(zoo.Path(t, "golden", "chat-templates.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Templates map[string]string `json:"templates"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	src, ok := g.Templates[name]
	if !ok {
		t.Fatalf("no template %s", name)
	}
	tmpl, err := Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// TestGemma4ThinkingRender: Gemma 4's template thinks with <|think|> in
// its system turn when enable_thinking is on (the default here, as in
// llama.cpp), and off opens the model's turn with an empty thought
// channel; an earlier answer is rendered without its thought, also when
// a client sends it back with the channel in its content (the template's
// strip_thinking), which the ThinkSplitter then leaves out of a new
// answer's content.
func TestGemma4ThinkingRender(t *testing.T) {
	t.Parallel()
	tmpl := compileGolden(t, "google-gemma-4-31B-it")
	if !tmpl.SupportsThinking() {
		t.Fatal("no thinking switch")
	}
	msgs := []Message{
		{Role: "user", Content: "What is 2 + 2?"},
		{Role: "assistant", Content: "<|channel>thought\nadd them<channel|>It is 4."},
		{Role: "user", Content: "And 3 + 3?"},
	}
	history := "<|turn>user\nWhat is 2 + 2?<turn|>\n<|turn>model\nIt is 4.<turn|>\n<|turn>user\nAnd 3 + 3?<turn|>\n"
	for _, c := range []struct {
		extra map[string]any
		want  string
	}{
		{nil, "<|turn>system\n<|think|>\n<turn|>\n" + history + "<|turn>model\n"},
		{map[string]any{"enable_thinking": true}, "<|turn>system\n<|think|>\n<turn|>\n" + history + "<|turn>model\n"},
		{map[string]any{"enable_thinking": false}, history + "<|turn>model\n<|channel>thought\n<channel|>"},
	} {
		out, err := tmpl.Render(msgs, Options{AddGenerationPrompt: true, Extra: c.extra})
		if err != nil {
			t.Fatal(err)
		}
		if out != c.want {
			t.Errorf("enable_thinking %v: %s", c.extra, firstDiff(out, c.want))
		}
	}
}
