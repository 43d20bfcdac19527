package chat

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ardanlabs/jinja"
)

var convo = []Message{
	{Role: "system", Content: "Be brief."},
	{Role: "user", Content: "Hi"},
	{Role: "assistant", Content: "Hello."},
	{Role: "user", Content: "Bye"},
}

func TestChatML(t *testing.T) {
	t.Parallel()
	want := "<|im_start|>system\nBe brief.<|im_end|>\n" +
		"<|im_start|>user\nHi<|im_end|>\n" +
		"<|im_start|>assistant\nHello.<|im_end|>\n" +
		"<|im_start|>user\nBye<|im_end|>\n"
	for _, src := range []string{ChatML, ""} {
		got, err := render(src, convo, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("without generation prompt:\n%s", firstDiff(got, want))
		}
		got, err = render(src, convo, Options{AddGenerationPrompt: true})
		if err != nil {
			t.Fatal(err)
		}
		if w := want + "<|im_start|>assistant\n"; got != w {
			t.Errorf("with generation prompt:\n%s", firstDiff(got, w))
		}
	}
}

func TestRaiseException(t *testing.T) {
	t.Parallel()
	src := `{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{{ m.content }}{% endfor %}`
	tmpl, err := Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	// A template that rejects system messages gets them merged into the
	// next message, as llama.cpp does, so rendering works.
	got, err := tmpl.Render(convo, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "Be brief.\nHiHello.Bye"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}

	// This one raises on any conversation of two messages or more, so the
	// probe also finds it ignoring system messages and merges the first
	// one into the second: four messages become three.
	src = `{% if messages|length > 1 %}{{ raise_exception('Only one message, please: ' ~ messages|length) }}{% endif %}ok`
	_, err = render(src, convo, Options{})
	if err == nil {
		t.Fatal("raise_exception did not produce an error")
	}
	if !errors.Is(err, ErrRaised) {
		t.Errorf("error %v does not wrap ErrRaised", err)
	}
	if !strings.Contains(err.Error(), "Only one message, please: 3") {
		t.Errorf("error %q does not carry the template's message", err)
	}
	got, err = render(src, convo[:1], Options{})
	if err != nil || got != "ok" {
		t.Errorf("got %q, %v; want ok", got, err)
	}
}

func TestMalformedTemplates(t *testing.T) {
	t.Parallel()
	bad := []string{
		`{% for m in messages %}{{ m.content }}`,       // missing endfor
		`{% if x %}a{% else %}b{% else %}c{% endif %}`, // two else
		`{{ messages[0].content `,                      // unclosed output
		`{% endif %}`,                                  // stray end tag
		`{{ 1 + }}`,                                    // bad expression
		`{% set %}`,                                    // empty set
		`{{ messages | nosuchfilter }}`,                // unknown filter
		`{{ nosuchfunction() }}`,                       // undefined call
		`{{ messages[0].content.nosuchmethod() }}`,     // unknown method
	}
	for _, src := range bad {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%q: panic escaped: %v", src, r)
				}
			}()
			tmpl, err := Compile(src)
			if err != nil {
				if !strings.HasPrefix(err.Error(), "chat: ") {
					t.Errorf("%q: error %q lacks the package prefix", src, err)
				}
				return
			}
			out, err := tmpl.Render(convo, Options{})
			if err == nil {
				t.Logf("%q: accepted, rendered %q", src, out)
				return
			}
			if !strings.HasPrefix(err.Error(), "chat: ") {
				t.Errorf("%q: error %q lacks the package prefix", src, err)
			}
		}()
	}
	// The first four are syntax errors and must fail to compile.
	for _, src := range bad[:4] {
		if _, err := Compile(src); err == nil {
			t.Errorf("%q: compiled without error", src)
		}
	}
}

