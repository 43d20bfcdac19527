// Package chat renders a model's chat template (tokenizer.chat_template, a
// Jinja2 template in the Hugging Face transformers dialect) into the prompt
// text that llama.cpp would build for the same conversation.
//
// The template language itself is executed by github.com/ardanlabs/jinja,
// with Hugging Face transformers' tojson (Python's json.dumps without HTML
// escaping, keys in insertion order; pyjson.go) in place of the engine's,
// and the request's tools (Options.Tools) as the tools variable, so that
// tool definitions reach the prompt exactly as transformers renders them.
// This package adds what llama.cpp puts around the engine
// (common/chat.cpp, common_chat_templates_apply_jinja):
//
//   - the variables it passes: messages, bos_token, eos_token,
//     enable_thinking (true), add_generation_prompt (only when true; it is
//     undefined otherwise), date_string and datetime (today's date), and
//     tools only when there are some (undefined otherwise);
//   - the functions raise_exception and strftime_now, the latter reading
//     Options.Now so that a prompt can be reproduced;
//   - its message fixes: a "developer" role becomes "system", and a system
//     message is merged into the following message ("system\nuser") when
//     the template ignores or rejects the system role;
//   - the removal of a leading BOS text from the rendered prompt, because
//     the tokenizer adds the BOS token itself.
//
// A file without a template gets ChatML, llama.cpp's fallback.
//
// llama.cpp decides whether a template supports the system role by
// watching, in a trial render, whether it reads the system message's
// content. The engine here has no such hook, so Compile renders a trial
// conversation and looks for the system text in the output instead; a
// template that reads the system content without printing it verbatim
// (say, only its first letter) counts as ignoring it.
//
// Differences of the engine from Python's Jinja2 (and so, for templates
// that use them, possibly from llama.cpp) found while testing. None of them
// occurs in the zoo's templates. Builtin filters, tests, methods and the
// printing of values cannot be replaced through the engine's API; a missing
// filter could be supplied as a variable of the same name (the engine falls
// back to one), but no template at hand needs those listed below.
//
//   - None prints as "" rather than "None" ('a' ~ none, dict.get of a
//     missing key, a macro argument defaulting to none); 1.0 and 10/5 print
//     as "1" and "2" rather than "1.0" and "2.0".
//   - str.split ignores maxsplit; startswith/endswith do not take tuples;
//     str.splitlines and str.rfind, the tests divisibleby and sameas without
//     parentheses, the filters center and groupby, float literals with an
//     exponent and '%'-formatting of strings are missing; the filters last
//     and min do not work on strings.
//   - A dict literal ending in "}}" inside {{ }} (such as {{ {'a': {'b': 1}} }})
//     ends the tag early and fails to parse.
//   - An index past the end of a list gives undefined rather than an error.
//   - {% generation %} ... {% endgeneration %} (transformers' marks of the
//     assistant's text for training masks) renders its body unchanged, as
//     transformers does, but a {% set %} inside it is seen after the block
//     (as in llama.cpp), where transformers' call block keeps it inside.
//     SmolLM3's template sets nothing there.
//
// The engine itself has no limits on recursion, work or size: this package
// instruments every compiled template so that a hostile one (a model file
// is untrusted input) fails with an error wrapping ErrLimit instead of
// killing the process, within the Limits (engine/chat/sandbox). Compile's
// trial renders run under the same limits, so a template that recurses or
// loops without end is refused when the model loads.
package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
	"github.com/geisten/geist/engine/chat/sandbox"
	"github.com/geisten/geist/engine/dialect"
)

// ChatML is the template llama.cpp uses when a model file carries no
// tokenizer.chat_template: "<|im_start|>role\ncontent<|im_end|>\n" per
// message and "<|im_start|>assistant\n" as the generation prompt.
const ChatML = "{%- for message in messages -%}\n" +
	"  {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n" +
	"{%- endfor -%}\n" +
	"{%- if add_generation_prompt -%}\n" +
	"  {{- '<|im_start|>assistant\\n' -}}\n" +
	"{%- endif -%}"

