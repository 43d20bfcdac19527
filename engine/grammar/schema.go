package grammar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// ErrUnsupported is wrapped by the errors of schema keywords geist cannot
// enforce; the message names the keyword.
var ErrUnsupported = errors.New("unsupported")

// MaxSchemaBytes bounds a JSON schema before it is read.
const MaxSchemaBytes = 256 << 10

// ordered is a JSON object with its keys in document order.
type ordered struct {
	keys []string
	vals map[string]any
}

func (o *ordered) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// decodeOrdered reads JSON keeping object key order (properties are
// generated in the order the schema lists them).
func decodeOrdered(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := readValue(d, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the schema")
	}
	return v, nil
}

func readValue(d *json.Decoder, depth int) (any, error) {
	if depth > 64 {
		return nil, errors.New("schema nested too deeply")
	}
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t {
	case json.Delim('{'):
		o := &ordered{vals: map[string]any{}}
		for d.More() {
			kt, err := d.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			v, err := readValue(d, depth+1)
			if err != nil {
				return nil, err
			}
			if _, dup := o.vals[k]; !dup {
				o.keys = append(o.keys, k)
			}
			o.vals[k] = v
		}
		_, err := d.Token()
		return o, err
	case json.Delim('['):
		var a []any
		for d.More() {
			v, err := readValue(d, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := d.Token()
		return a, err
	}
	return t, nil
}

// plain turns an ordered value back into encoding/json's shape.
func plain(v any) any {
	switch x := v.(type) {
	case *ordered:
		m := make(map[string]any, len(x.keys))
		for _, k := range x.keys {
			m[k] = plain(x.vals[k])
		}
		return m
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plain(e)
		}
		return out
	}
	return v
}

const spaceRule = `| " " | "\n"{1,2} [ \t]{0,20}`

var primitives = map[string]string{
	"space":            spaceRule,
	"boolean":          `("true" | "false") space`,
	"null":             `"null" space`,
	"decimal-part":     `[0-9]{1,16}`,
	"integral-part":    `[0] | [1-9] [0-9]{0,15}`,
	"number":           `("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space`,
	"integer":          `("-"? integral-part) space`,
	"value":            `object | array | string | number | boolean | null`,
	"object":           `"{" space ( string ":" space value ("," space string ":" space value)* )? "}" space`,
	"array":            `"[" space ( value ("," space value)* )? "]" space`,
	"char":             `[^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4})`,
	"string":           `"\"" char* "\"" space`,
	"uuid":             `"\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"" space`,
	"date":             `[0-9]{4} "-" ( ("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8]) )`,
	"time":             `([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )`,
	"date-time":        `date "T" time`,
	"date-string":      `"\"" date "\"" space`,
	"time-string":      `"\"" time "\"" space`,
	"date-time-string": `"\"" date-time "\"" space`,
	"email-string":     `"\"" [a-zA-Z0-9_%+-]{1,32} ("." [a-zA-Z0-9_%+-]{1,15}){0,2} "@" ([a-zA-Z0-9]{1,20} ("-" [a-zA-Z0-9]{1,20})? "."){1,3} [a-zA-Z]{2,6} "\"" space`,
	// A JSON string's character that is exactly one character of the
	// decoded string (for patterns: escapes only for the quote and the
	// backslash, so that what matches the pattern is what is decoded).
	"pchar": `[^"\\\x7F\x00-\x1F] | "\\\"" | "\\\\"`,
}

// primitive dependencies, for adding the rules a rule uses.
var primitiveDeps = map[string][]string{
	"boolean": {"space"}, "null": {"space"}, "number": {"integral-part", "decimal-part", "space"},
	"integer": {"integral-part", "space"}, "value": {"object", "array", "string", "number", "boolean", "null"},
	"object": {"string", "value", "space"}, "array": {"value", "space"}, "char": nil,
	"string": {"char", "space"}, "uuid": {"space"}, "date-time": {"date", "time"},
	"date-string": {"date", "space"}, "time-string": {"time", "space"}, "date-time-string": {"date-time", "space"},
	"email-string": {"space"},
}

// annotations are keywords that change nothing a generator must do.
var annotations = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "title": true, "description": true,
	"default": true, "examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"$anchor": true, "strict": true, "discriminator": true, "nullable": false,
	// JSON Schema 2020-12's content keywords annotate, they assert nothing.
	"contentEncoding": true, "contentMediaType": true,
}

// enforced are the keywords the converter enforces.
var enforced = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "prefixItems": true, "minItems": true, "maxItems": true, "enum": true,
	"const": true, "anyOf": true, "oneOf": true, "allOf": true, "$ref": true, "$defs": true,
	"definitions": true, "minLength": true, "maxLength": true, "pattern": true, "format": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"uniqueItems": true,
}

type converter struct {
	root  any
	rules map[string]string
	order []string
	refs  map[string]string // $ref -> rule name
	// inexact: a oneOf whose alternatives could not be proved exclusive
	// (its grammar is their union; SchemaCheck checks the answer).
	inexact bool
	// loose: a numeric bound the grammar enforces only in part
	// (SchemaCheck checks the answer's numbers).
	loose bool
	// py: the values are written as Python literals (tools_py.go).
	py bool
	// gemma: the values are written in Gemma 4's call syntax, not JSON
	// (schema_gemma4.go).
	gemma bool
}

func (c *converter) add(name, body string) string {
	if old, ok := c.rules[name]; ok {
		if old == body {
			return name
		}
		for i := 1; ; i++ {
			n := fmt.Sprintf("%s-%d", name, i)
			if old, ok := c.rules[n]; !ok || old == body {
				name = n
				break
			}
		}
		if _, ok := c.rules[name]; ok {
			return name
		}
	}
	c.rules[name] = body
	c.order = append(c.order, name)
	return name
}

