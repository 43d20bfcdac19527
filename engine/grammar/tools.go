package grammar

import (
	"encoding/json"
	"fmt"
	"strings"
)

// CallStyle is how a model writes one call of a tool, whatever stands
// around its calls (tags, lists, separators: engine/dialect's files build
// those around the rule call).
type CallStyle int

// Call styles.
const (
	// JSONCall: {"name": NAME, "arguments": {...}}.
	JSONCall CallStyle = iota
	// JSONParametersCall: {"name": NAME, "parameters": {...}} (Llama 3.1, 3.2).
	JSONParametersCall
	// PythonCall: NAME(key=value, ...), the values Python literals (LFM2;
	// tools_py.go).
	PythonCall
	// GemmaCall: call:NAME{key:<|"|>text<|"|>,n:3} (Gemma 4: its own
	// syntax of values, schema_gemma4.go).
	GemmaCall
	// XMLCall: <function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n...</function>
	// (Qwen3.5, Qwen3-Coder: string values raw, the others as the
	// template writes them; tools_xml.go).
	XMLCall
)

// Calls is the grammar of one call of an offered tool in a CallStyle:
// the rule call and the rules it uses, without a root. The name is one
// of the tools', the arguments valid under that tool's parameter schema.
type Calls struct {
	rules string // call ::= ... and what it uses, one rule a line
	n     int    // the alternatives of call (JSON: the schema's root-i)
}

// CallRules compiles the calls of the tools offered (each {"type":
// "function", "function": {"name", "parameters"}}, or only the one named)
// written in style.
func CallRules(tools []json.RawMessage, only string, style CallStyle) (*Calls, error) {
	switch style {
	case PythonCall:
		return pyCallRules(tools, only)
	case GemmaCall:
		return gemmaCallRules(tools, only)
	case XMLCall:
		return xmlCallRules(tools, only)
	}
	argsKey := "arguments"
	if style == JSONParametersCall {
		argsKey = "parameters"
	}
	offered, err := offeredTools(tools, only)
	if err != nil {
		return nil, err
	}
	var alts []string
	for _, f := range offered {
		params := f.Parameters
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage(`{"type": "object", "properties": {}}`)
		}
		name, _ := json.Marshal(f.Name)
		alts = append(alts, fmt.Sprintf(`{"type": "object", "properties": {"name": {"const": %s}, %q: %s}, "required": ["name", %q]}`, name, argsKey, params, argsKey))
	}
	schema := `{"anyOf": [` + strings.Join(alts, ", ") + `]}`
	src, err := FromSchema([]byte(schema))
	if err != nil {
		return nil, fmt.Errorf("tool parameters: %w", err)
	}
	// src defines root as one call; rename it.
	return &Calls{rules: strings.Replace(src, "root ::= ", "call ::= ", 1), n: len(alts)}, nil
}

// Grammar returns the GBNF whose root rule has the body root, written
// with the rule call (one call) and literals (Literal).
func (c *Calls) Grammar(root string) string { return "root ::= " + root + "\n" + c.rules }

// NameTail is, for the JSON styles, the rest of one call after its
// opening {"name": the separator ':', one tool's name and its arguments
// member, and the closing brace (a lazy grammar triggered by {"name").
func (c *Calls) NameTail(argsKey string) string {
	tails := make([]string, c.n)
	for i := range tails {
		tails[i] = fmt.Sprintf(`root-%d-name "," space root-%d-%s-kv "}" space`, i, i, argsKey)
	}
	return `space ":" space ( ` + strings.Join(tails, " | ") + ` )`
}

// Literal returns s as a GBNF string literal.
func Literal(s string) string { return literal(s) }

// toolFunc is an offered tool's function: its place in the request's
// list, its name and its parameter schema (as sent; may be empty).
type toolFunc struct {
	index      int
	Name       string
	Parameters json.RawMessage
}

// offeredTools returns the tools' functions that may be called: those
// with a name and, when only is set, the one it names; an error when a
// tool is not a JSON object of that shape or none is left.
func offeredTools(tools []json.RawMessage, only string) ([]toolFunc, error) {
	var out []toolFunc
	for i, raw := range tools {
		var t struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("tool %d: %w", i, err)
		}
		f := t.Function
		if f.Name == "" || only != "" && f.Name != only {
			continue
		}
		out = append(out, toolFunc{i, f.Name, f.Parameters})
	}
	if len(out) == 0 {
		if only != "" {
			return nil, fmt.Errorf("tool_choice names %q, which is not among the tools", only)
		}
		return nil, fmt.Errorf("no tools with a function name")
	}
	return out, nil
}
