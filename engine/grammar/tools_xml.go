package grammar

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Qwen3.5's (and Qwen3-Coder's) tool calls are XML-like blocks, each
// parameter a block of its own with its value on lines of its own
// (engine/dialect's qwen35.go reads them):
//
//	<function=HassTurnOn>
//	<parameter=name>
//	kitchen light
//	</parameter>
//	<parameter=brightness>
//	50
//	</parameter>
//	</function>
//
// The template writes a mapping or a list as JSON (tojson) and any other
// value as its text (Jinja's string filter): a string raw, a number as
// its digits, a boolean as Python's True or False, null as None. The
// grammar writes a parameter's value so, valid under the property's
// schema: strings raw (no text that would end the block early, see
// xmlTextRules), booleans True or False (or JSON's true or false), null
// None (or null), numbers, objects and arrays as the JSON schema
// compiler writes them.

// xmlEnds are the texts no raw string value may hold: the first of them
// ends the parameter's block or, for the tool parser, the whole call.
var xmlEnds = []string{"</parameter>", "</tool_call>"}

// xmlCallRules is CallRules for XMLCall.
func xmlCallRules(tools []json.RawMessage, only string) (*Calls, error) {
	c := &converter{rules: map[string]string{}}
	offered, err := offeredTools(tools, only)
	if err != nil {
		return nil, err
	}
	var alts []string
	for _, f := range offered {
		if !xmlName(f.Name) {
			return nil, fmt.Errorf("tool %q: a name with white space or one of <>=/ cannot be written in the XML call syntax", f.Name)
		}
		params := f.Parameters
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage(`{"type": "object", "properties": {}}`)
		}
		if len(params) > MaxSchemaBytes {
			return nil, fmt.Errorf("tool %q: parameters of %d bytes: at most %d", f.Name, len(params), MaxSchemaBytes)
		}
		root, err := decodeOrdered(params)
		if err != nil {
			return nil, fmt.Errorf("tool %q: parameters: %w", f.Name, err)
		}
		if root, err = objectSchema(root); err != nil {
			return nil, fmt.Errorf("tool %q: parameters: %w", f.Name, err)
		}
		name := fmt.Sprintf("call-%d", f.index)
		c.root, c.refs = root, map[string]string{}
		body, err := c.xmlParams(root.(*ordered), name)
		if err != nil {
			return nil, fmt.Errorf("tool %q: parameters: %w", f.Name, err)
		}
		alts = append(alts, c.add(name, strings.TrimSpace(literal("<function="+f.Name+">\n")+" "+body+" "+literal("</function>"))))
	}
	return c.calls(alts), nil
}

// xmlName reports whether s can stand as a function or parameter name in
// the XML call syntax as engine/dialect reads it back.
func xmlName(s string) bool {
	return s != "" && len(s) <= 256 && !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || strings.ContainsRune("<>=/", r) })
}

// xmlParams is the grammar of the parameter blocks of a call whose
// parameters have the object schema s: the required ones in the
// schema's order, then any of the optional ones in theirs, then further
// ones (additionalProperties); each block ends with its line break.
func (c *converter) xmlParams(s *ordered, name string) (string, error) {
	for _, k := range s.keys {
		switch {
		case k == "type" || k == "properties" || k == "required" || k == "additionalProperties" || k == "$defs" || k == "definitions" || annotations[k]:
		default:
			return "", unsupported("#", k, "at the top of a call's parameters (written as parameter blocks: type, properties, required, additionalProperties)")
		}
	}
	props := &ordered{vals: map[string]any{}}
	if p, ok := s.get("properties"); ok {
		if props, ok = p.(*ordered); !ok {
			return "", fmt.Errorf("schema at #: properties must be an object")
		}
	}
	req := map[string]bool{}
	if r, ok := s.get("required"); ok {
		list, _ := r.([]any)
		for _, k := range list {
			ks, _ := k.(string)
			if _, ok := props.get(ks); !ok {
				return "", fmt.Errorf("schema at #: required property %q is not in properties", ks)
			}
			req[ks] = true
		}
	}
	var required, optional []string
	for _, k := range props.keys {
		if !xmlName(k) {
			return "", fmt.Errorf("schema at #/properties: property %q cannot be a parameter's name (white space or one of <>=/)", k)
		}
		rn := name + "-" + ruleName(k)
		body, err := c.xmlValue(props.vals[k], rn, "#/properties/"+k, 0)
		if err != nil {
			return "", err
		}
		v := c.add(rn, body)
		blk := c.add(rn+"-param", literal("<parameter="+k+">\n")+" "+v+" "+literal("\n</parameter>\n"))
		if req[k] {
			required = append(required, blk)
		} else {
			optional = append(optional, blk)
		}
	}
	addl := ""
	if a, ok := s.get("additionalProperties"); ok && a != false {
		body, err := c.xmlValue(a, name+"-additional", "#/additionalProperties", 0)
		if err != nil {
			return "", err
		}
		v := c.add(name+"-additional-value", body)
		addl = c.add(name+"-additional-param", `"<parameter=" [a-zA-Z_] [a-zA-Z0-9_.-]{0,63} ">\n" `+v+` "\n</parameter>\n"`)
	}
	// opt-i: any subsequence of optional[i:] (possibly empty).
	optRule := ""
	for i := len(optional) - 1; i >= 0; i-- {
		body := optional[i] + "?"
		if optRule != "" {
			body = optional[i] + "? " + optRule
		}
		optRule = c.add(fmt.Sprintf("%s-opt-%d", name, i), body)
	}
	parts := append([]string(nil), required...)
	if optRule != "" {
		parts = append(parts, optRule)
	}
	if addl != "" {
		parts = append(parts, addl+"*")
	}
	return strings.Join(parts, " "), nil
}

