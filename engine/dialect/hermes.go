package dialect

import (
	"encoding/json"
	"strings"
)

// Hermes' tagged calls, <tool_call>{"name": ..., "arguments": {...}}</tool_call>
// one call per pair of tags, several in a row: Hermes, Qwen 2.5 and 3,
// SmolLM3 (whose templates without tools get its tool block in the
// system message, engine/chat's tools.go), Granite 4; Qwen3.5 writes its
// XML-like calls between the same tags (qwen35.go), which this dialect
// reads too.
var Hermes Dialect = &hermes{family{"tagged", Tags{callOpen, callClose, false}}}

const (
	callOpen  = "<tool_call>"
	callClose = "</tool_call>"
)

type hermes struct{ family }

func init() { Register(Hermes, 20) }

// Detect: the template writes <tool_call>.
func (*hermes) Detect(src string) bool { return strings.Contains(src, callOpen) }

func (h *hermes) Grammar(tools []json.RawMessage, only string, lazy, one bool) (string, string, error) {
	return jsonGrammar(h.tags, tools, only, lazy, one)
}
