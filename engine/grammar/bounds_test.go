package grammar

import (
	"errors"
	"strings"
	"testing"
)

// TestNumericBounds: any bound a JSON Schema validator takes is taken:
// zod 4's .int() (±(2^53-1)), 1e300, a fraction, an exclusive bound on a
// number. Where the bound fits the grammar's integers (16 digits) it is
// enforced exactly; where not, the grammar writes what is near it and
// SchemaCheck checks the value exactly.
func TestNumericBounds(t *testing.T) {
	t.Parallel()
	type c struct {
		schema    string
		in, out   []string // sentences the grammar accepts / refuses
		pass, bad []string // answers the check passes / refuses (a nil check passes all)
	}
	cases := []c{
		{schema: `{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991}`,
			in: []string{"0", "-5", "9007199254740991", "-9007199254740991"}, out: []string{"9007199254740992", "1.5"}},
		{schema: `{"type":"integer","minimum":-1e300,"maximum":1e300}`, in: []string{"0", "-12", "9999999999999999"}},
		{schema: `{"type":"integer","exclusiveMinimum":0,"maximum":1e300}`, in: []string{"1", "1234567890123456"}, out: []string{"0", "-1"}},
		{schema: `{"type":"integer","minimum":1e20}`, in: []string{"100000000000000000000", "900000000000000000000"}, out: []string{"5", "-100000000000000000000"},
			pass: []string{"100000000000000000000"}, bad: []string{"99999999999999999999"}},
		{schema: `{"type":"integer","maximum":-1e20}`, in: []string{"-100000000000000000000"}, out: []string{"5"},
			pass: []string{"-100000000000000000000"}, bad: []string{"-99999999999999999999"}},
		{schema: `{"type":"integer","minimum":0.5,"exclusiveMaximum":3}`, in: []string{"1", "2"}, out: []string{"0", "3"}},
		{schema: `{"type":"number","minimum":0,"maximum":1}`, in: []string{"0", "0.5", "1"}, out: []string{"-0.5"},
			pass: []string{"0.25", "1", "0"}, bad: []string{"1.5", "2e3"}},
		{schema: `{"type":"number","exclusiveMinimum":-1e300,"exclusiveMaximum":-2.5}`, in: []string{"-3"}, out: []string{"3"},
			pass: []string{"-3"}, bad: []string{"-2.5", "-1"}},
		{schema: `{"type":"object","properties":{"n":{"type":"number","maximum":10}},"required":["n"]}`, in: []string{`{"n": 3}`},
			pass: []string{`{"n": 3}`}, bad: []string{`{"n": 11}`}},
	}
	for _, tc := range cases {
		src, err := FromSchema([]byte(tc.schema))
		if err != nil {
			t.Errorf("%s: %v", tc.schema, err)
			continue
		}
		g, err := Parse(src)
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.schema, err, src)
		}
		for _, s := range tc.in {
			if !accepts(t, g, s) {
				t.Errorf("%s: %s refused by the grammar\n%s", tc.schema, s, src)
			}
		}
		for _, s := range tc.out {
			if accepts(t, g, s) {
				t.Errorf("%s: %s accepted by the grammar", tc.schema, s)
			}
		}
		check, err := SchemaCheck([]byte(tc.schema))
		if err != nil {
			t.Fatal(err)
		}
		if check == nil && len(tc.bad) > 0 {
			t.Errorf("%s: no check", tc.schema)
			continue
		}
		for _, s := range tc.pass {
			if err := check([]byte(s)); err != nil {
				t.Errorf("%s: %s: %v", tc.schema, s, err)
			}
		}
		for _, s := range tc.bad {
			if err := check([]byte(s)); !errors.Is(err, ErrBounds) {
				t.Errorf("%s: %s: %v, want ErrBounds", tc.schema, s, err)
			} else {
				t.Log(err)
			}
		}
	}
	for _, bad := range []string{`{"type":"integer","minimum":"1"}`, `{"type":"integer","minimum":5,"maximum":4}`, `{"type":"number","minimum":2,"maximum":1}`} {
		if _, err := FromSchema([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// TestLengthBounds: a length or count past what is enforced is refused
// naming the keyword that is (minLength, not maxLength), and every
// length the message promises compiles: minLength = maxLength = 10000,
// and 10,000 integer items (the item rule is called, not copied
// 10,000 times).
func TestLengthBounds(t *testing.T) {
	t.Parallel()
	for schema, kw := range map[string]string{
		`{"type":"string","minLength":1e9}`:        "minLength",
		`{"type":"string","minLength":1000000000}`: "minLength",
		`{"type":"string","maxLength":10001}`:      "maxLength",
		`{"type":"array","minItems":1e9}`:          "minItems",
		`{"type":"array","maxItems":1000000000}`:   "maxItems",
	} {
		_, err := FromSchema([]byte(schema))
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `"`+kw+`"`) {
			t.Errorf("%s: %v, want an error naming %q", schema, err, kw)
		}
	}
	for _, schema := range []string{
		`{"type":"string","minLength":10000,"maxLength":10000}`,
		`{"type":"string","maxLength":10000}`,
		`{"type":"string","minLength":1e4}`,
		`{"type":"array","items":{"type":"integer"},"minItems":10000,"maxItems":10000}`,
	} {
		src, err := FromSchema([]byte(schema))
		if err == nil {
			_, err = Parse(src)
		}
		if err != nil {
			t.Errorf("%s: %v", schema, err)
		}
	}
	src, _ := FromSchema([]byte(`{"type":"string","minLength":10000,"maxLength":10000}`))
	g, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	ten := strings.Repeat("é", 10000)
	if !accepts(t, g, `"`+ten+`"`) || accepts(t, g, `"`+ten+`a"`) || accepts(t, g, `"`+ten[2:]+`"`) {
		t.Error("the grammar of exactly 10,000 characters is wrong")
	}
}

// TestWhitespaceBounded: the JSON grammars (format "json" and a schema's)
// bound white space by llama.cpp's space rule (common/
// json-schema-to-grammar.cpp: | " " | "\n"{1,2} [ \t]{0,20}): one blank,
// or one or two newlines and up to 20 blanks or tabs, wherever a space
// may go.
func TestWhitespaceBounded(t *testing.T) {
	t.Parallel()
	schema, err := FromSchema([]byte(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"array","items":{"type":"string"}}},"required":["a","b"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{AnyJSON(), schema} {
		g, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		tabs := func(n int) string { return strings.Repeat("\t", n) }
		for _, s := range []string{`{"a": 1, "b": []}`, "{\n\n" + tabs(20) + `"a":` + "\n" + tabs(20) + `1,"b":[ ]}`} {
			if !accepts(t, g, s) {
				t.Errorf("%q refused", s)
			}
		}
		for _, s := range []string{"{\n\n\n" + `"a": 1, "b": []}`, "{\n" + tabs(21) + `"a": 1, "b": []}`, `{"a":  1, "b": []}`, ` {"a": 1, "b": []}`} {
			if accepts(t, g, s) {
				t.Errorf("%q accepted", s)
			}
		}
	}
}
