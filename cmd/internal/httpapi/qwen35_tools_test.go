package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/chat"
)

// TestQwen35ToolCalls: a model whose template writes Qwen3.5's XML-like
// calls (chat.ToolsXML) gets the grammar of calls in that form for
// tool_choice required (lazy at <tool_call> under auto), and its calls
// come back with arguments of their parameters' types: a string
// parameter's "50" a string, an integer's 40 a number, True a boolean.
func TestQwen35ToolCalls(t *testing.T) {
	answer := "Sure.\n\n<tool_call>\n<function=HassLightSet>\n<parameter=name>\n50\n</parameter>\n<parameter=brightness>\n40\n</parameter>\n<parameter=on>\nTrue\n</parameter>\n</function>\n</tool_call>"
	eng := scripted(answer)
	ts := newTestServer(t, eng, func(c *Config, _ *appliance.Config) { c.Model.ToolFormat = chat.ToolsXML })
	const tools = `[{"type":"function","function":{"name":"HassLightSet","parameters":{"type":"object","properties":{"name":{"type":"string"},"brightness":{"type":"integer","minimum":0,"maximum":100},"on":{"type":"boolean"}},"required":["name","brightness"]}}}]`
	var raw []json.RawMessage
	json.Unmarshal([]byte(tools), &raw)
	for _, c := range []struct {
		choice string
		lazy   bool
	}{{`,"tool_choice":"required"`, false}, {"", true}} {
		want, trigger, err := chat.ToolsXML.Grammar(raw, "", c.lazy, false)
		if err != nil {
			t.Fatal(err)
		}
		resp, out := ts.do(t, "POST", "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"x"}],"tools":`+tools+c.choice+`}`)
		var r struct {
			Choices []struct {
				Message struct {
					Content   *string
					ToolCalls []openaiToolCall `json:"tool_calls"`
				}
				FinishReason string `json:"finish_reason"`
			}
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil || resp.StatusCode != 200 || len(r.Choices) != 1 {
			t.Fatalf("%s: %d %s", c.choice, resp.StatusCode, out)
		}
		m := r.Choices[0].Message
		if r.Choices[0].FinishReason != "tool_calls" || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "HassLightSet" || m.Content == nil || *m.Content != "Sure." {
			t.Fatalf("%s: %s", c.choice, out)
		}
		if got := m.ToolCalls[0].Function.Arguments; got != `{"name":"50","brightness":40,"on":true}` {
			t.Errorf("%s: arguments %s", c.choice, got)
		}
		reqs := eng.Requests()
		if got := reqs[len(reqs)-1]; got.Grammar != want || got.GrammarTrigger != trigger || !strings.Contains(got.Grammar, `"<parameter=brightness>\x0A"`) {
			t.Errorf("%s: the engine's grammar (trigger %q):\n%s\nwant (trigger %q):\n%s", c.choice, got.GrammarTrigger, got.Grammar, trigger, want)
		}
	}
}
