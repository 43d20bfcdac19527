package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
)

// LFM2's tool calls are a Python list of calls with keyword arguments,
// between its tokens:
//
//	<|tool_call_start|>[HassTurnOn(name="Kitchen"), HassLightSet(brightness=40)]<|tool_call_end|>
//
// The grammar writes each tool's parameters as keyword arguments, their
// values as Python literals valid under the property's schema: the JSON
// schema compiler with Python's True, False and None, strings in double
// quotes with Python's escapes (JSON's escapes are Python's too), dicts
// and lists as JSON writes objects and arrays.

// pyPrimitives replace primitives for Python literals; the others (numbers,
// the structure of dicts and lists, formats, patterns' characters) are
// Python as they stand.
var pyPrimitives = map[string]string{
	"boolean": `("True" | "False") space`,
	"null":    `"None" space`,
	// Exponents of two digits at most: a float beyond float64's range is
	// inf to Python, which JSON cannot write.
	"number": `("-"? integral-part) ("." decimal-part)? ([eE] [-+]? [0-9]{1,2})? space`,
	// A character of a double-quoted string: itself, or one of Python's
	// escapes (\xhh, \uhhhh and JSON's and C's one-letter escapes).
	"char": `[^"\\\x7F\x00-\x1F] | [\\] (["\\'abfnrtv] | "x" [0-9a-fA-F]{2} | "u" [0-9a-fA-F]{4})`,
}

// pyLiteral writes v (a decoded schema value) as Python's repr writes it,
// strings in double quotes.
func pyLiteral(v any) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case string:
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.Encode(x) // a string always encodes
		return strings.TrimSuffix(b.String(), "\n")
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyLiteral(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *ordered:
		parts := make([]string, len(x.keys))
		for i, k := range x.keys {
			parts[i] = pyLiteral(k) + ": " + pyLiteral(x.vals[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v) // json.Number
}

// pyName reports whether s can stand as a function or keyword name in a
// call list as engine/dialect's lfm2.go reads it: letters, digits, '_', '-' and '.',
// not starting with a digit.
func pyName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r == '-' || r == '.' || unicode.IsLetter(r) || unicode.IsDigit(r) && i > 0) {
			return false
		}
	}
	return s != ""
}

// pyCallRules is CallRules for PythonCall.
func pyCallRules(tools []json.RawMessage, only string) (*Calls, error) {
	c := &converter{rules: map[string]string{}, refs: map[string]string{}, py: true}
	var alts []string
	offered, err := offeredTools(tools, only)
	if err != nil {
		return nil, err
	}
	for _, f := range offered {
		if !pyName(f.Name) {
			return nil, fmt.Errorf("tool %q: a name of letters, digits, '_', '-' and '.' (not first a digit) is needed to call it in Python's syntax", f.Name)
		}
		// Each tool's schema is its own root for $ref (ref takes a fresh
		// rule name for another tool's reference of the same text); its
		// rules are named after the call.
		c.root, c.refs = nil, map[string]string{}
		name := fmt.Sprintf("call-%d", len(alts))
		args, err := c.kwargs(f.Parameters, name)
		if err != nil {
			return nil, fmt.Errorf("tool %q: parameters: %w", f.Name, err)
		}
		alts = append(alts, c.add(name, literal(f.Name+"(")+" "+args+` ")"`))
	}
	return c.calls(alts), nil
}

// calls is the rule call of the alternatives alts and the rules c made.
func (c *converter) calls(alts []string) *Calls {
	var sb strings.Builder
	sb.WriteString("call ::= " + strings.Join(alts, " | ") + "\n")
	for _, n := range c.order {
		fmt.Fprintf(&sb, "%s ::= %s\n", n, c.rules[n])
	}
	return &Calls{rules: sb.String(), n: len(alts)}
}

// kwargs is the grammar of the keyword arguments of a call whose
// parameters have the schema params (an object's: its properties, the
// required ones always, the others in their order; additionalProperties
// as further keywords): key=value, ... with the values' grammars from the
// schema compiler.
func (c *converter) kwargs(params json.RawMessage, name string) (string, error) {
	if len(bytes.TrimSpace(params)) == 0 || string(bytes.TrimSpace(params)) == "null" {
		return "", nil
	}
	if len(params) > MaxSchemaBytes {
		return "", fmt.Errorf("schema of %d bytes: at most %d", len(params), MaxSchemaBytes)
	}
	root, err := decodeOrdered(params)
	if err != nil {
		return "", fmt.Errorf("schema: %w", err)
	}
	c.root = root
	s, ok := root.(*ordered)
	if !ok {
		if root == true {
			s = &ordered{vals: map[string]any{}}
		} else {
			return "", fmt.Errorf("schema: want an object")
		}
	}
	for _, k := range s.keys {
		switch {
		case k == "type":
			if s.vals[k] != "object" {
				return "", unsupported("#", "type", fmt.Sprintf("%v: the arguments of a call are an object's properties", s.vals[k]))
			}
		case k == "properties" || k == "required" || k == "additionalProperties" || k == "$defs" || k == "definitions" || annotations[k]:
		default:
			return "", unsupported("#", k, "at the top of a call's parameters (written as keyword arguments: type, properties, required, additionalProperties)")
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
		if !pyName(k) {
			return "", fmt.Errorf("schema at #/properties: property %q cannot be written as a keyword argument (letters, digits, '_', '-', '.', not first a digit)", k)
		}
		body, err := c.visit(props.vals[k], name+"-"+ruleName(k), "#/properties/"+k)
		if err != nil {
			return "", err
		}
		vname := c.add(name+"-"+ruleName(k), body)
		kw := c.add(name+"-"+ruleName(k)+"-kw", literal(k+"=")+" "+vname)
		if req[k] {
			required = append(required, kw)
		} else {
			optional = append(optional, kw)
		}
	}
	addl := ""
	if a, ok := s.get("additionalProperties"); ok && a != false {
		vbody, err := c.visit(a, name+"-additional", "#/additionalProperties")
		if err != nil {
			return "", err
		}
		vname := c.add(name+"-additional-value", vbody)
		addl = c.add(name+"-additional-kw", `[a-zA-Z_] [a-zA-Z0-9_]{0,63} "=" `+vname)
	}
	// As the object's members (schema.go): the required in order, then
	// any subsequence of the optional ones (opt-i: a non-empty one of
	// optional[i:]), then further keywords.
	sep := `"," ` + c.prim("space") + " "
	optRule := ""
	for i := len(optional) - 1; i >= 0; i-- {
		body := optional[i]
		if i+1 < len(optional) {
			body = optional[i] + ` ( ` + sep + optRule + ` )? | ` + optRule
		}
		optRule = c.add(fmt.Sprintf("%s-opt-%d", name, i), body)
	}
	switch {
	case len(required) > 0:
		seq := strings.Join(required, " "+sep)
		if optRule != "" {
			seq += ` ( ` + sep + optRule + ` )?`
		}
		if addl != "" {
			seq += ` ( ` + sep + addl + ` )*`
		}
		return seq, nil
	case optRule != "" && addl != "":
		return `( ` + optRule + ` ( ` + sep + addl + ` )* | ` + addl + ` ( ` + sep + addl + ` )* )?`, nil
	case optRule != "":
		return optRule + "?", nil
	case addl != "":
		return `( ` + addl + ` ( ` + sep + addl + ` )* )?`, nil
	}
	return "", nil
}