func (c *converter) prim(name string) string {
	if _, ok := c.rules[name]; ok {
		return name
	}
	table, deps := primitives, primitiveDeps
	if c.gemma {
		table, deps = gemmaPrimitives, gemmaPrimitiveDeps
	}
	c.rules[name] = table[name]
	if b, ok := pyPrimitives[name]; ok && c.py {
		c.rules[name] = b
	}
	c.order = append(c.order, name)
	for _, d := range deps[name] {
		c.prim(d)
	}
	return name
}

// FromSchema converts a JSON Schema into GBNF text whose sentences are the
// JSON documents the schema accepts (llama.cpp's json-schema-to-grammar
// coverage). A keyword it cannot enforce is an error wrapping
// ErrUnsupported that names it.
func FromSchema(schema []byte) (string, error) {
	if len(schema) > MaxSchemaBytes {
		return "", fmt.Errorf("schema of %d bytes: at most %d", len(schema), MaxSchemaBytes)
	}
	root, err := decodeOrdered(schema)
	if err != nil {
		return "", fmt.Errorf("schema: %w", err)
	}
	c := &converter{root: root, rules: map[string]string{}, refs: map[string]string{}}
	body, err := c.visit(root, "root", "")
	if err != nil {
		return "", err
	}
	c.rules["root"] = body
	var sb strings.Builder
	sb.WriteString("root ::= " + body + "\n")
	for _, n := range c.order {
		if n != "root" {
			fmt.Fprintf(&sb, "%s ::= %s\n", n, c.rules[n])
		}
	}
	return sb.String(), nil
}

// AnyJSON is the grammar of `"format": "json"`: any JSON value (an
// object or array at the top, as Ollama and llama.cpp's json.gbnf do).
func AnyJSON() string {
	c := &converter{rules: map[string]string{}}
	c.prim("value")
	var sb strings.Builder
	sb.WriteString("root ::= object | array\n")
	for _, n := range c.order {
		fmt.Fprintf(&sb, "%s ::= %s\n", n, c.rules[n])
	}
	return sb.String()
}

func literal(s string) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			sb.WriteString(`\"`)
		case r == '\\':
			sb.WriteString(`\\`)
		case r < 0x20 || r == 0x7F:
			fmt.Fprintf(&sb, `\x%02X`, r)
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte('"')
	return sb.String()
}

// jsonLiteral is the grammar of exactly value v, encoded as JSON.
func (c *converter) jsonLiteral(v any) (string, error) {
	if c.py {
		return literal(pyLiteral(v)) + " " + c.prim("space"), nil
	}
	if c.gemma {
		return c.gemmaLiteral(v)
	}
	b, err := json.Marshal(plain(v))
	if err != nil {
		return "", err
	}
	return literal(string(b)) + " " + c.prim("space"), nil
}

func unsupported(path, kw string, detail string) error {
	if detail != "" {
		detail = ": " + detail
	}
	return fmt.Errorf("%w schema keyword %q at %s%s", ErrUnsupported, kw, path, detail)
}

func (c *converter) visit(s any, name, path string) (string, error) {
	if path == "" {
		path = "#"
	}
	switch x := s.(type) {
	case bool:
		if x {
			return c.prim("value"), nil
		}
		return "", unsupported(path, "false", "a schema that accepts nothing")
	case *ordered:
		return c.visitObject(x, name, path)
	}
	return "", fmt.Errorf("schema at %s: want an object or a boolean", path)
}

