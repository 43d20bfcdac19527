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

// SmolLM3's own template writes the tools it is given (xml_tools, each as
// Python's str of the definition) in this block of its system message;
// engine/chat writes the same block into the system message of a SmolLM3
// template that takes no tools (Unsloth's, llama.cpp's copy), where the
// model learned to read them.
const (
	smolToolsHead = "You may call one or more functions to assist with the user query.\nYou are provided with function signatures within <tools></tools> XML tags:\n\n<tools>\n"
	smolToolsTail = "</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>"
)

// SmolLM3ToolBlock is SmolLM3's tool block around the tools' texts.
func SmolLM3ToolBlock(tools []string) string {
	var b strings.Builder
	b.WriteString(smolToolsHead)
	for _, t := range tools {
		b.WriteString(t + "\n")
	}
	b.WriteString(smolToolsTail)
	return b.String()
}
