package dialect

import (
	"slices"
	"testing"
)

// TestRegistry: Detect tries the families in their registered order (a
// template may show more than one's texts), ByName finds each, Or maps
// nil to Any, and a name registered twice panics.
func TestRegistry(t *testing.T) {
	t.Parallel()
	if got, want := Names(), []string{"gemma4", "qwen35", "tagged", "phi4", "granite", "lfm2", "json", "any"}; !slices.Equal(got, want) {
		t.Errorf("Names %q, want %q", got, want)
	}
	for _, c := range []struct {
		src  string
		want Dialect
	}{
		{"<|tool_call>call:{{ name }}<tool_call|> <tool_call>", Gemma4},
		{"<|channel>thought\n", Gemma4},
		{"<tool_call> <|tool_call|> ipython", Hermes},
		{"<tool_call>\n<function={{ name }}> <|tool_call|> ipython", Qwen35},
		{"<|tool_call|>[...]<|/tool_call|>", Phi4},
		{"<|tool_call|> <|tool_call_start|>", Granite},
		{"<|tool_call_start|> ipython", LFM2},
		{"ipython", Llama},
		{"", Any},
	} {
		if got := Detect(c.src); got != c.want {
			t.Errorf("Detect(%q): %v, want %v", c.src, got, c.want)
		}
	}
	for _, n := range Names() {
		if d, ok := ByName(n); !ok || d.Name() != n {
			t.Errorf("ByName(%q): %v %v", n, d, ok)
		}
	}
	if _, ok := ByName("nope"); ok {
		t.Error("ByName(nope) found one")
	}
	if Or(nil) != Any || Or(LFM2) != LFM2 {
		t.Error("Or")
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a name twice did not panic")
		}
	}()
	Register(&hermes{family{"tagged", Tags{}}}, 99)
}

// checkDialect holds d to its registry name, to being what Detect finds
// in the template texts given, to its tool tokens and its thinking marks.
func checkDialect(t *testing.T, d Dialect, name string, templates, tokens []string, marks ThinkMarks) {
	t.Helper()
	if got, ok := ByName(name); !ok || got != d || d.String() != name {
		t.Errorf("ByName(%s): %v %v", name, got, ok)
	}
	for _, src := range templates {
		if got := Detect(src); got != d {
			t.Errorf("Detect(%q): %v, want %s", src, got, name)
		}
	}
	if got := d.ToolTokens(); !slices.Equal(got, tokens) {
		t.Errorf("%s: ToolTokens %q, want %q", name, got, tokens)
	}
	if d.ThinkMarks() != marks || (marks == ThinkTags) != (d.ThinkTokens() == nil) {
		t.Errorf("%s: thinking %q %q", name, d.ThinkMarks(), d.ThinkTokens())
	}
}
