package chat

import (
	"testing"
	"time"
)

// fuzzLimits are DefaultLimits scaled down so that a fuzzing run spends its
// time on many templates rather than on a few that loop to the limit.
var fuzzLimits = Limits{Source: 64 << 10, Nesting: 32, Steps: 1 << 16, Frames: 2048, Bytes: 4 << 20, Output: 1 << 20}

// FuzzRender feeds arbitrary template text and message content through
// Compile and Render: errors are fine; a crash, a hang or memory growth
// past the limits is not. Recursion, loops and string building are
// included: the guard bounds them.
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
		hostile["macro recursion"],
		hostile["caller recursion"],
		hostile["recursion building"],
		hostile["doubling"],
		hostile["list cycle"],
		hostile["dict cycle"],
		hostile["slice bound"],
		hostile["replace blowup"],
		`{% macro f(n) %}{% for i in range(n) %}{{ f(n - 1) }}{% endfor %}{% endmacro %}{{ f(9) }}`,
		`{% set l = [] %}{% for i in range(100) %}{% set _ = l.append(l|length) %}{% endfor %}{{ l|join('-') * 10 }}`,
	} {
		f.Add(s, "hello {{ }} {% %}")
	}
	f.Fuzz(func(t *testing.T, src, content string) {
		tmpl, err := CompileLimits(src, fuzzLimits)
		if err != nil {
			return
		}
		msgs := []Message{{Role: "system", Content: content}, {Role: "user", Content: content}}
		out, err := tmpl.Render(msgs, Options{AddGenerationPrompt: true, BOS: "<s>", EOS: "</s>"})
		if err == nil && len(out) > fuzzLimits.Output {
			t.Fatalf("a %d-byte prompt passed the output limit", len(out))
		}
	})
}

// costLimits give the step budget room and bound a render by its clock:
// FuzzTemplateCost checks that the clock holds whatever the template
// does (issue 22: work per step was unbounded).
var costLimits = Limits{Source: 64 << 10, Nesting: 32, Steps: 1 << 26, Frames: 2048, Bytes: 64 << 20, Output: 4 << 20, Time: 100 * time.Millisecond}

// FuzzTemplateCost: compiling (its trial renders share one budget) and
// rendering any template take no longer than Limits.Time, plus the slack
// of one bounded operation.
func FuzzTemplateCost(f *testing.F) {
	for _, s := range []string{
		`{% set s = 'x' * 4000000 %}{% for i in range(1000) %}{{ s.upper()|length }}{% endfor %}`,
		`{% set s = 'ab' * 2000000 %}{% for i in range(65536) %}{{ s.count('b') }}{{ 'c' in s }}{% endfor %}`,
		`{% set s = 'x' * 4000000 %}{{ (s|list)|length }}{{ s.split('')|length }}{{ s.split('x')|length }}`,
		`{% set s = messages[0].content * 100000 %}{% for m in messages %}{% for i in range(1000) %}{{ s.strip().startswith('a') }}{% endfor %}{% endfor %}`,
		`{% macro f(n) %}{% for i in range(n) %}{{ f(n - 1) }}{% endfor %}{% endmacro %}{{ f(9) }}`,
		`{% set s = 'x' * 1000000 %}{% for k in range(300) %}{{ s.replace('x', 'yy')|length }}{{ s|title|length }}{% endfor %}`,
	} {
		f.Add(s, "hello")
	}
	f.Fuzz(func(t *testing.T, src, content string) {
		start := time.Now()
		tmpl, err := CompileLimits(src, costLimits)
		if took := time.Since(start); took > costLimits.Time+costSlack() {
			t.Fatalf("compiling took %v, past the %v budget (%v)", took, costLimits.Time, err)
		}
		if err != nil {
			return
		}
		msgs := []Message{{Role: "system", Content: content}, {Role: "user", Content: content}}
		start = time.Now()
		_, err = tmpl.Render(msgs, Options{AddGenerationPrompt: true})
		if took := time.Since(start); took > costLimits.Time+costSlack() {
			t.Fatalf("rendering took %v, past the %v budget (%v)", took, costLimits.Time, err)
		}
	})
}
