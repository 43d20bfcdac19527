package chat

import (
	"errors"
	"strings"
	"testing"
)

// hostile are templates that, without the guard, kill the process (stack
// overflow, an allocation of terabytes) or run for hours. Each must fail
// with ErrLimit, at Compile (the trial renders) or at Render.
var hostile = map[string]string{
	"macro recursion":       `{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}`,
	"mutual recursion":      `{% macro a(n) %}{{ b(n) }}{% endmacro %}{% macro b(n) %}x{{ a(n) }}{% endmacro %}{{ a(1) }}`,
	"caller recursion":      `{% macro f() %}{{ caller() }}{% endmacro %}{% macro g() %}{% call f() %}{{ g() }}{% endcall %}{% endmacro %}{{ g() }}`,
	"recursion building":    `{% macro f(s) %}{{ f(s ~ s) }}{% endmacro %}{{ f('ab') }}`,
	"nested loops":          `{% for i in range(60000) %}{% for j in range(60000) %}{% endfor %}{% endfor %}`,
	"loop printing":         `{% for i in range(60000) %}{% for j in range(1000) %}xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx{% endfor %}{% endfor %}`,
	"string repeat":         `{{ 'x' * 1000000000000 }}`,
	"computed repeat":       `{{ 'ab' * (1000000 * 1000000) }}`,
	"doubling":              `{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}`,
	"doubling by set":       `{% set s = 'ab' %}` + strings.Repeat(`{% set s = s ~ s %}`, 40) + `{{ s|length }}`,
	"list doubling":         `{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l|length }}`,
	"shared refs printed":   `{% set s = 'x' * 1000000 %}{% set l = [s, s, s, s, s, s, s, s] %}{% set ns = namespace(l=l) %}{% for i in range(20) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ ns.l }}`,
	"shared refs joined":    `{% set s = 'x' * 1000000 %}{% set l = [] %}{% for i in range(5000) %}{% set _ = l.append(s) %}{% endfor %}{{ l|join(',') }}`,
	"replace blowup":        `{% set s = 'x' * 100000 %}{{ s.replace('', s) }}`,
	"replace filter":        `{% set s = 'x' * 100000 %}{{ s|replace('', s) }}`,
	"indent width":          `{{ 'a\nb'|indent(1000000000000) }}`,
	"tojson indent":         `{{ [1, [2]]|tojson(indent=1000000000000) }}`,
	"format blowup":         `{% set s = 'x' * 1000000 %}{{ ('{0}' * 1000).format(s) }}`,
	"slice bound":           `{{ [1, 2, 3][0:10000000000000:2] }}`,
	"slice bound negative":  `{{ [1, 2, 3][10000000000000:0:-2] }}`,
	"list cycle":            `{% set l = [] %}{% set _ = l.append(l) %}{{ l }}`,
	"list cycle insert":     `{% set l = [1] %}{% set _ = l.insert(0, [l]) %}{{ l }}`,
	"dict cycle":            `{% set d = {} %}{% set _ = d.update({'me': d}) %}{{ d }}`,
	"namespace cycle":       `{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns }}`,
	"deep nesting built":    `{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l == ns.l }}`,
	"brackets":              `{{ ` + strings.Repeat("(", 100000) + "1" + strings.Repeat(")", 100000) + ` }}`,
	"not chain":             `{{ ` + strings.Repeat("not ", 100000) + `1 }}`,
	"minus chain":           `{{ ` + strings.Repeat("-", 100000) + `1 }}`,
	"else chain":            `{{ ` + strings.Repeat("1 if 0 else ", 100000) + `1 }}`,
	"blocks":                strings.Repeat("{% if 1 %}", 100000) + strings.Repeat("{% endif %}", 100000),
	"huge source":           strings.Repeat("x", 300<<10),
	"range sum":             `{% set ns = namespace(n=0) %}{% for i in range(1000) %}{% set ns.n = ns.n + (range(60000)|length) %}{% endfor %}{{ ns.n }}`,
	"measured args":         `{% set s = 'x' * 1000000 %}{% set ns = namespace(l=[s]) %}{% for i in range(30) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ 'a'.startswith(ns.l) }}`,
	"dict key serialized":   `{% set s = 'x' * 1000000 %}{% set ns = namespace(l=[s]) %}{% for i in range(30) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ {}[ns.l] }}`,
	"unique of shared refs": `{% set s = 'x' * 1000000 %}{% set ns = namespace(l=[s]) %}{% for i in range(30) %}{% set ns.l = [ns.l, ns.l] %}{% endfor %}{{ [ns.l, ns.l]|unique|length }}`,
}

// slowHostile run to a limit of steps or bytes (a second or so natively):
// -short (the emulated runs) leaves them out.
var slowHostile = map[string]bool{"loop printing": true, "nested loops": true, "range sum": true, "list doubling": true, "caller recursion": true}

func TestHostileTemplates(t *testing.T) {
	t.Parallel()
	msgs := []Message{{Role: "user", Content: "hi"}}
	for name, src := range hostile {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			if testing.Short() && slowHostile[name] {
				t.Skip("runs to a limit; left out under -short")
			}
			tmpl, err := Compile(src)
			if err == nil {
				_, err = tmpl.Render(msgs, Options{AddGenerationPrompt: true})
			}
			if !errors.Is(err, ErrLimit) {
				t.Fatalf("got %v, want an error wrapping ErrLimit", err)
			}
			if strings.ContainsAny(err.Error(), "\r\n") || len(err.Error()) > 200 {
				t.Errorf("error is not one short line: %q", err)
			}
		})
	}
}