func (c *converter) visitObject(s *ordered, name, path string) (string, error) {
	for _, k := range s.keys {
		if !enforced[k] && !annotations[k] {
			return "", unsupported(path, k, "")
		}
	}
	if ref, ok := s.get("$ref"); ok {
		r, _ := ref.(string)
		return c.ref(r, path)
	}
	if v, ok := s.get("const"); ok {
		return c.jsonLiteral(v)
	}
	if v, ok := s.get("enum"); ok {
		vals, _ := v.([]any)
		if len(vals) == 0 {
			return "", fmt.Errorf("schema at %s: enum must be a non-empty list", path)
		}
		alts := make([]string, len(vals))
		for i, e := range vals {
			l, err := c.jsonLiteral(e)
			if err != nil {
				return "", err
			}
			alts[i] = "(" + l + ")"
		}
		return strings.Join(alts, " | "), nil
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		if v, ok := s.get(kw); ok {
			subs, _ := v.([]any)
			if len(subs) == 0 {
				return "", fmt.Errorf("schema at %s: %s must be a non-empty list", path, kw)
			}
			if kw == "oneOf" && !c.inexact {
				merged := make([]any, len(subs))
				for i, sub := range subs {
					merged[i] = merge(s, sub, kw)
				}
				c.inexact = !c.exclusive(merged)
			}
			alts := make([]string, len(subs))
			for i, sub := range subs {
				body, err := c.visit(merge(s, sub, kw), fmt.Sprintf("%s-%d", name, i), fmt.Sprintf("%s/%s/%d", path, kw, i))
				if err != nil {
					return "", err
				}
				alts[i] = c.add(fmt.Sprintf("%s-%d", name, i), body)
			}
			return strings.Join(alts, " | "), nil
		}
	}
	if v, ok := s.get("allOf"); ok {
		subs, _ := v.([]any)
		m, err := c.allOf(s, subs, path)
		if err != nil {
			return "", err
		}
		return c.visitObject(m, name, path)
	}
	typ, hasType := s.get("type")
	if types, ok := typ.([]any); ok {
		alts := make([]string, len(types))
		for i, t := range types {
			// Each alternative keeps the keywords of its own type: a
			// bound of strings says nothing about the null of
			// ["string", "null"] (OpenAPI 3.1's nullable).
			ts, _ := t.(string)
			one := &ordered{vals: map[string]any{}}
			for _, k := range s.keys {
				if o, owned := keywordOwner[k]; owned && o != ts && !(o == "number" && ts == "integer") {
					continue
				}
				one.keys = append(one.keys, k)
				one.vals[k] = s.vals[k]
			}
			one.vals["type"] = t
			body, err := c.visitObject(one, fmt.Sprintf("%s-%v", name, t), path)
			if err != nil {
				return "", err
			}
			alts[i] = c.add(fmt.Sprintf("%s-%v", name, t), body)
		}
		return strings.Join(alts, " | "), nil
	}
	t, _ := typ.(string)
	if !hasType {
		switch {
		case has(s, "properties", "additionalProperties"):
			t = "object"
		case has(s, "items", "prefixItems", "minItems", "maxItems"):
			t = "array"
		case has(s, "minLength", "maxLength", "pattern", "format"):
			t = "string"
		case has(s, "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
			t = "number"
		default:
			return c.prim("value"), nil
		}
	}
	if err := c.checkFor(s, t, path); err != nil {
		return "", err
	}
	switch t {
	case "object":
		return c.object(s, name, path)
	case "array":
		return c.array(s, name, path)
	case "string":
		return c.str(s, name, path)
	case "integer":
		return c.integer(s, name, path)
	case "number":
		return c.number(s, path)
	case "boolean", "null":
		return c.prim(t), nil
	}
	return "", fmt.Errorf("schema at %s: unknown type %q", path, t)
}

// keywordOwner names the type each type-specific keyword applies to.
var keywordOwner = map[string]string{
	"properties": "object", "required": "object", "additionalProperties": "object",
	"items": "array", "prefixItems": "array", "minItems": "array", "maxItems": "array", "uniqueItems": "array",
	"minLength": "string", "maxLength": "string", "pattern": "string", "format": "string",
	"minimum": "number", "maximum": "number", "exclusiveMinimum": "number", "exclusiveMaximum": "number",
}

// checkFor refuses keywords of another type that would be ignored (a
// bound on a string, say) rather than silently loosening.
func (c *converter) checkFor(s *ordered, t, path string) error {
	for _, k := range s.keys {
		o, ok := keywordOwner[k]
		if !ok || o == t || o == "number" && t == "integer" {
			continue
		}
		if k == "format" && t != "string" {
			continue // formats of numbers (int32, float) are annotations
		}
		return unsupported(path, k, fmt.Sprintf("applies to %ss, the type is %s", o, t))
	}
	if v, ok := s.get("uniqueItems"); ok && v != false {
		return unsupported(path, "uniqueItems", "")
	}
	return nil
}

func has(s *ordered, kws ...string) bool { return firstOf(s, kws...) != "" }

func firstOf(s *ordered, kws ...string) string {
	for _, k := range kws {
		if _, ok := s.vals[k]; ok {
			return k
		}
	}
	return ""
}

// merge returns sub with the keywords of parent other than kw (a oneOf
// beside a type, say) added.
func merge(parent *ordered, sub any, kw string) any {
	so, ok := sub.(*ordered)
	if !ok {
		return sub
	}
	out := &ordered{vals: map[string]any{}}
	for _, k := range parent.keys {
		if k != kw && !annotations[k] && k != "$defs" && k != "definitions" {
			out.keys = append(out.keys, k)
			out.vals[k] = parent.vals[k]
		}
	}
	for _, k := range so.keys {
		if _, dup := out.vals[k]; !dup {
			out.keys = append(out.keys, k)
		}
		out.vals[k] = so.vals[k]
	}
	return out
}

// allOf merges object schemas (properties and required united); other
// combinations are refused.
func (c *converter) allOf(s *ordered, subs []any, path string) (*ordered, error) {
	out := &ordered{vals: map[string]any{}}
	props := &ordered{vals: map[string]any{}}
	var required []any
	addAll := func(o *ordered) error {
		for _, k := range o.keys {
			v := o.vals[k]
			switch k {
			case "allOf":
			case "properties":
				po, _ := v.(*ordered)
				if po == nil {
					continue
				}
				for _, pk := range po.keys {
					if _, dup := props.vals[pk]; !dup {
						props.keys = append(props.keys, pk)
					}
					props.vals[pk] = po.vals[pk]
				}
			case "required":
				r, _ := v.([]any)
				required = append(required, r...)
			default:
				if annotations[k] {
					continue
				}
				if old, dup := out.vals[k]; dup {
					a, _ := json.Marshal(plain(old))
					b, _ := json.Marshal(plain(v))
					if !bytes.Equal(a, b) {
						return unsupported(path, "allOf", fmt.Sprintf("cannot intersect two different %q", k))
					}
					continue
				}
				out.keys = append(out.keys, k)
				out.vals[k] = v
			}
		}
		return nil
	}
	if err := addAll(s); err != nil {
		return nil, err
	}
	for i, sub := range subs {
		so, ok := sub.(*ordered)
		if ok {
			if r, isRef := so.get("$ref"); isRef {
				rs, _ := r.(string)
				target, err := c.resolve(rs, path)
				if err != nil {
					return nil, err
				}
				so, ok = target.(*ordered)
			}
		}
		if !ok {
			return nil, fmt.Errorf("schema at %s/allOf/%d: want an object", path, i)
		}
		if _, nested := so.get("anyOf"); nested {
			return nil, unsupported(path, "allOf", "an anyOf inside allOf")
		}
		if err := addAll(so); err != nil {
			return nil, err
		}
	}
	if len(props.keys) > 0 {
		out.keys = append(out.keys, "properties")
		out.vals["properties"] = props
	}
	if len(required) > 0 {
		out.keys = append(out.keys, "required")
		out.vals["required"] = required
	}
	return out, nil
}

func (c *converter) resolve(ref, path string) (any, error) {
	if !strings.HasPrefix(ref, "#") {
		return nil, unsupported(path, "$ref", fmt.Sprintf("%q: only references inside the schema (#/...) are resolved", ref))
	}
	cur := c.root
	for _, part := range strings.Split(strings.TrimPrefix(ref, "#"), "/")[1:] {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		switch x := cur.(type) {
		case *ordered:
			v, ok := x.get(part)
			if !ok {
				return nil, fmt.Errorf("schema at %s: $ref %q does not resolve", path, ref)
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("schema at %s: $ref %q does not resolve", path, ref)
			}
			cur = x[i]
		default:
			return nil, fmt.Errorf("schema at %s: $ref %q does not resolve", path, ref)
		}
	}
	return cur, nil
}

func ruleName(s string) string {
	var sb strings.Builder
	for _, r := range s {
		if r < 128 && isNameByte(byte(r)) && r != '_' { // llama.cpp's names: letters, digits, '-'
			sb.WriteRune(r)
		} else {
			sb.WriteByte('-')
		}
	}
	return strings.Trim(sb.String(), "-")
}

func (c *converter) ref(ref, path string) (string, error) {
	if n, ok := c.refs[ref]; ok {
		return n, nil
	}
	target, err := c.resolve(ref, path)
	if err != nil {
		return "", err
	}
	name := "ref-" + ruleName(ref)
	for i := 1; ; i++ {
		if _, taken := c.rules[name]; !taken {
			break
		}
		name = fmt.Sprintf("ref-%s-%d", ruleName(ref), i)
	}
	c.refs[ref] = name
	c.rules[name] = "" // reserved: a recursive reference resolves to it
	body, err := c.visit(target, name, ref)
	if err != nil {
		return "", err
	}
	if body == name {
		return "", fmt.Errorf("schema at %s: $ref %q refers to itself", path, ref)
	}
	c.rules[name] = body
	c.order = append(c.order, name)
	return name, nil
}

func (c *converter) object(s *ordered, name, path string) (string, error) {
	props := &ordered{vals: map[string]any{}}
	if p, ok := s.get("properties"); ok {
		if props, ok = p.(*ordered); !ok {
			return "", fmt.Errorf("schema at %s: properties must be an object", path)
		}
	}
	req := map[string]bool{}
	if r, ok := s.get("required"); ok {
		list, _ := r.([]any)
		for _, k := range list {
			ks, _ := k.(string)
			if _, ok := props.get(ks); !ok {
				return "", fmt.Errorf("schema at %s: required property %q is not in properties", path, ks)
			}
			req[ks] = true
		}
	}
	var required, optional []string
	var entries []gemmaEntry
	for _, k := range props.keys {
		sub := props.vals[k]
		body, err := c.visit(sub, name+"-"+ruleName(k), path+"/properties/"+k)
		if err != nil {
			return "", err
		}
		vname := c.add(name+"-"+ruleName(k), body)
		key := literal(mustJSON(k)) + " " + c.prim("space") + ` ":" space `
		if c.gemma {
			if key, err = gemmaKeyRule(k, path); err != nil {
				return "", err
			}
		}
		kv := c.add(name+"-"+ruleName(k)+"-kv", key+vname)
		entries = append(entries, gemmaEntry{k, kv, req[k]})
		if req[k] {
			required = append(required, kv)
		} else {
			optional = append(optional, kv)
		}
	}
	addl := ""
	if a, ok := s.get("additionalProperties"); ok && a != false {
		vbody, err := c.visit(a, name+"-additional", path+"/additionalProperties")
		if err != nil {
			return "", err
		}
		vname := c.add(name+"-additional-value", vbody)
		key := c.prim("string") + ` ":" space `
		if c.gemma {
			key = c.prim("gemma-key") + ` ":" `
		}
		addl = c.add(name+"-additional-kv", key+vname)
	}
	if c.gemma && addl == "" && len(entries) > 0 {
		return c.gemmaObject(name, entries), nil
	}
	// Optional properties: any subsequence, in order. opt-i is a
	// non-empty subsequence of optional[i:].
	optRule := ""
	for i := len(optional) - 1; i >= 0; i-- {
		body := optional[i]
		if i+1 < len(optional) {
			body = optional[i] + ` ( "," space ` + optRule + ` )? | ` + optRule
		}
		optRule = c.add(fmt.Sprintf("%s-opt-%d", name, i), body)
	}
	var seq string
	switch {
	case len(required) > 0:
		seq = strings.Join(required, ` "," space `)
		if optRule != "" {
			seq += ` ( "," space ` + optRule + ` )?`
		}
		if addl != "" {
			seq += ` ( "," space ` + addl + ` )*`
		}
	case optRule != "" && addl != "":
		seq = `( ` + optRule + ` ( "," space ` + addl + ` )* | ` + addl + ` ( "," space ` + addl + ` )* )?`
	case optRule != "":
		seq = optRule + "?"
	case addl != "":
		seq = `( ` + addl + ` ( "," space ` + addl + ` )* )?`
	}
	c.prim("space")
	return `"{" space ` + seq + ` "}" space`, nil
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func intOf(s *ordered, kw, path string) (int, bool, error) {
	v, ok := s.get(kw)
	if !ok {
		return 0, false, nil
	}
	n, isNum := v.(json.Number)
	r, ok := new(big.Rat).SetString(string(n))
	if !isNum || len(n) > 400 || !ok || !r.IsInt() || r.Sign() < 0 {
		return 0, false, fmt.Errorf("schema at %s: %s must be a non-negative integer", path, kw)
	}
	if !r.Num().IsInt64() || r.Num().Int64() > math.MaxInt32 {
		return math.MaxInt32, true, nil // beyond any bound enforced: the callers refuse it by name
	}
	return int(r.Num().Int64()), true, nil
}

func repeat(item, sep string, lo, hi int) string {
	// item (sep item){lo-1,hi-1}, or optional when lo == 0
	tail := func(a, b int) string {
		switch {
		case b < 0:
			return fmt.Sprintf(`( %s %s ){%d,}`, sep, item, a)
		case b == 0:
			return ""
		}
		return fmt.Sprintf(`( %s %s ){%d,%d}`, sep, item, a, b)
	}
	if lo == 0 {
		if hi == 0 {
			return ""
		}
		return fmt.Sprintf(`( %s %s )?`, item, tail(0, hi-1))
	}
	b := hi - 1
	if hi < 0 {
		b = -1
	}
	return fmt.Sprintf(`%s %s`, item, tail(lo-1, b))
}

func (c *converter) array(s *ordered, name, path string) (string, error) {
	lo, _, err := intOf(s, "minItems", path)
	if err != nil {
		return "", err
	}
	hi, hasHi, err := intOf(s, "maxItems", path)
	if err != nil {
		return "", err
	}
	if !hasHi {
		hi = -1
	}
	if hasHi && hi < lo {
		return "", fmt.Errorf("schema at %s: maxItems %d < minItems %d", path, hi, lo)
	}
	if lo > maxRepeat {
		return "", unsupported(path, "minItems", fmt.Sprintf("at most %d items are enforced", maxRepeat))
	}
	if hi > maxRepeat {
		return "", unsupported(path, "maxItems", fmt.Sprintf("at most %d items are enforced", maxRepeat))
	}
	items, hasItems := s.get("items")
	prefix, _ := s.get("prefixItems")
	if tuple, ok := items.([]any); ok { // draft 4 tuples
		prefix, items, hasItems = tuple, nil, false
	}
	c.prim("space")
	if tuple, ok := prefix.([]any); ok {
		if hasItems && items != false {
			return "", unsupported(path, "items", "items beside prefixItems")
		}
		if lo > len(tuple) || hasHi && hi < len(tuple) {
			return "", unsupported(path, "prefixItems", "with minItems/maxItems other than the tuple's length")
		}
		parts := make([]string, len(tuple))
		for i, t := range tuple {
			body, err := c.visit(t, fmt.Sprintf("%s-%d", name, i), fmt.Sprintf("%s/prefixItems/%d", path, i))
			if err != nil {
				return "", err
			}
			parts[i] = c.add(fmt.Sprintf("%s-%d", name, i), body)
		}
		return `"[" space ` + strings.Join(parts, ` "," space `) + ` "]" space`, nil
	}
	item := c.prim("value")
	if hasItems {
		body, err := c.visit(items, name+"-item", path+"/items")
		if err != nil {
			return "", err
		}
		item = c.add(name+"-item", body)
	}
	return `"[" space ` + repeat(item, `"," space`, lo, hi) + ` "]" space`, nil
}

// strLengths reads a string schema's minLength and maxLength (has*: the
// keyword is there), refusing a maxLength below minLength and lengths a
// grammar's repetition cannot enforce.
func strLengths(s *ordered, path string) (lo, hi int, hasLo, hasHi bool, err error) {
	if lo, hasLo, err = intOf(s, "minLength", path); err != nil {
		return
	}
	if hi, hasHi, err = intOf(s, "maxLength", path); err != nil {
		return
	}
	if hasHi && hi < lo {
		err = fmt.Errorf("schema at %s: maxLength %d < minLength %d", path, hi, lo)
	} else if lo > maxRepeat {
		err = unsupported(path, "minLength", fmt.Sprintf("lengths up to %d are enforced", maxRepeat))
	} else if hi > maxRepeat {
		err = unsupported(path, "maxLength", fmt.Sprintf("lengths up to %d are enforced", maxRepeat))
	}
	return
}

func (c *converter) str(s *ordered, name, path string) (string, error) {
	lo, hi, hasLo, hasHi, err := strLengths(s, path)
	if err != nil {
		return "", err
	}
	if c.gemma {
		return c.gemmaStr(s, path, lo, hi, hasLo, hasHi)
	}
	pat, hasPat := s.get("pattern")
	f, hasFormat := s.get("format")
	if hasPat && (hasLo || hasHi || hasFormat) {
		return "", unsupported(path, "pattern", "together with minLength, maxLength or format")
	}
	if hasFormat {
		fs, _ := f.(string)
		if hasLo || hasHi {
			return "", unsupported(path, "format", "together with minLength or maxLength")
		}
		switch fs {
		case "date", "time", "date-time", "email":
			return c.prim(fs + "-string"), nil
		case "uuid":
			return c.prim("uuid"), nil
		}
		return "", unsupported(path, "format", fmt.Sprintf("%q (enforced: date, time, date-time, uuid, email)", fs))
	}
	if hasPat {
		ps, _ := pat.(string)
		body, err := c.pattern(ps, path)
		if err != nil {
			return "", err
		}
		c.prim("pchar")
		c.prim("space")
		return `"\"" ` + body + ` "\"" space`, nil
	}
	c.prim("char")
	c.prim("space")
	if !hasLo && !hasHi {
		return c.prim("string"), nil
	}
	if !hasHi {
		return fmt.Sprintf(`"\"" char{%d,} "\"" space`, lo), nil
	}
	return fmt.Sprintf(`"\"" char{%d,%d} "\"" space`, lo, hi), nil
}

// intCap is the largest integer the grammars write (integral-part: at
// most 16 digits).
const intCap = 9_999_999_999_999_999

// numberOf reads keyword kw of s as an exact number (any JSON number: a
// validator takes 1e300 as readily as 5).
func numberOf(s *ordered, kw, path string) (*big.Rat, bool, error) {
	v, ok := s.get(kw)
	if !ok {
		return nil, false, nil
	}
	n, isNum := v.(json.Number)
	if !isNum || len(n) > 400 {
		return nil, false, fmt.Errorf("schema at %s: %s must be a number", path, kw)
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return nil, false, fmt.Errorf("schema at %s: %s must be a number", path, kw)
	}
	return r, true, nil
}

// bound reads a numeric bound as an exact integer bound for integers
// (rounded inwards; an exclusive one moved past its value).
func bound(s *ordered, kw, path string, lower bool) (*big.Int, bool, error) {
	r, ok, err := numberOf(s, kw, path)
	if !ok || err != nil {
		return nil, false, err
	}
	exclusive := strings.HasPrefix(kw, "exclusive")
	floor := func(r *big.Rat) *big.Int { return new(big.Int).Div(r.Num(), r.Denom()) } // Euclidean: the floor for a positive denominator
	var b *big.Int
	if lower {
		b = new(big.Int).Neg(floor(new(big.Rat).Neg(r)))
		if exclusive && r.IsInt() {
			b.Add(b, big.NewInt(1))
		}
	} else {
		b = floor(r)
		if exclusive && r.IsInt() {
			b.Sub(b, big.NewInt(1))
		}
	}
	return b, true, nil
}

func (c *converter) integer(s *ordered, name, path string) (string, error) {
	var lo, hi *big.Int
	for _, kw := range []string{"minimum", "exclusiveMinimum"} {
		if b, ok, err := bound(s, kw, path, true); err != nil {
			return "", err
		} else if ok && (lo == nil || b.Cmp(lo) > 0) {
			lo = b
		}
	}
	for _, kw := range []string{"maximum", "exclusiveMaximum"} {
		if b, ok, err := bound(s, kw, path, false); err != nil {
			return "", err
		} else if ok && (hi == nil || b.Cmp(hi) < 0) {
			hi = b
		}
	}
	if lo != nil && hi != nil && lo.Cmp(hi) > 0 {
		return "", fmt.Errorf("schema at %s: no integer lies between the bounds", path)
	}
	limit := big.NewInt(intCap)
	// A bound past what the grammar writes anyway is no bound (zod's
	// .int() gives ±(2^53-1)).
	if lo != nil && lo.CmpAbs(limit) > 0 && lo.Sign() < 0 {
		lo = nil
	}
	if hi != nil && hi.CmpAbs(limit) > 0 && hi.Sign() > 0 {
		hi = nil
	}
	if lo == nil && hi == nil {
		return c.prim("integer"), nil
	}
	c.prim("space")
	c.prim("integral-part")
	// A bound the grammar's 16 digits cannot reach (a minimum of 1e20):
	// integers of its length and a few more digits, the exact bounds
	// checked after generation (SchemaCheck).
	for _, b := range []*big.Int{lo, hi} {
		if b != nil && b.CmpAbs(limit) > 0 {
			c.loose = true
			d := len(new(big.Int).Abs(b).String())
			sign := ""
			if b.Sign() < 0 {
				sign = `"-" `
			}
			return fmt.Sprintf(`(%s[1-9] [0-9]{%d,%d}) space`, sign, d-1, d+15), nil
		}
	}
	var l, h int64
	if lo != nil {
		l = lo.Int64()
	}
	if hi != nil {
		h = hi.Int64()
	}
	return "(" + intRange(l, lo != nil, h, hi != nil) + ") space", nil
}

// number is a JSON number with bounds: exact among the numbers written
// without an exponent (boundedNumber); where no such number is in range
// (a bound beyond 10^16) only their sign is enforced (no minus sign at
// or above 0, one below 0). The values are checked after generation
// (SchemaCheck) in every case.
func (c *converter) number(s *ordered, path string) (string, error) {
	var lo, hi *big.Rat
	for _, kw := range []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} {
		r, ok, err := numberOf(s, kw, path)
		if err != nil {
			return "", err
		}
		if !ok {
			continue
		}
		c.loose = true
		if strings.HasSuffix(kw, "inimum") {
			if lo == nil || r.Cmp(lo) > 0 {
				lo = r
			}
		} else if hi == nil || r.Cmp(hi) < 0 {
			hi = r
		}
	}
	if lo != nil && hi != nil && lo.Cmp(hi) > 0 {
		return "", fmt.Errorf("schema at %s: no number lies between the bounds", path)
	}
	c.prim("number")
	if !c.gemma && !c.py && (lo != nil || hi != nil) {
		if g, ok := c.boundedNumber(s, path); ok {
			return g, nil
		}
	}
	switch {
	case c.gemma || c.py:
	case lo != nil && lo.Sign() >= 0:
		return `(integral-part ("." decimal-part)? ([eE] [-+]? integral-part)?) space`, nil
	case hi != nil && hi.Sign() < 0:
		return `("-" integral-part ("." decimal-part)? ([eE] [-+]? integral-part)?) space`, nil
	}
	return "number", nil
}

// fracDigits is the longest fraction the grammars write (decimal-part).
const fracDigits = 16

// scaledBound is the bound kw of s on x*10^16 as an exact integer
// bound (rounded inwards; an exclusive one moved past its value).
func scaledBound(r *big.Rat, exclusive, lower bool) *big.Int {
	x := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(fracDigits), nil)))
	floor := func(r *big.Rat) *big.Int { return new(big.Int).Div(r.Num(), r.Denom()) } // Euclidean: the floor for a positive denominator
	var b *big.Int
	if lower {
		b = new(big.Int).Neg(floor(new(big.Rat).Neg(x)))
		if exclusive && x.IsInt() {
			b.Add(b, big.NewInt(1))
		}
	} else {
		b = floor(x)
		if exclusive && x.IsInt() {
			b.Sub(b, big.NewInt(1))
		}
	}
	return b
}