func TestVariables(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, time.March, 5, 14, 7, 9, 0, time.UTC)
	src := `{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt is defined }}|` +
		`{{ tools is defined }}|{{ enable_thinking }}|{{ date_string }}|{{ datetime }}|` +
		`{{ strftime_now('%Y-%m-%d %H:%M:%S') }}|{{ messages | length }}`
	got, err := render(src, convo[1:2], Options{BOS: "<s>", EOS: "</s>", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	// The leading BOS is stripped: the tokenizer adds it.
	// Booleans print as Python does.
	want := "|</s>|False|False|True|05 Mar 2026|Mar 05 2026|2026-03-05 14:07:09|1"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	got, err = render(src, convo[1:2], Options{BOS: "<s>", EOS: "</s>", Now: now, AddGenerationPrompt: true,
		Extra: map[string]any{"enable_thinking": false, "date_string": "today"}})
	if err != nil {
		t.Fatal(err)
	}
	want = "|</s>|True|False|False|today|Mar 05 2026|2026-03-05 14:07:09|1"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	// An Extra jinja.Value keeps its key order; a Go map is sorted.
	ordered := jinja.NewDict()
	ordered.AsDict().Set("b", jinja.NewInt(1))
	ordered.AsDict().Set("a", jinja.NewInt(2))
	got, err = render(`{{ o | tojson }} {{ m | tojson }}`, nil, Options{Extra: map[string]any{
		"o": ordered, "m": map[string]any{"b": 1, "a": 2}}})
	if want := `{"b": 1, "a": 2} {"a": 2, "b": 1}`; err != nil || got != want {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
	// Only a leading BOS is stripped.
	got, err = render(`{{ bos_token }}{{ bos_token }}x{{ bos_token }}`, nil, Options{BOS: "<s>"})
	if err != nil || got != "<s>x<s>" {
		t.Errorf("got %q, %v; want %q", got, err, "<s>x<s>")
	}
}

func TestDeveloperRole(t *testing.T) {
	t.Parallel()
	got, err := render(ChatML, []Message{{Role: "developer", Content: "d"}, {Role: "user", Content: "u"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "<|im_start|>system\nd<|im_end|>\n<|im_start|>user\nu<|im_end|>\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSystemRoleProbe(t *testing.T) {
	t.Parallel()
	// A template that silently drops system messages gets them merged into
	// the first user message; a lone system message disappears.
	src := `{% for m in messages %}{% if m.role != 'system' %}[{{ m.role }}]{{ m.content }}{% endif %}{% endfor %}`
	tmpl, err := Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	if tmpl.systemRole {
		t.Fatal("probe: template reported as using system messages")
	}
	got, err := tmpl.Render(convo, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "[user]Be brief.\nHi[assistant]Hello.[user]Bye"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	got, err = tmpl.Render(convo[:1], Options{})
	if err != nil || got != "" {
		t.Errorf("lone system message: got %q, %v; want empty", got, err)
	}
	if ct, _ := Compile(ChatML); !ct.systemRole {
		t.Error("probe: ChatML reported as ignoring system messages")
	}
}

func TestTypedContentProbe(t *testing.T) {
	t.Parallel()
	// A template that reads content only as a list of typed parts.
	src := `{% for m in messages %}{{ m.role }}:{{ m.content[0].text }};{% endfor %}`
	tmpl, err := Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render(convo[1:3], Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "user:Hi;assistant:Hello.;"; got != want {
		t.Errorf("got %q, want %q (typed content: %v)", got, want, tmpl.typedContent)
	}
}

func TestCompiledReuse(t *testing.T) {
	t.Parallel()
	tmpl, err := Compile(ChatML)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 4)
	for i := range 4 {
		go func() {
			out, err := tmpl.Render(convo[:i+1], Options{AddGenerationPrompt: true})
			if err != nil {
				out = err.Error()
			}
			done <- out
		}()
	}
	for range 4 {
		if out := <-done; !strings.HasSuffix(out, "<|im_start|>assistant\n") {
			t.Errorf("concurrent render: %q", out)
		}
	}
	var nilT *Template
	if _, err := nilT.Render(convo, Options{}); err == nil {
		t.Error("nil template rendered without error")
	}
}

func TestRange(t *testing.T) {
	t.Parallel()
	tests := []struct{ src, want string }{
		{`{{ range(4) }}`, "[0, 1, 2, 3]"},
		{`{{ range(2, 5) }}`, "[2, 3, 4]"},
		{`{{ range(5, 0, -2) }}`, "[5, 3, 1]"},
		{`{{ range(0, 10, 4) }}`, "[0, 4, 8]"},
		{`{{ range(3, 3) }}{{ range(-2) }}{{ range(0, 5, -1) }}`, "[][][]"},
		{`{% for i in range(messages|length - 1, -1, -1) %}{{ messages[i].content }},{% endfor %}`, "Bye,Hello.,Hi,Be brief.,"},
	}
	for _, tc := range tests {
		got, err := render(tc.src, convo, Options{})
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.src, got, err, tc.want)
		}
	}
	for _, src := range []string{`{{ range(10**12) | length }}`, `{{ range(1, 2, 0) }}`, `{{ range() }}`, `{{ range('a') }}`} {
		if got, err := render(src, convo, Options{}); err == nil {
			t.Errorf("%s: no error, rendered %q", src, got)
		}
	}
}

// render compiles src and renders msgs with it.
func render(src string, msgs []Message, opt Options) (string, error) {
	t, err := Compile(src)
	if err != nil {
		return "", err
	}
	return t.Render(msgs, opt)
}