// Message is one turn of a conversation.
type Message struct {
	Role    string // "system", "user", "assistant", "tool", ...
	Content string
	// ToolCalls are an assistant message's calls of tools; ToolName and
	// ToolCallID say which call a "tool" message answers. See the
	// message dicts in tools.go.
	ToolCalls  []ToolCall
	ToolName   string
	ToolCallID string

	// systemTools is the tools field of a system message (Phi-4-mini's
	// template prints it; withTools sets it).
	systemTools string
}

// Options are the per-render inputs besides the messages.
type Options struct {
	// AddGenerationPrompt asks the template to open an assistant turn at
	// the end of the prompt.
	AddGenerationPrompt bool
	// BOS and EOS are the texts of the vocabulary's BOS and EOS tokens
	// (the template variables bos_token and eos_token). A rendered prompt
	// that starts with BOS loses it: the tokenizer adds the BOS token.
	BOS, EOS string
	// Now is the time strftime_now, date_string and datetime report, in
	// Now's location. The zero value means time.Now().
	Now time.Time
	// Extra holds additional template variables (llama.cpp's
	// chat_template_kwargs), e.g. "enable_thinking": false. They override
	// the defaults above, except messages, bos_token, eos_token and
	// add_generation_prompt. Values may be nil, bool, int, int64, float64,
	// string, []any, map[string]any (converted with its keys sorted) or a
	// jinja.Value (used as is, e.g. a dict whose key order matters).
	Extra map[string]any
	// Tools are the tool definitions the model may call, each a JSON
	// object as the client sent it (OpenAI's and Ollama's
	// {"type": "function", "function": {...}}), given to the template as
	// its tools variable, keys in the order sent. None: tools stays
	// undefined.
	Tools []json.RawMessage
	// Context, if set, ends the render when it is done (a request's
	// cancellation): the render fails at its next step.
	Context context.Context
}

// Limits bound what compiling and rendering one template may cost
// (engine/chat/sandbox, which every render runs under).
type Limits = sandbox.Limits

// DefaultLimits are far above what real chat templates need and far below
// what would strain a 4 GB board (sandbox.DefaultLimits).
var DefaultLimits = sandbox.DefaultLimits

// ErrLimit is wrapped by the error Compile or Render returns when a
// template exceeds one of its Limits.
var ErrLimit = sandbox.ErrLimit

// ErrRaised is wrapped by the error Render returns when the template calls
// raise_exception; the error text carries the template's message.
var ErrRaised = errors.New("chat: template raised an exception")

// raisedError is the error raise_exception produces inside the engine.
type raisedError struct{ msg string }

func (e *raisedError) Error() string { return "chat: template raised an exception: " + e.msg }
func (e *raisedError) Unwrap() error { return ErrRaised }

// Template is a compiled chat template. It is safe for concurrent use.
type Template struct {
	src  string
	prog *jinja.Template
	lim  Limits
	// probing is the budget the trial renders at Compile share (one
	// budget for all of them, not one each).
	probing *sandbox.Budget

	// Capabilities found by trial renders at compile time, as llama.cpp's
	// jinja::caps_get does.
	systemRole   bool // the template uses a system message's content
	typedContent bool // the template needs content as [{type: text, text: ...}]
	tools        bool // the template prints the tools it is given
	place        int  // how it takes them (placeVar, ...; tools.go)
	// dialect is its model family's (dialect.go), found after the trial
	// renders.
	dialect dialect.Dialect
}

// Compile parses a chat template once so that it can be rendered many
// times, under DefaultLimits. An empty source compiles ChatML.
func Compile(src string) (*Template, error) {
	return CompileLimits(src, DefaultLimits)
}

// CompileLimits is Compile with the given limits on compiling and on
// every render. A template whose trial renders exceed them is refused.
func CompileLimits(src string, lim Limits) (t *Template, err error) {
	if src == "" {
		src = ChatML
	}
	if err := sandbox.Precheck(src, lim); err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("chat: template engine failed while parsing: %v", r)
		}
	}()
	prog, err := jinja.Compile(jinjaSource(src))
	if err != nil {
		return nil, fmt.Errorf("chat: parse template: %w", oneLine(err))
	}
	if err := sandbox.Instrument(prog); err != nil {
		return nil, err
	}
	t = &Template{src: src, prog: prog, lim: lim, systemRole: true}
	t.probing = sandbox.NewBudget(lim, nil)
	err = t.probe()
	t.probing = nil
	if err != nil {
		return nil, err
	}
	t.dialect = t.detect()
	return t, nil
}

