package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// oneOf asks for exactly one matching alternative. A grammar can only
// give the union of the alternatives (anyOf), so the converter proves
// the alternatives exclusive where it can: different types, disjoint
// const/enum values, or a property both require whose const/enum values
// are disjoint (a discriminator, the common use). Where it cannot, the
// grammar is the union and the answer is checked after generation
// (SchemaCheck): one that matches several alternatives is an error
// naming them, never passed on as valid.

// ErrOneOf is wrapped by the error of an answer that matches several of
// a oneOf's alternatives.
var ErrOneOf = fmt.Errorf("grammar: the answer matches more than one of a oneOf's alternatives")

// exclusive reports whether no JSON value can match two of alts.
func (c *converter) exclusive(alts []any) bool {
	for i := range alts {
		for j := i + 1; j < len(alts); j++ {
			if !c.disjoint(alts[i], alts[j], 0) {
				return false
			}
		}
	}
	return true
}

// values is the set of JSON values (as canonical JSON) a schema allows,
// when it lists them (const, enum).
func values(s *ordered) ([]string, bool) {
	var vals []any
	if v, ok := s.get("const"); ok {
		vals = []any{v}
	} else if v, ok := s.get("enum"); ok {
		vals, _ = v.([]any)
	} else {
		return nil, false
	}
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		b, err := json.Marshal(plain(v))
		if err != nil {
			return nil, false
		}
		out = append(out, string(b))
	}
	return out, true
}

// types is the set of JSON types a schema allows (integer counted as
// number too), when it says.
func types(s *ordered) ([]string, bool) {
	if vals, ok := values(s); ok {
		var out []string
		for _, v := range vals {
			var t string
			switch {
			case v == "null":
				t = "null"
			case v == "true" || v == "false":
				t = "boolean"
			case v[0] == '"':
				t = "string"
			case v[0] == '{':
				t = "object"
			case v[0] == '[':
				t = "array"
			default:
				t = "number"
			}
			out = append(out, t)
		}
		return out, true
	}
	var ts []string
	switch t := s.vals["type"].(type) {
	case string:
		ts = []string{t}
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				ts = append(ts, s)
			}
		}
	default:
		return nil, false
	}
	if slices.Contains(ts, "integer") {
		ts = append(ts, "number")
	}
	return ts, true
}

func intersect(a, b []string) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

func (c *converter) deref(s any) (*ordered, bool) {
	for range 16 {
		o, ok := s.(*ordered)
		if !ok {
			return nil, false
		}
		r, ok := o.get("$ref")
		if !ok {
			return o, true
		}
		ref, _ := r.(string)
		t, err := c.resolve(ref, "")
		if err != nil {
			return nil, false
		}
		s = t
	}
	return nil, false
}

// disjoint reports whether a and b provably match no value in common.
func (c *converter) disjoint(a, b any, depth int) bool {
	x, ok1 := c.deref(a)
	y, ok2 := c.deref(b)
	if !ok1 || !ok2 || depth > 4 {
		return false
	}
	if va, ok := values(x); ok {
		if vb, ok := values(y); ok {
			return !intersect(va, vb)
		}
	}
	ta, ok1 := types(x)
	tb, ok2 := types(y)
	if ok1 && ok2 && !intersect(ta, tb) {
		return true
	}
	if ok1 && ok2 && !slices.Equal(ta, []string{"object"}) || !ok1 && !has(x, "properties") {
		return false
	}
	// A discriminator: a property both require, with disjoint values.
	pa, _ := x.vals["properties"].(*ordered)
	pb, _ := y.vals["properties"].(*ordered)
	ra, _ := x.vals["required"].([]any)
	rb, _ := y.vals["required"].([]any)
	if pa == nil || pb == nil {
		return false
	}
	for _, k := range pa.keys {
		if !slices.Contains(ra, any(k)) || !slices.Contains(rb, any(k)) {
			continue
		}
		if sb, ok := pb.get(k); ok && c.disjoint(pa.vals[k], sb, depth+1) {
			return true
		}
	}
	return false
}

// SchemaCheck returns the check an answer generated under schema's
// grammar still needs (nil when the grammar enforces everything): the
// exclusivity of the oneOfs the converter could not prove exclusive, and
// the numeric bounds it enforces only in part (a number's, an integer's
// beyond 16 digits).
func SchemaCheck(schema []byte) (func(answer []byte) error, error) {
	root, err := decodeOrdered(schema)
	if err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	c := &converter{root: root, rules: map[string]string{}, refs: map[string]string{}}
	if _, err := c.visit(root, "root", ""); err != nil {
		return nil, err
	}
	if !c.inexact && !c.loose {
		return nil, nil
	}
	return func(answer []byte) error {
		ch := &checker{root: root}
		return ch.walk(root, json.RawMessage(strings.TrimSpace(string(answer))), "", 0)
	}, nil
}

