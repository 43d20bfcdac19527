package grammar

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ToolSyntax is how a model writes its tool calls.
type ToolSyntax int

// Tool call syntaxes (engine/chat's ToolFormat).
const (
	// ToolsPlainJSON: {"name": ..., "arguments": {...}} objects.
	ToolsPlainJSON ToolSyntax = iota
	// ToolsTags: <tool_call>{"name": ..., "arguments": {...}}</tool_call>.
	ToolsTags
	// ToolsLlama: {"name": ..., "parameters": {...}}, several separated
	// by ';' (Llama 3.1, 3.2).
	ToolsLlama
	// ToolsPhi4: <|tool_call|>[{"name": ..., "arguments": {...}}, ...]<|/tool_call|>
	// (Phi-4-mini).
	ToolsPhi4
	// ToolsGranite: <|tool_call|>[{"name": ..., "arguments": {...}}, ...]
	// (Granite 3: the list ends the answer).
	ToolsGranite
	// ToolsLFM2: <|tool_call_start|>[name(key=value, ...), ...]<|tool_call_end|>,
	// the values Python literals (LFM2; tools_py.go).
	ToolsLFM2
	// ToolsGemma4: <|tool_call>call:NAME{key:<|"|>text<|"|>,n:3}<tool_call|>
	// per call (Gemma 4: its own syntax of values, schema_gemma4.go).
	ToolsGemma4
)

// ToolCalls is the grammar of tool calls to the tools offered (each
// {"type": "function", "function": {"name", "parameters"}}, or only the
// one named): the name one of theirs, the arguments valid under that
// tool's parameter schema. With lazy, it is the grammar of what follows
// the trigger it returns (the model writes freely until its call
// opening: <tool_call>, <|tool_call|>, <|tool_call_start|>, Gemma 4's
// <|tool_call>, or Llama's {"name"); otherwise of a whole answer of calls.
func ToolCalls(tools []json.RawMessage, only string, syntax ToolSyntax, lazy bool) (gbnf, trigger string, err error) {
	return toolCalls(tools, only, syntax, lazy, false)
}

// OneToolCall is ToolCalls for exactly one call (OpenAI's
// parallel_tool_calls false): one tagged call, one Llama object, a Phi-4,
// Granite or LFM2 list of one element. A lazy grammar ends with its call;
// what the model writes after it is free text again (the trigger may
// start another call), so the caller keeps only the first call.
func OneToolCall(tools []json.RawMessage, only string, syntax ToolSyntax, lazy bool) (gbnf, trigger string, err error) {
	return toolCalls(tools, only, syntax, lazy, true)
}

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

func toolCalls(tools []json.RawMessage, only string, syntax ToolSyntax, lazy, one bool) (gbnf, trigger string, err error) {
	if syntax == ToolsLFM2 {
		return lfm2Calls(tools, only, lazy, one)
	}
	if syntax == ToolsGemma4 {
		return gemma4Calls(tools, only, lazy, one)
	}
	argsKey := "arguments"
	if syntax == ToolsLlama {
		argsKey = "parameters"
	}
	offered, err := offeredTools(tools, only)
	if err != nil {
		return "", "", err
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
		return "", "", fmt.Errorf("tool parameters: %w", err)
	}
	// src defines root as one call; rename it and wrap it.
	src = strings.Replace(src, "root ::= ", "call ::= ", 1)
	// more repeats the calls after the first (each as next), none with one.
	more := func(next string) string {
		if one {
			return ""
		}
		return " ( " + next + " )*"
	}
	var root string
	switch {
	case syntax == ToolsTags && lazy:
		root, trigger = `root ::= "\n"? call "</tool_call>"`+more(`"\n"* "<tool_call>" "\n"? call "</tool_call>"`), "<tool_call>"
	case syntax == ToolsTags:
		root = `root ::= "<tool_call>" "\n"? call "</tool_call>"` + more(`"\n"* "<tool_call>" "\n"? call "</tool_call>"`)
	case (syntax == ToolsPhi4 || syntax == ToolsGranite) && lazy:
		root, trigger = `root ::= "[" call`+more(`"," " "? call`)+` "]"`, "<|tool_call|>"
		if syntax == ToolsPhi4 {
			root += ` "<|/tool_call|>"`
		}
	case syntax == ToolsPhi4:
		root = `root ::= "<|tool_call|>" "[" call` + more(`"," " "? call`) + ` "]" "<|/tool_call|>"`
	case syntax == ToolsGranite:
		root = `root ::= "<|tool_call|>" "[" call` + more(`"," " "? call`) + ` "]"`
	case syntax == ToolsLlama && lazy:
		// After the opening {"name": the rest of one call: each tool's
		// name, then its parameters (the rules the schema made for
		// alternative i are root-i-...).
		tails := make([]string, len(alts))
		for i := range alts {
			tails[i] = fmt.Sprintf(`root-%d-name "," space root-%d-parameters-kv "}" space`, i, i)
		}
		root, trigger = `root ::= space ":" space ( `+strings.Join(tails, " | ")+` )`, `{"name"`
	case lazy:
		return "", "", fmt.Errorf("calls in plain JSON have no opening to start a lazy grammar at")
	case syntax == ToolsLlama:
		root = `root ::= call` + more(`";" " "? call`)
	default:
		root = `root ::= call` + more(`"\n" call`)
	}
	return root + "\n" + src, trigger, nil
}
