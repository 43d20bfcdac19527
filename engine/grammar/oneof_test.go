package grammar

import (
	"errors"
	"strings"
	"testing"
)

// TestOneOf: alternatives the converter proves exclusive need no check;
// the others are checked after generation, and an answer matching
// several alternatives is ErrOneOf naming where.
func TestOneOf(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		`{"oneOf": [{"type": "string"}, {"type": "integer"}]}`,
		`{"oneOf": [{"const": "a"}, {"enum": ["b", "c"]}]}`,
		`{"oneOf": [{"type": "object", "properties": {"kind": {"const": "light"}, "level": {"type": "integer"}}, "required": ["kind"]},
		            {"type": "object", "properties": {"kind": {"const": "cover"}, "open": {"type": "boolean"}}, "required": ["kind"]}]}`,
		`{"$defs": {"a": {"type": "null"}}, "oneOf": [{"$ref": "#/$defs/a"}, {"type": "array"}]}`,
		`{"anyOf": [{"type": "integer"}, {"type": "number"}]}`,
	} {
		check, err := SchemaCheck([]byte(s))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if check != nil {
			t.Errorf("%s: exclusive, yet a check", s)
		}
	}
	for _, c := range []struct {
		schema   string
		good     []string
		bad      []string
		location string
	}{
		{`{"oneOf": [{"type": "integer"}, {"type": "number"}]}`, []string{`3.5`}, []string{`3`}, `"/"`},
		{`{"type": "object", "properties": {"v": {"oneOf": [{"type": "string", "maxLength": 5}, {"type": "string", "pattern": "^a"}]}}}`,
			[]string{`{"v": "bcd"}`, `{"v": "azzzzzzz"}`, `{}`}, []string{`{"v": "abc"}`}, `"/v"`},
		{`{"type": "array", "items": {"oneOf": [{"type": "object", "properties": {"a": {"type": "integer"}}}, {"type": "object", "properties": {"b": {"type": "integer"}}}]}}`,
			[]string{`[]`, `[{"a": 1}, {"b": 2}]`}, []string{`[{"a": 1}, {}]`}, `"/1"`},
		{`{"oneOf": [{"type": "object", "properties": {"kind": {"const": "x"}}}, {"type": "object", "properties": {"kind": {"const": "y"}}}]}`,
			[]string{`{"kind": "x"}`}, []string{`{}`}, `"/"`},
	} {
		check, err := SchemaCheck([]byte(c.schema))
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		if check == nil {
			t.Errorf("%s: not provably exclusive, yet no check", c.schema)
			continue
		}
		for _, g := range c.good {
			if err := check([]byte(g)); err != nil {
				t.Errorf("%s: %s refused: %v", c.schema, g, err)
			}
		}
		for _, b := range c.bad {
			err := check([]byte(b))
			if !errors.Is(err, ErrOneOf) || !strings.Contains(err.Error(), c.location) {
				t.Errorf("%s: %s: error %v, want ErrOneOf at %s", c.schema, b, err, c.location)
			}
		}
	}
}