// boundedNumber is the exact grammar of a bounded JSON number among the
// numbers written without an exponent (at most 16 integral and 16
// fraction digits): every such number accepted is in range and every
// one in range is accepted (but "-0" and "-0.0" stand for 0 unsigned).
// The numbers written with an exponent (1e300, 2.5e-3) are left out, so
// the grammar accepts a subset of the schema's numbers: all of them
// between -10^16 and 10^16 at 16 fraction digits. A range with none of
// those numbers (a minimum of 1e20) is not ok (the caller's looser
// grammar and SchemaCheck take it).
func (c *converter) boundedNumber(s *ordered, path string) (string, bool) {
	// Every number written is N*10^-16 for an integer N, |N| < 10^32.
	limit := new(big.Int).Sub(new(big.Int).Exp(big.NewInt(10), big.NewInt(16+fracDigits), nil), big.NewInt(1))
	lo, hi := new(big.Int).Neg(limit), new(big.Int).Set(limit)
	for _, kw := range []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} {
		r, ok, err := numberOf(s, kw, path)
		if err != nil || !ok {
			continue
		}
		lower := strings.HasSuffix(kw, "inimum")
		b := scaledBound(r, strings.HasPrefix(kw, "exclusive"), lower)
		if lower && b.Cmp(lo) > 0 {
			lo = b
		}
		if !lower && b.Cmp(hi) < 0 {
			hi = b
		}
	}
	if lo.Cmp(hi) > 0 {
		return "", false
	}
	c.prim("space")
	c.prim("integral-part")
	c.prim("decimal-part")
	var alts []string
	if lo.Sign() < 0 { // -x, x in [max(1,-hi), -lo]
		a := big.NewInt(1)
		if hi.Sign() < 0 {
			a = new(big.Int).Neg(hi)
		}
		alts = append(alts, `"-" (`+scaledRange(a, new(big.Int).Neg(lo))+`)`)
	}
	if hi.Sign() >= 0 {
		a := big.NewInt(0)
		if lo.Sign() > 0 {
			a = lo
		}
		alts = append(alts, scaledRange(a, hi))
	}
	return "(" + strings.Join(alts, " | ") + ") space", true
}

