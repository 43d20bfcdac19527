package chat

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/dialect"
)

// TestPyCallsInContent: an assistant message's calls are written before
// its content as ToolsLFM2 writes them, and read back by parsePyCalls to the
// same arguments; names Python cannot take make a JSON list.
func TestPyCallsInContent(t *testing.T) {
	t.Parallel()
	call := func(name, args string) ToolCall { return ToolCall{Name: name, Arguments: json.RawMessage(args)} }
	for _, c := range []struct {
		calls []ToolCall
		want  string
	}{
		{[]ToolCall{call("HassTurnOn", `{"name": "Kitchen Light", "domain": ["light"]}`), call("get_weather", `{"city": "Köln", "days": 2, "threshold": 0.75}`)},
			`[HassTurnOn(name="Kitchen Light", domain=["light"]), get_weather(city="Köln", days=2, threshold=0.75)]`},
		{[]ToolCall{call("get_weather", `"{\"city\": \"Paris\"}"`), call("GetLiveContext", ``), call("x", `{}`)}, `[get_weather(city="Paris"), GetLiveContext(), x()]`},
		{[]ToolCall{call("f", `{"q": "say \"hi\"\n<b> \\ \u0001", "o": {"a": null, "b": [true, false, 1e5, -0.5]}}`)}, `[f(q="say \"hi\"\n<b> \\ \u0001", o={"a": None, "b": [True, False, 1e5, -0.5]})]`},
		{[]ToolCall{call("f", `{"user id": 1}`), call("g", `{}`)}, `[{"name": "f", "arguments": {"user id": 1}}, {"name": "g", "arguments": {}}]`},
		{[]ToolCall{call("f", `[1, 2]`)}, `[{"name": "f", "arguments": [1, 2]}]`},
	} {
		got, err := dialect.CallList(c.calls, dumpArguments)
		tags := ToolsLFM2.Tags()
		if inner, ok := strings.CutPrefix(got, tags.Open); ok {
			got = strings.TrimSuffix(inner, tags.Close)
		}
		if err != nil || got != c.want {
			t.Errorf("%s: got %s %v, want %s", c.calls, got, err, c.want)
			continue
		}
		if strings.HasPrefix(got, "[{") {
			continue
		}
		back, ok := ToolsLFM2.ParseCalls(got)
		if !ok || len(back) != len(c.calls) {
			t.Errorf("%s: read back %s, %v", got, back, ok)
			continue
		}
		for i, b := range back {
			var want, have any
			raw := c.calls[i].Arguments
			if strings.HasPrefix(string(raw), `"`) {
				var s string
				json.Unmarshal(raw, &s)
				raw = json.RawMessage(s)
			}
			if len(raw) == 0 {
				raw = json.RawMessage(`{}`)
			}
			json.Unmarshal(raw, &want)
			json.Unmarshal(b.Arguments, &have)
			if b.Name != c.calls[i].Name || !reflect.DeepEqual(want, have) {
				t.Errorf("%s: call %d read back as %s %s", got, i, b.Name, b.Arguments)
			}
		}
	}
	msgs := []Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "On it.", ToolCalls: []ToolCall{call("HassTurnOn", `{"name": "lamp"}`)}}, {Role: "tool", Content: "ok", ToolName: "HassTurnOn"}}
	out, err := pyCallsInContent(msgs)
	if err != nil {
		t.Fatal(err)
	}
	if out[1].Content != `<|tool_call_start|>[HassTurnOn(name="lamp")]<|tool_call_end|>On it.` || out[1].ToolCalls != nil || msgs[1].ToolCalls == nil {
		t.Errorf("got %+v (the caller's messages %+v)", out[1], msgs[1])
	}
	if _, err := pyCallsInContent([]Message{{Role: "assistant", ToolCalls: []ToolCall{call("f", `{"a": `)}}}); err == nil {
		t.Error("broken arguments: no error")
	}
}