// jinjaSource is src as Python's Jinja2 reads it before lexing (and
// llama.cpp's engine too): the line ends "\r\n" and "\r" become "\n",
// and a newline at the very end is dropped (transformers leaves Jinja2's
// keep_trailing_newline off). The engine keeps both as written, so a
// template saved with a final newline after its last tag printed that
// newline after the prompt, and one with CRLF line ends printed "\r\n".
func jinjaSource(src string) string {
	if strings.ContainsRune(src, '\r') {
		src = strings.ReplaceAll(src, "\r\n", "\n")
		src = strings.ReplaceAll(src, "\r", "\n")
	}
	return strings.TrimSuffix(src, "\n")
}

// oneLine keeps an engine error on one line (it may quote template text).
func oneLine(err error) error {
	if msg := err.Error(); strings.ContainsAny(msg, "\r\n") {
		return errors.New(strings.Join(strings.Fields(msg), " "))
	}
	return err
}

// Render renders the conversation msgs as llama.cpp does.
func (t *Template) Render(msgs []Message, opt Options) (string, error) {
	if t == nil || t.prog == nil {
		return "", errors.New("chat: render: nil template")
	}
	now := opt.Now
	if now.IsZero() {
		now = time.Now()
	}
	msgs, extra, err := t.withTools(msgs, opt.Tools, opt.Extra)
	if err != nil {
		return "", err
	}
	list, err := t.messages(msgs)
	if err != nil {
		return "", err
	}
	out, err := t.exec(sandbox.NewBudget(t.lim, opt.Context), list, opt.BOS, opt.EOS, opt.AddGenerationPrompt, now, extra)
	if err != nil {
		return "", err
	}
	if opt.BOS != "" {
		out = strings.TrimPrefix(out, opt.BOS)
	}
	return out, nil
}

// messages applies llama.cpp's message fixes and converts msgs to engine
// values.
func (t *Template) messages(msgs []Message) ([]jinja.Value, error) {
	ms := make([]Message, len(msgs))
	copy(ms, msgs)
	// llama.cpp maps developer to system for every template but GPT-OSS's.
	if !strings.Contains(t.src, "<|channel|>") {
		for i := range ms {
			if ms[i].Role == "developer" {
				ms[i].Role = "system"
			}
		}
	}
	if !t.systemRole && len(ms) > 0 && ms[0].Role == "system" {
		if len(ms) > 1 {
			ms[1].Content = ms[0].Content + "\n" + ms[1].Content
		}
		ms = ms[1:]
	}
	out := make([]jinja.Value, len(ms))
	for i, m := range ms {
		v, err := t.message(m)
		if err != nil {
			return nil, fmt.Errorf("chat: message %d: %w", i, err)
		}
		out[i] = v
	}
	return out, nil
}

// message builds the dict a template sees for m: role and content, and
// the tool fields only when set (templates test 'tool_calls' in message).
func (t *Template) message(m Message) (jinja.Value, error) {
	v := jinja.NewDict()
	d := v.AsDict()
	d.Set("role", jinja.NewString(m.Role))
	if t.typedContent {
		part := jinja.NewDict()
		part.AsDict().Set("type", jinja.NewString("text"))
		part.AsDict().Set("text", jinja.NewString(m.Content))
		d.Set("content", jinja.NewList([]jinja.Value{part}))
	} else {
		d.Set("content", jinja.NewString(m.Content))
	}
	if err := toolFields(d, m); err != nil {
		return jinja.Undefined(), err
	}
	if m.systemTools != "" {
		d.Set("tools", jinja.NewString(m.systemTools))
	}
	return v, nil
}

