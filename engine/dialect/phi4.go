package dialect

import (
	"encoding/json"
	"strings"
)

// Phi-4-mini's calls: <|tool_call|>[{"name": ..., "arguments": {...}}, ...]<|/tool_call|>,
// a JSON list (or one object) between its control tokens. Its template
// takes the tools as the system message's tools field (engine/chat's
// tools.go).
var Phi4 Dialect = &phi4{family{"phi4", Tags{"<|tool_call|>", "<|/tool_call|>", true}}}

// Phi4System is the system message engine/chat adds for Phi-4-mini's
// tools when the conversation has none: what the model card and Ollama's
// template say.
const Phi4System = "You are a helpful assistant with some tools."

type phi4 struct{ family }

func init() { Register(Phi4, 30) }

// Detect: the template has Phi-4-mini's tool role or closing token.
func (*phi4) Detect(src string) bool {
	return strings.Contains(src, "<|tool|>") || strings.Contains(src, "<|/tool_call|>")
}

func (p *phi4) Grammar(tools []json.RawMessage, only string, lazy, one bool) (string, string, error) {
	return jsonGrammar(p.tags, tools, only, lazy, one)
}
