package chat

import (
	"encoding/json"

	"github.com/geisten/geist/engine/dialect"
)

// A model family's dialect (its thinking marks, the syntax of its tool
// calls, their parser and grammar) is engine/dialect's; a template finds
// its own from its text. The names below are chat's for dialect's, which
// the template's methods and its messages use.

// ToolCall is one call of a tool: by an assistant message of the
// conversation (rendered through the template) or parsed from the
// model's output (ToolParser).
type ToolCall = dialect.ToolCall

// ToolFormat is how a model writes tool calls: its dialect.
type ToolFormat = dialect.Dialect

// The dialects by the names of the forms of their calls.
var (
	// ToolsAny: the tagged and the JSON forms below are both recognized.
	ToolsAny = dialect.Any
	// ToolsTagged: <tool_call>{"name": ..., "arguments": {...}}</tool_call>
	// (Hermes, Qwen 2.5 and 3, SmolLM3 and others).
	ToolsTagged = dialect.Hermes
	// ToolsXML: <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>...
	// (Qwen3.5, Qwen3-Coder).
	ToolsXML = dialect.Qwen35
	// ToolsJSON: the answer is a JSON object {"name": ..., "parameters":
	// {...}} (Llama 3.1, 3.2).
	ToolsJSON = dialect.Llama
	// ToolsPhi4: Phi-4-mini's list between its control tokens.
	ToolsPhi4 = dialect.Phi4
	// ToolsGranite: <|tool_call|>[...] to the end of the answer (Granite 3).
	ToolsGranite = dialect.Granite
	// ToolsLFM2: LFM2's Python list of calls.
	ToolsLFM2 = dialect.LFM2
	// ToolsGemma4: Gemma 4's calls in its own syntax.
	ToolsGemma4 = dialect.Gemma4
)

// ToolParser separates tool calls from a model's streamed answer
// (dialect.ToolParser).
type ToolParser = dialect.ToolParser

// NewToolParser returns a parser for a model writing calls in format
// (nil: ToolsAny), offered the tools named.
func NewToolParser(format ToolFormat, tools []string) *ToolParser {
	return dialect.NewToolParser(format, tools)
}

// ToolNames returns the function names of tool definitions
// ({"type": "function", "function": {"name": ...}}), skipping what has none.
func ToolNames(tools []json.RawMessage) []string { return dialect.ToolNames(tools) }

// ThinkMarks are the texts that open and close a model's thinking block.
type ThinkMarks = dialect.ThinkMarks

// ThinkSplitter moves a thinking block at the start of an answer out of
// its content (dialect.ThinkSplitter).
type ThinkSplitter = dialect.ThinkSplitter

var (
	// ThinkTags: <think>...</think> (Qwen 3, DeepSeek-R1, SmolLM3,
	// Granite 3.3).
	ThinkTags = dialect.ThinkTags
	// GemmaThought: Gemma 4's thought channel, <|channel>thought\n...<channel|>.
	GemmaThought = dialect.GemmaThought
)

// NewThinkSplitter returns a splitter for the thinking blocks between
// marks (a Template's ThinkMarks).
func NewThinkSplitter(marks ThinkMarks) ThinkSplitter { return dialect.NewThinkSplitter(marks) }

// Dialect returns the dialect the template teaches its model, from the
// template's own text (dialect.Detect); a SmolLM3 template that takes no
// tools (its block goes into the system message) teaches the tagged one.
// It is found once, at Compile.
func (t *Template) Dialect() dialect.Dialect {
	switch {
	case t == nil:
		return dialect.Any
	case t.dialect != nil:
		return t.dialect
	}
	return t.detect()
}

// detect finds the template's dialect (while Compile probes how it takes
// tools, from where it has got).
func (t *Template) detect() dialect.Dialect {
	d := dialect.Detect(t.src)
	if t.place == placeSystemText && d != dialect.Gemma4 {
		return dialect.Hermes
	}
	return d
}

// ToolFormat returns the form of tool calls the template teaches its
// model: its Dialect.
func (t *Template) ToolFormat() ToolFormat { return t.Dialect() }

// ThinkMarks returns the texts around the thinking block the template's
// model writes: its dialect's (Gemma 4's thought channel, else <think>
// and </think>).
func (t *Template) ThinkMarks() ThinkMarks { return t.Dialect().ThinkMarks() }

// ThinkTokens returns the texts of the control tokens of the model's
// thinking marks (dialect.Dialect's ThinkTokens).
func (t *Template) ThinkTokens() []string { return t.Dialect().ThinkTokens() }

// ToolTokens returns the texts of the tokens that open and close the
// model's calls and the others their syntax needs (dialect.Dialect's
// ToolTokens).
func (t *Template) ToolTokens() []string { return t.Dialect().ToolTokens() }