// scaledRange is a grammar of the decimal numbers without sign or
// exponent whose value times 10^16 is in [a, b] (0 <= a <= b < 10^32).
func scaledRange(a, b *big.Int) string {
	unit := new(big.Int).Exp(big.NewInt(10), big.NewInt(fracDigits), nil)
	ia, fa := new(big.Int).DivMod(a, unit, new(big.Int))
	ib, fb := new(big.Int).DivMod(b, unit, new(big.Int))
	pad := func(f *big.Int) string {
		s := f.String()
		return strings.Repeat("0", fracDigits-len(s)) + s
	}
	zeros, nines := strings.Repeat("0", fracDigits), strings.Repeat("9", fracDigits)
	sa, sb := pad(fa), pad(fb)
	iaS, ibS := ia.String(), ib.String()
	if ia.Cmp(ib) == 0 {
		return literal(iaS) + " " + fraction(sa, sb)
	}
	var alts []string
	low, high := ia.Int64(), ib.Int64()
	if sa != zeros {
		alts = append(alts, literal(iaS)+" "+fraction(sa, nines))
		low++
	}
	if sb != nines {
		high--
	}
	if low <= high {
		alts = append(alts, "("+natRange(low, true, high)+`) ("." decimal-part)?`)
	}
	if sb != nines {
		alts = append(alts, literal(ibS)+" "+fraction(zeros, sb))
	}
	return strings.Join(alts, " | ")
}

