package dialect

import (
	"encoding/json"
	"strings"
)

// Granite 3's calls: <|tool_call|>[{"name": ..., "arguments": {...}}, ...]
// to the end of the answer. Granite 4.0-H files serve Granite 3.3's
// template and so this dialect (with <think> marks); Granite 4's own
// template writes Hermes' tags (hermes.go).
var Granite Dialect = &granite{family{"granite", Tags{"<|tool_call|>", "", true}}}

type granite struct{ family }

func init() { Register(Granite, 40) }

// Detect: the template writes <|tool_call|> (Phi-4-mini's, which closes
// it, is tried first).
func (*granite) Detect(src string) bool { return strings.Contains(src, "<|tool_call|>") }

func (g *granite) Grammar(tools []json.RawMessage, only string, lazy, one bool) (string, string, error) {
	return jsonGrammar(g.tags, tools, only, lazy, one)
}