// maxXMLDepth bounds the $refs followed at a parameter's top.
const maxXMLDepth = 16

// xmlValue is the grammar of a parameter's value under schema s, as the
// template writes it (the comment at the top). Objects, arrays and
// numbers, and what stands inside them, are the JSON schema compiler's.
func (c *converter) xmlValue(s any, name, path string, depth int) (string, error) {
	if depth > maxXMLDepth {
		return "", fmt.Errorf("schema at %s: $refs nested deeper than %d", path, maxXMLDepth)
	}
	x, ok := s.(*ordered)
	if !ok {
		if s == true {
			return c.xmlText(), nil // any value: its text
		}
		return c.visit(s, name, path) // false: the compiler's error
	}
	for _, k := range x.keys {
		if !enforced[k] && !annotations[k] {
			return "", unsupported(path, k, "")
		}
	}
	if ref, ok := x.get("$ref"); ok {
		r, _ := ref.(string)
		target, err := c.resolve(r, path)
		if err != nil {
			return "", err
		}
		return c.xmlValue(target, name, r, depth+1)
	}
	var vals []any
	if v, ok := x.get("const"); ok {
		vals = []any{v}
	} else if v, ok := x.get("enum"); ok {
		vals, _ = v.([]any)
		if len(vals) == 0 {
			return "", fmt.Errorf("schema at %s: enum must be a non-empty list", path)
		}
	}
	if vals != nil {
		alts := make([]string, len(vals))
		for i, v := range vals {
			t, err := xmlLiteral(v, path)
			if err != nil {
				return "", err
			}
			alts[i] = literal(t)
		}
		return strings.Join(alts, " | "), nil
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		if v, ok := x.get(kw); ok {
			subs, _ := v.([]any)
			if len(subs) == 0 {
				return "", fmt.Errorf("schema at %s: %s must be a non-empty list", path, kw)
			}
			alts := make([]string, len(subs))
			for i, sub := range subs {
				n := fmt.Sprintf("%s-%d", name, i)
				body, err := c.xmlValue(merge(x, sub, kw), n, fmt.Sprintf("%s/%s/%d", path, kw, i), depth)
				if err != nil {
					return "", err
				}
				alts[i] = c.add(n, body)
			}
			// oneOf's alternatives are not checked for exclusiveness:
			// a value that two of them accept is still valid text.
			return strings.Join(alts, " | "), nil
		}
	}
	if v, ok := x.get("allOf"); ok {
		subs, _ := v.([]any)
		m, err := c.allOf(x, subs, path)
		if err != nil {
			return "", err
		}
		return c.xmlValue(m, name, path, depth)
	}
	typ, hasType := x.get("type")
	if types, ok := typ.([]any); ok {
		alts := make([]string, len(types))
		for i, t := range types {
			ts, _ := t.(string)
			one := &ordered{vals: map[string]any{}}
			for _, k := range x.keys {
				if o, owned := keywordOwner[k]; owned && o != ts && !(o == "number" && ts == "integer") {
					continue
				}
				one.keys = append(one.keys, k)
				one.vals[k] = x.vals[k]
			}
			one.vals["type"] = t
			n := fmt.Sprintf("%s-%v", name, t)
			body, err := c.xmlValue(one, n, path, depth)
			if err != nil {
				return "", err
			}
			alts[i] = c.add(n, body)
		}
		return strings.Join(alts, " | "), nil
	}
	t, _ := typ.(string)
	if !hasType {
		switch {
		case has(x, "properties", "additionalProperties"):
			t = "object"
		case has(x, "items", "prefixItems", "minItems", "maxItems"):
			t = "array"
		case has(x, "minLength", "maxLength", "pattern", "format"):
			t = "string"
		case has(x, "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
			t = "number"
		default:
			return c.xmlText(), nil
		}
	}
	if err := c.checkFor(x, t, path); err != nil {
		return "", err
	}
	switch t {
	case "string":
		return c.xmlStr(x, path)
	case "boolean":
		return `"True" | "False" | "true" | "false"`, nil
	case "null":
		return `"None" | "null"`, nil
	case "object", "array", "integer", "number":
		// JSON, without the white space the compiler lets follow a
		// value (the line break before </parameter> ends it).
		body, err := c.visitObject(x, name, path)
		switch {
		case err != nil:
			return "", err
		case body == "integer":
			return `"-"? integral-part`, nil
		case body == "number":
			return `("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?`, nil
		}
		return strings.TrimSuffix(body, " space"), nil
	}
	return "", fmt.Errorf("schema at %s: unknown type %q", path, t)
}

// xmlLiteral writes v (a const or enum value) as the template writes a
// parameter's value.
func xmlLiteral(v any, path string) (string, error) {
	switch x := v.(type) {
	case nil:
		return "None", nil
	case bool:
		if x {
			return "True", nil
		}
		return "False", nil
	case string:
		for _, e := range xmlEnds {
			if strings.Contains(x, e) {
				return "", fmt.Errorf("schema at %s: the string %q holds %s and cannot be a parameter's value", path, x, e)
			}
		}
		return x, nil
	case json.Number:
		return string(x), nil
	}
	b, err := json.Marshal(plain(v))
	return string(b), err
}

// xmlStr is the grammar of a raw string under a string schema: its
// lengths (counted in characters other than '<'), a format; a pattern is
// not enforced on raw text.
func (c *converter) xmlStr(s *ordered, path string) (string, error) {
	lo, hi, hasLo, hasHi, err := strLengths(s, path)
	if err != nil {
		return "", err
	}
	if has(s, "pattern") {
		return "", unsupported(path, "pattern", "not enforced on the raw text of the XML call syntax")
	}
	if f, ok := s.get("format"); ok {
		fs, _ := f.(string)
		if hasLo || hasHi {
			return "", unsupported(path, "format", "together with minLength or maxLength")
		}
		switch fs {
		case "date", "time", "date-time":
			return c.prim(fs), nil
		case "uuid":
			return `[0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12}`, nil
		case "email":
			return `[a-zA-Z0-9_%+-]{1,32} ("." [a-zA-Z0-9_%+-]{1,15}){0,2} "@" ([a-zA-Z0-9]{1,20} ("-" [a-zA-Z0-9]{1,20})? "."){1,3} [a-zA-Z]{2,6}`, nil
		}
		return "", unsupported(path, "format", fmt.Sprintf("%q (enforced: date, time, date-time, uuid, email)", fs))
	}
	switch {
	case !hasLo && !hasHi:
		return c.xmlText(), nil
	case !hasHi:
		return fmt.Sprintf(`[^<]{%d} %s`, lo, c.xmlText()), nil
	}
	return fmt.Sprintf(`[^<]{%d,%d}`, lo, hi), nil
}

// xmlText is the rule of raw text that holds none of xmlEnds (whose
// only '<' is their first character): any character but '<', or a run
// of '<' followed by text that breaks off each of them at a character
// other than '<' (so "</pa<" cannot be written: stricter than needed,
// never looser); at the end, a run of '<' and a proper prefix of one.
func (c *converter) xmlText() string {
	const name = "xml-text"
	if _, ok := c.rules[name]; ok {
		return name
	}
	tails := make([]string, len(xmlEnds))
	for i, e := range xmlEnds {
		tails[i] = e[1:] // after the '<'
	}
	mid, part := xmlAvoid(tails, "")
	c.add("xml-mid", mid)
	c.add("xml-part", part)
	return c.add(name, `( [^<] | "<"+ xml-mid )* ( "<"+ xml-part? )?`)
}

// xmlAvoid returns, for the texts tails and the prefix pre they share,
// the grammar of a text after pre that breaks off every tail (mid: a
// character that continues none, or the next of some and a mid of what
// follows, never the last character of a tail) and of a proper prefix of
// a tail (part).
func xmlAvoid(tails []string, pre string) (mid, part string) {
	next := map[byte]bool{}
	for _, t := range tails {
		if strings.HasPrefix(t, pre) && len(t) > len(pre) {
			next[t[len(pre)]] = true
		}
	}
	bytes := make([]byte, 0, len(next))
	for b := range next {
		bytes = append(bytes, b)
	}
	sort.Slice(bytes, func(i, j int) bool { return bytes[i] < bytes[j] })
	class := "[^<"
	for _, b := range bytes {
		class += regexEscape(b)
	}
	mids, parts := []string{class + "]"}, []string(nil)
	for _, b := range bytes {
		p := pre + string(b)
		last := false
		for _, t := range tails {
			if t == p {
				last = true
			}
		}
		if last {
			continue // this character completes a tail
		}
		m, q := xmlAvoid(tails, p)
		mids = append(mids, literal(string(b))+" ( "+m+" )")
		if q != "" {
			parts = append(parts, literal(string(b))+" ( "+q+" )?")
		} else {
			parts = append(parts, literal(string(b)))
		}
	}
	return strings.Join(mids, " | "), strings.Join(parts, " | ")
}

// regexEscape writes b for a character class.
func regexEscape(b byte) string {
	if strings.IndexByte(`\]^-[`, b) >= 0 {
		return `\` + string(b)
	}
	return string(b)
}
