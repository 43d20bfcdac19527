package grammar

import (
	"encoding/json"
	"fmt"
	"strings"
)

// gemmaCallRules is CallRules for GemmaCall: each tool's parameters are
// converted in Gemma 4's syntax (schema_gemma4.go) into the rule tool-i,
// and a call is "call:" NAME tool-i (llama.cpp's Gemma 4 grammar has the
// same frame; its arguments are any Gemma value, here they follow each
// tool's parameter schema).
func gemmaCallRules(tools []json.RawMessage, only string) (*Calls, error) {
	c := &converter{rules: map[string]string{}, gemma: true}
	var alts []string
	offered, err := offeredTools(tools, only)
	if err != nil {
		return nil, err
	}
	for _, f := range offered {
		i := f.index
		if strings.ContainsFunc(f.Name, func(r rune) bool { return r <= ' ' || strings.ContainsRune("<>{}[],:", r) }) {
			return nil, fmt.Errorf("tool %q: a name with white space or one of <>{}[],: cannot be written in Gemma 4's call syntax", f.Name)
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
		name := fmt.Sprintf("tool-%d", i)
		c.root, c.refs = root, map[string]string{}
		body, err := c.visit(root, name, "")
		if err != nil {
			return nil, fmt.Errorf("tool %q: parameters: %w", f.Name, err)
		}
		alts = append(alts, literal("call:"+f.Name)+" "+c.add(name, body))
	}
	return c.calls(alts), nil
}

// objectSchema checks that a tool's parameter schema is one of objects
// (the arguments are an object): a schema without a type is taken as
// one (OpenAI's clients send {"properties": ...}, or {} for none).
func objectSchema(root any) (any, error) {
	switch x := root.(type) {
	case bool:
		if x {
			return &ordered{keys: []string{"type"}, vals: map[string]any{"type": "object"}}, nil
		}
	case *ordered:
		if _, ok := x.get("$ref"); ok {
			return nil, unsupported("#", "$ref", "at the top of a tool's parameters")
		}
		t, ok := x.get("type")
		if !ok {
			out := &ordered{keys: append([]string{"type"}, x.keys...), vals: map[string]any{"type": "object"}}
			for k, v := range x.vals {
				out.vals[k] = v
			}
			return out, nil
		}
		if t == "object" {
			return x, nil
		}
	}
	return nil, fmt.Errorf("want an object schema (the arguments are an object)")
}