// checker walks an answer beside its schema to each oneOf.
type checker struct {
	root any
}

// matches reports whether raw is a sentence of s's grammar (the
// grammar is exactly the schema, the oneOfs in it as unions).
func (ch *checker) matches(s any, raw []byte) bool {
	c := &converter{root: ch.root, rules: map[string]string{}, refs: map[string]string{}}
	body, err := c.visit(s, "root", "")
	if err != nil {
		return false
	}
	var sb strings.Builder
	sb.WriteString("root ::= " + body + "\n")
	for _, n := range c.order {
		if n != "root" {
			fmt.Fprintf(&sb, "%s ::= %s\n", n, c.rules[n])
		}
	}
	g, err := Parse(sb.String())
	if err != nil {
		return false
	}
	m := Bind(g, emptyVocab).NewMatcher()
	return m.AcceptBytes(raw) && m.CanEnd()
}

var emptyVocab = NewVocab(nil, nil)

func (ch *checker) walk(s any, raw json.RawMessage, at string, depth int) error {
	if depth > 64 {
		return nil
	}
	c := &converter{root: ch.root}
	o, ok := c.deref(s)
	if !ok {
		return nil
	}
	for _, kw := range []string{"oneOf", "anyOf"} {
		v, ok := o.get(kw)
		if !ok {
			continue
		}
		subs, _ := v.([]any)
		var hit []int
		for i, sub := range subs {
			if ch.matches(merge(o, sub, kw), raw) {
				hit = append(hit, i)
			}
		}
		if kw == "oneOf" && len(hit) > 1 {
			return fmt.Errorf("%w: the value at %q matches alternatives %v of its oneOf (a grammar cannot keep them apart: make them exclusive, e.g. by a required property with different const values)", ErrOneOf, "/"+strings.TrimPrefix(at, "/"), hit)
		}
		var first error
		for _, i := range hit {
			err := ch.walk(merge(o, subs[i], kw), raw, at, depth+1)
			if err == nil {
				return nil
			}
			first = cmpOr(first, err)
		}
		return first
	}
	if v, ok := o.get("allOf"); ok {
		subs, _ := v.([]any)
		if m, err := c.allOf(o, subs, ""); err == nil {
			return ch.walk(m, raw, at, depth+1)
		}
		return nil
	}
	switch {
	case len(raw) > 0 && raw[0] == '{':
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return nil
		}
		props, _ := o.vals["properties"].(*ordered)
		for k, v := range obj {
			var sub any
			if props != nil {
				sub = props.vals[k]
			}
			if sub == nil {
				sub = o.vals["additionalProperties"]
			}
			if sub != nil {
				if err := ch.walk(sub, v, at+"/"+k, depth+1); err != nil {
					return err
				}
			}
		}
	case len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'):
		return checkBounds(o, raw, at)
	case len(raw) > 0 && raw[0] == '[':
		var arr []json.RawMessage
		if json.Unmarshal(raw, &arr) != nil {
			return nil
		}
		prefix, _ := o.vals["prefixItems"].([]any)
		for i, v := range arr {
			sub := o.vals["items"]
			if i < len(prefix) {
				sub = prefix[i]
			}
			if sub != nil {
				if err := ch.walk(sub, v, fmt.Sprintf("%s/%d", at, i), depth+1); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// ErrBounds is wrapped by the error of an answer whose number is outside
// its schema's bounds.
var ErrBounds = errors.New("grammar: a number of the answer is outside its schema's bounds")

// checkBounds checks number raw against o's minimum, maximum and
// exclusive bounds, exactly.
func checkBounds(o *ordered, raw json.RawMessage, at string) error {
	x, ok := new(big.Rat).SetString(strings.TrimSpace(string(raw)))
	if !ok || len(raw) > 500 {
		return nil
	}
	for _, kw := range []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} {
		b, ok, err := numberOf(o, kw, at)
		if !ok || err != nil {
			continue
		}
		c := x.Cmp(b)
		bad := false
		switch kw {
		case "minimum":
			bad = c < 0
		case "exclusiveMinimum":
			bad = c <= 0
		case "maximum":
			bad = c > 0
		case "exclusiveMaximum":
			bad = c >= 0
		}
		if bad {
			return fmt.Errorf("%w: %s at %q is outside %s %s", ErrBounds, raw, "/"+strings.TrimPrefix(at, "/"), kw, b.RatString())
		}
	}
	return nil
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