// fraction is a grammar of the optional fractions ("." and 1 to 16
// digits) whose digits, padded with zeros to 16, are in [a, b] (two
// 16-digit strings); no fraction stands for zeros.
func fraction(a, b string) string {
	g := `"." (` + fracDigitsIn(a, b) + `)`
	if strings.Trim(a, "0") == "" {
		return "(" + g + ")?"
	}
	return "(" + g + ")"
}

// fracDigitsIn is a grammar of the digit strings of length 1 to len(a)
// whose value padded with zeros to len(a) is in [a, b] (equal lengths).
func fracDigitsIn(a, b string) string {
	n := len(a)
	if strings.Trim(a, "0") == "" && strings.Trim(b, "9") == "" {
		return fmt.Sprintf("[0-9]{1,%d}", n)
	}
	// rest is what follows a first digit equal to a[0] and/or b[0]:
	// nothing (standing for zeros) or a string in range.
	rest := func(ra, rb string) string {
		if len(ra) == 0 {
			return ""
		}
		g := " (" + fracDigitsIn(ra, rb) + ")"
		if strings.Trim(ra, "0") == "" {
			g += "?"
		}
		return g
	}
	if a[0] == b[0] {
		return literal(a[:1]) + rest(a[1:], b[1:])
	}
	zeros, nines := strings.Repeat("0", n-1), strings.Repeat("9", n-1)
	alts := []string{literal(a[:1]) + rest(a[1:], nines)}
	if a[0]+1 <= b[0]-1 && n == 1 {
		alts = append(alts, fmt.Sprintf("[%c-%c]", a[0]+1, b[0]-1))
	} else if a[0]+1 <= b[0]-1 {
		alts = append(alts, fmt.Sprintf("[%c-%c] [0-9]{0,%d}", a[0]+1, b[0]-1, n-1))
	}
	alts = append(alts, literal(b[:1])+rest(zeros, b[1:]))
	return strings.Join(alts, " | ")
}

