package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/geisten/geist/engine/chat"
	"github.com/geisten/geist/engine/sample"
	"github.com/geisten/geist/engine/zoo"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestQwen35ForcedToolCall: the zoo's qwen35 file (Qwen3.5's template:
// the qwen35 dialect) generating under the grammar of tool_choice
// required (its XML-like calls) with the chat's tools writes calls that
// parse (with the tools' schemas) into calls of the tools offered whose
// arguments validate, greedy and sampled, with and without
// speculation; with one tool named, that tool's.
func TestQwen35ForcedToolCall(t *testing.T) {
	e := loadFile(t, zoo.Path(t, "new2", "models", "tiny-qwen35-Q4_0.gguf"), Options{Ctx: 1024, Batch: 32, SelfSpec: SelfSpecOff})
	tmpl := e.Template()
	if tmpl == nil || tmpl.ToolFormat() != chat.ToolsXML {
		t.Fatalf("the file's template: dialect %v, want qwen35", tmpl.ToolFormat())
	}
	tools := []json.RawMessage{
		json.RawMessage(`{"type": "function", "function": {"name": "HassTurnOn", "parameters": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "area": {"type": "string", "maxLength": 8}}, "required": ["name"]}}}`),
		json.RawMessage(`{"type": "function", "function": {"name": "HassLightSet", "parameters": {"type": "object", "properties": {"brightness": {"type": "integer", "minimum": 0, "maximum": 100}, "on": {"type": "boolean"}}, "required": ["brightness"]}}}`),
	}
	schemas := map[string]*jsonschema.Schema{}
	for _, raw := range tools {
		var d struct {
			Function struct {
				Name       string
				Parameters json.RawMessage
			}
		}
		json.Unmarshal(raw, &d)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(d.Function.Parameters))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("s.json", doc); err != nil {
			t.Fatal(err)
		}
		if schemas[d.Function.Name], err = c.Compile("s.json"); err != nil {
			t.Fatal(err)
		}
	}
	msgs := []chat.Message{{Role: "user", Content: "Turn on the kitchen light."}}
	for _, c := range []struct {
		name string
		only string
		sp   SpecOptions
		smp  sample.Params
	}{
		{"greedy", "", SpecOptions{Mode: SpecOff}, greedy()},
		{"sampled", "", SpecOptions{Mode: SpecOff}, sample.Params{Temperature: 1, TopP: 1, RepeatPenalty: 1, Seed: 3}},
		{"named, speculative", "HassLightSet", SpecOptions{Mode: SpecAuto, Fixed: true}, greedy()},
	} {
		src, trigger, err := tmpl.ToolFormat().Grammar(tools, c.only, false, false)
		if err != nil || trigger != "" {
			t.Fatal(err, trigger)
		}
		var text []byte
		st, err := e.Generate(context.Background(), Request{Messages: msgs, Tools: tools, MaxTokens: 300, Sampling: c.smp, Spec: c.sp,
			Grammar: src, GrammarAfterThink: true, TemplateVars: map[string]any{"enable_thinking": false},
			OnText: func(b []byte) error { text = append(text, b...); return nil }})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		p := chat.NewToolParser(tmpl.ToolFormat(), chat.ToolNames(tools))
		p.Schemas(tools)
		content, calls := p.Add(string(text))
		rest, more := p.Flush()
		content, calls = content+rest, append(calls, more...)
		if content != "" || len(calls) == 0 || st.StopReason != "eos" {
			t.Fatalf("%s: %q (%s): content %q, %d calls", c.name, text, st.StopReason, content, len(calls))
		}
		for _, call := range calls {
			sch, ok := schemas[call.Name]
			if !ok || c.only != "" && call.Name != c.only {
				t.Fatalf("%s: %q called %q", c.name, text, call.Name)
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(call.Arguments))
			if err != nil {
				t.Fatalf("%s: arguments %s: %v", c.name, call.Arguments, err)
			}
			if err := sch.Validate(doc); err != nil {
				t.Errorf("%s: arguments %s do not validate: %v", c.name, call.Arguments, err)
			}
		}
		t.Logf("%s: %d calls %s from %.200q", c.name, len(calls), dialectCalls(calls), text)
	}
}

// dialectCalls writes calls for a log.
func dialectCalls(calls []chat.ToolCall) string {
	var b bytes.Buffer
	for _, c := range calls {
		b.WriteString(c.Name)
		b.Write(c.Arguments)
		b.WriteByte(' ')
	}
	return b.String()
}