// exec runs the template with llama.cpp's variables.
func (t *Template) exec(b *sandbox.Budget, msgs []jinja.Value, bos, eos string, addGen bool, now time.Time, extra map[string]any) (out string, err error) {
	if b == nil {
		b = sandbox.NewBudget(t.lim, nil)
	}
	// A budget shared by several renders starts each one with a clean
	// slate of errors but keeps what was spent.
	b.Reset()
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("chat: template engine failed while rendering: %v", r)
		}
	}()
	data := map[string]jinja.Value{
		"enable_thinking": jinja.NewBool(true),
		"date_string":     jinja.NewString(Strftime("%d %b %Y", now)),
		"datetime":        jinja.NewString(Strftime("%b %d %Y", now)),
		"strftime_now":    strftimeNow(now),
		"raise_exception": jinja.NewCallable("raise_exception", raiseException),
		"range": jinja.NewCallable("range", func(args []jinja.Value, kw map[string]jinja.Value) (jinja.Value, error) {
			return b.Range(args)
		}),
	}
	for k, v := range extra {
		if jv, ok := v.(jinja.Value); ok {
			data[k] = jv
		} else {
			data[k] = jinja.FromGoValue(v)
		}
	}
	data["messages"] = jinja.NewList(msgs)
	data["bos_token"] = jinja.NewString(bos)
	data["eos_token"] = jinja.NewString(eos)
	if addGen {
		data["add_generation_prompt"] = jinja.NewBool(true)
	} else {
		delete(data, "add_generation_prompt")
	}
	for k, v := range b.Guards(pyToJSON) {
		data[k] = v
	}
	out, err = t.prog.RenderValues(data)
	if err := b.Err(); err != nil {
		// A limit, even where the engine discarded the error.
		return "", err
	}
	if err == nil && len(out) > t.lim.Output {
		return "", sandbox.Limitf("a prompt of %d bytes (limit %d)", len(out), t.lim.Output)
	}
	if err != nil {
		var re *raisedError
		if errors.As(err, &re) {
			return "", re
		}
		return "", fmt.Errorf("chat: render template: %w", oneLine(err))
	}
	return out, nil
}

func raiseException(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	msg := ""
	if len(args) > 0 {
		if args[0].IsString() {
			msg = args[0].AsString()
		} else {
			msg = args[0].String()
		}
	}
	return jinja.Undefined(), &raisedError{msg: msg}
}

func strftimeNow(now time.Time) jinja.Value {
	return jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) != 1 || !args[0].IsString() {
			return jinja.Undefined(), errors.New("strftime_now: expected one format string")
		}
		return jinja.NewString(Strftime(args[0].AsString(), now)), nil
	})
}

// probe finds, as llama.cpp does when it loads a template, whether the
// template uses a system message and whether it accepts a message's
// content as a plain string. Its renders may fail (a template may reject
// the trial conversations), except by exceeding a limit: that refuses the
// template.
func (t *Template) probe() error {
	now := time.Date(2024, time.July, 26, 0, 0, 0, 0, time.UTC)
	// Content: llama.cpp passes typed content ([{type: text, text: ...}])
	// to a template that fails on a plain string. This engine is more
	// lenient than llama.cpp's (indexing a string by a key gives undefined
	// rather than an error), so a string that does not reach the output
	// counts as a failure too, provided the text of typed content does
	// reach it (and not merely the printed form of the part's dict, as
	// when a template prints content[0] whole).
	const userMarker = "User message 5c0d2e"
	plain := t.mustMessage(Message{Role: "user", Content: userMarker})
	out, err := t.exec(t.probing, []jinja.Value{plain}, "", "", true, now, nil)
	if errors.Is(err, ErrLimit) {
		return err
	}
	if err != nil || !strings.Contains(out, userMarker) {
		t.typedContent = true
		plain = t.mustMessage(Message{Role: "user", Content: userMarker})
		out, err := t.exec(t.probing, []jinja.Value{plain}, "", "", true, now, nil)
		if errors.Is(err, ErrLimit) {
			return err
		}
		t.typedContent = err == nil && strings.Contains(out, userMarker) && !strings.Contains(out, "'"+userMarker+"'")
	}

	// System role: llama.cpp watches whether the template reads the system
	// message's content; here, whether a unique content reaches the output.
	const marker = "System message 7f3a91"
	msgs := []jinja.Value{t.mustMessage(Message{Role: "system", Content: marker}), t.mustMessage(Message{Role: "user", Content: "User message"})}
	out, err = t.exec(t.probing, msgs, "", "", true, now, nil)
	if errors.Is(err, ErrLimit) {
		return err
	}
	t.systemRole = err == nil && strings.Contains(out, marker)
	return t.probeTools(now)
}

// mustMessage is message for messages without tool fields (no error).
func (t *Template) mustMessage(m Message) jinja.Value {
	v, _ := t.message(m)
	return v
}