// intRange is a grammar of the decimal integers in [lo, hi] (a side
// without a bound is open).
func intRange(lo int64, hasLo bool, hi int64, hasHi bool) string {
	var alts []string
	// Negative part.
	if !hasLo || lo < 0 {
		switch {
		case !hasLo && (!hasHi || hi >= -1):
			alts = append(alts, `"-" [1-9] [0-9]{0,15}`)
		case !hasLo: // x <= hi < 0: -x >= -hi
			alts = append(alts, `"-" (`+natRange(-hi, false, 0)+`)`)
		default: // -x in [max(1,-hi), -lo]
			a := int64(1)
			if hasHi && hi < 0 {
				a = -hi
			}
			alts = append(alts, `"-" (`+natRange(a, true, -lo)+`)`)
		}
	}
	// Non-negative part.
	if !hasHi || hi >= 0 {
		a := int64(0)
		if hasLo && lo > 0 {
			a = lo
		}
		if hasHi {
			alts = append(alts, natRange(a, true, hi))
		} else {
			alts = append(alts, natRange(a, false, 0))
		}
	}
	return strings.Join(alts, " | ")
}

// natRange is a grammar of the naturals in [a, b] (no upper bound unless
// bounded), without leading zeros.
func natRange(a int64, bounded bool, b int64) string {
	var alts []string
	da := len(strconv.FormatInt(a, 10))
	db := 16
	if bounded {
		db = len(strconv.FormatInt(b, 10))
	}
	for d := da; d <= db; d++ {
		lo := int64(math.Pow10(d - 1))
		if d == 1 {
			lo = 0
		}
		hi := int64(math.Pow10(d)) - 1
		if d == da {
			lo = a
		}
		if bounded && d == db {
			hi = b
		}
		if !bounded && d == da && d < db {
			alts = append(alts, digits(strconv.FormatInt(lo, 10), strconv.FormatInt(hi, 10)))
			alts = append(alts, fmt.Sprintf(`[1-9] [0-9]{%d,15}`, d))
			break
		}
		if lo <= hi {
			alts = append(alts, digits(strconv.FormatInt(lo, 10), strconv.FormatInt(hi, 10)))
		}
	}
	return strings.Join(alts, " | ")
}