// TestHostileAtCompile: templates that recurse or loop without end
// whatever the conversation are refused by Compile itself (so engine.Load
// refuses the model file).
func TestHostileAtCompile(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"macro recursion", "mutual recursion", "caller recursion", "nested loops", "string repeat", "list cycle", "brackets", "huge source"} {
		if testing.Short() && slowHostile[name] {
			continue
		}
		if _, err := Compile(hostile[name]); !errors.Is(err, ErrLimit) {
			t.Errorf("%s: Compile: got %v, want an error wrapping ErrLimit", name, err)
		}
	}
}

// TestGuardKeepsSemantics renders the operators and calls the guard
// replaces and checks the engine's own results come out.
func TestGuardKeepsSemantics(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ src, want string }{
		{`{{ 'ab' * 3 }}|{{ 2 * 3 }}|{{ 2 * 1.5 }}|{{ 'a' * 0 }}|{{ True * 3 }}`, "ababab|6|3||3"},
		{`{{ 'a' + 'b' }}|{{ 1 + 2 }}|{{ 1 + 0.5 }}|{{ [1] + [2, 3] }}|{{ 'n' + 1 }}|{{ 1 ~ 2 ~ none }}`, "ab|3|1.5|[1, 2, 3]|n1|12"},
		{`{{ 'a-b-c'.replace('-', '+') }}|{{ 'a-b-c'|replace('-', '', 1) }}|{{ 'x{0}{1}'.format(1, 'y') }}`, "a+b+c|ab-c|x1y"},
		{`{{ 'a\nb'|indent(2) }}|{{ 'a\nb'|indent(width=1, first=true) }}`, "a\n  b| a\n b"},
		{`{{ [1, {'a': 'b'}]|tojson }}|{{ {'a': [1, 2]}|tojson(indent=2) }}`, "[1, {\"a\": \"b\"}]|{\n  \"a\": [\n    1,\n    2\n  ]\n}"},
		{`{{ [1, 2, 3, 4, 5][4:0:-2] }}|{{ [1, 2, 3][::-1] }}|{{ 'abcdef'[1:5:2] }}`, "[5, 3]|[3, 2, 1]|bd"},
		{`{% set l = [] %}{% set _ = l.append(1) %}{% set _ = l.insert(0, 0) %}{% set d = {} %}{% set _ = d.update({'k': l}) %}{{ d }}`, "{'k': [0, 1]}"},
		{`{% set ns = namespace(x=[]) %}{% set ns.x = ns.x + [1] %}{% set ns.y = [ns.x] %}{{ ns.y }}`, "[[1]]"},
		{`{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}`, "54321"},
		{`{% for m in messages %}{{ loop.index }}{{ m.role|upper }}{% endfor %}{{ messages|length }}`, "1USER1"},
		{`{{ ['a', 'b']|join(', ') }}|{{ [1, 2]|join }}|{{ {'a': 1}['a'] }}|{{ {'k' ~ 1: 2}['k1'] }}`, "a, b|12|1|2"},
	} {
		got, err := render(c.src, []Message{{Role: "user", Content: "hi"}}, Options{})
		if err != nil {
			t.Errorf("%s: %v", c.src, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.src, got, c.want)
		}
	}
}

// TestLimitsApply: every limit is enforced at its value, and a render just
// within it passes.
func TestLimitsApply(t *testing.T) {
	t.Parallel()
	lim := DefaultLimits
	lim.Output = 1000
	tmpl, err := CompileLimits(`{{ 'x' * n }}`, lim)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := tmpl.Render(nil, Options{Extra: map[string]any{"n": 1000}}); err != nil || len(out) != 1000 {
		t.Errorf("1000 bytes: %d, %v", len(out), err)
	}
	if _, err := tmpl.Render(nil, Options{Extra: map[string]any{"n": 1001}}); !errors.Is(err, ErrLimit) {
		t.Errorf("1001 bytes: %v", err)
	}

	lim = DefaultLimits
	lim.Steps = 100000 // an iteration of an empty body costs 1 + iterationCost
	tmpl, err = CompileLimits(`{% for i in range(n) %}{% endfor %}`, lim)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmpl.Render(nil, Options{Extra: map[string]any{"n": 9000}}); err != nil {
		t.Errorf("9000 iterations: %v", err)
	}
	if _, err := tmpl.Render(nil, Options{Extra: map[string]any{"n": 11000}}); !errors.Is(err, ErrLimit) {
		t.Errorf("11000 iterations: %v", err)
	}

	// The same template renders again after a render that hit a limit:
	// the budget is per render.
	if _, err := tmpl.Render(nil, Options{Extra: map[string]any{"n": 10}}); err != nil {
		t.Errorf("after a refused render: %v", err)
	}
}

// TestRecursionDepth: legitimate recursion (a macro walking a nested
// schema) works to a reasonable depth; runaway recursion stops with a
// small stack.
func TestRecursionDepth(t *testing.T) {
	t.Parallel()
	src := `{% macro f(n) %}{% if n > 0 %}({{ f(n - 1) }}){% endif %}{% endmacro %}{{ f(depth) }}`
	tmpl, err := Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tmpl.Render(nil, Options{Extra: map[string]any{"depth": 100}})
	if err != nil || len(out) != 200 {
		t.Fatalf("depth 100: %d bytes, %v", len(out), err)
	}
	if _, err := tmpl.Render(nil, Options{Extra: map[string]any{"depth": 1000000}}); !errors.Is(err, ErrLimit) {
		t.Fatalf("depth 10^6: %v", err)
	}
}

func TestReservedPrefix(t *testing.T) {
	t.Parallel()
	if _, err := Compile(`{{ __geist_print }}`); err == nil {
		t.Error("a template naming a guard function compiled")
	}
}