// digits is a grammar of the equal-length decimal strings in [a, b].
func digits(a, b string) string {
	if a == b {
		return literal(a)
	}
	if a[0] == b[0] {
		return literal(a[:1]) + " (" + digits(a[1:], b[1:]) + ")"
	}
	n := len(a) - 1
	rest := func(lo, hi byte) string {
		if n == 0 {
			return fmt.Sprintf("[%c-%c]", lo, hi)
		}
		return fmt.Sprintf("[%c-%c] [0-9]{%d}", lo, hi, n)
	}
	if strings.Trim(a[1:], "0") == "" && strings.Trim(b[1:], "9") == "" {
		return rest(a[0], b[0])
	}
	var alts []string
	alts = append(alts, literal(a[:1])+" ("+digits(a[1:], strings.Repeat("9", n))+")")
	if a[0]+1 <= b[0]-1 {
		alts = append(alts, rest(a[0]+1, b[0]-1))
	}
	alts = append(alts, literal(b[:1])+" ("+digits(strings.Repeat("0", n), b[1:])+")")
	return strings.Join(alts, " | ")
}

// FormatCheck is SchemaCheck for Ollama's format field (nil for "json"
// and for none).
func FormatCheck(format []byte) (func([]byte) error, error) {
	if f := strings.TrimSpace(string(format)); !strings.HasPrefix(f, "{") {
		return nil, nil
	}
	return SchemaCheck(format)
}

// FromFormat reads Ollama's format field (also MQTT asks'): "json" for
// any JSON, or a JSON schema; absent, null or "" for none (""). The
// grammar returned has been parsed once, so it compiles.
func FromFormat(format []byte) (string, error) {
	return FromFormatContext(context.Background(), format)
}

// FromFormatContext is FromFormat whose compile ctx ends.
func FromFormatContext(ctx context.Context, format []byte) (string, error) {
	f := strings.TrimSpace(string(format))
	if f == "" || f == "null" || f == `""` {
		return "", nil
	}
	var src string
	var name string
	switch {
	case json.Unmarshal(format, &name) == nil:
		if name != "json" {
			return "", fmt.Errorf("format %q: want \"json\" or a JSON schema", name)
		}
		src = AnyJSON()
	case strings.HasPrefix(f, "{"):
		var err error
		if src, err = FromSchema(format); err != nil {
			return "", fmt.Errorf("format: %w", err)
		}
	default:
		return "", errors.New("format: want \"json\" or a JSON schema object")
	}
	if _, err := ParseContext(ctx, src); err != nil {
		return "", fmt.Errorf("format: %w", err)
	}
	return src, nil
}
