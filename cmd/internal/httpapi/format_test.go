package httpapi

import (
	"strings"
	"testing"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
	"github.com/geisten/geist/engine/chat"
)

// TestStructuredRequests: format, response_format, grammar and
// tool_choice reach the engine as grammars (lazy at a tool call's
// opening where they should be; after a thinking block is the core's
// and the engine's business), and what cannot be enforced is a 400
// naming it.
func TestStructuredRequests(t *testing.T) {
	eng := &appliancetest.Engine{}
	ts := newTestServer(t, eng, func(c *Config, _ *appliance.Config) {
		c.Model.Capabilities = []string{"completion", "tools", "thinking"}
		c.Model.ToolFormat = chat.ToolsTagged
	})
	const tools = `[{"type":"function","function":{"name":"HassTurnOn","parameters":{"type":"object","properties":{"name":{"type":"string"}}}}}]`
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct {
		path, body string
		grammar    string // a piece of the grammar, "" for none
		trigger    string
		status     int
		error      string
	}{
		{"/api/chat", `{"model":"tiny","stream":false,"format":"json",` + msgs + `}`, "root ::= object | array", "", 200, ""},
		{"/api/chat", `{"model":"tiny","stream":false,"think":false,"format":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},` + msgs + `}`, `"\"a\""`, "", 200, ""},
		{"/api/generate", `{"model":"tiny","stream":false,"think":false,"prompt":"x","format":{"type":"boolean"}}`, `("true" | "false")`, "", 200, ""},
		{"/api/chat", `{"model":"tiny","stream":false,"format":{"type":"object","minProperties":1},` + msgs + `}`, "", "", 400, `keyword \"minProperties\"`},
		{"/api/chat", `{"model":"tiny","stream":false,"format":"yaml",` + msgs + `}`, "", "", 400, `format \"yaml\"`},
		{"/api/chat", `{"model":"tiny","stream":false,"think":false,"tools":` + tools + `,` + msgs + `}`, `"\"HassTurnOn\""`, "<tool_call>", 200, ""},
		{"/v1/chat/completions", `{"model":"tiny","response_format":{"type":"json_object"},` + msgs + `}`, "root ::= object | array", "", 200, ""},
		{"/v1/chat/completions", `{"model":"tiny","response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"string","format":"uuid"}}},` + msgs + `}`, "[0-9a-fA-F]{8}", "", 200, ""},
		{"/v1/chat/completions", `{"model":"tiny","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"not":{}}}},` + msgs + `}`, "", "", 400, `keyword \"not\"`},
		{"/v1/chat/completions", `{"model":"tiny","response_format":{"type":"xml"},` + msgs + `}`, "", "", 400, "xml"},
		{"/v1/chat/completions", `{"model":"tiny","grammar":"root ::= \"yes\" | \"no\"",` + msgs + `}`, `"yes"`, "", 200, ""},
		{"/v1/chat/completions", `{"model":"tiny","grammar":"root ::= (",` + msgs + `}`, "", "", 400, "grammar"},
		{"/v1/chat/completions", `{"model":"tiny","tools":` + tools + `,"tool_choice":"required",` + msgs + `}`, `"<tool_call>"`, "", 200, ""},
		{"/v1/chat/completions", `{"model":"tiny","tools":` + tools + `,"tool_choice":{"type":"function","function":{"name":"HassTurnOn"}},` + msgs + `}`, `"\"HassTurnOn\""`, "", 200, ""},
		{"/v1/chat/completions", `{"model":"tiny","tools":` + tools + `,"tool_choice":{"type":"function","function":{"name":"Nope"}},` + msgs + `}`, "", "", 400, "Nope"},
		{"/v1/chat/completions", `{"model":"tiny","tools":` + tools + `,"tool_choice":"required","response_format":{"type":"json_object"},` + msgs + `}`, "", "", 400, "cannot both"},
		{"/v1/chat/completions", `{"model":"tiny","tool_choice":"required",` + msgs + `}`, "", "", 400, "without tools"},
	} {
		n := len(eng.Requests())
		resp, body := ts.do(t, "POST", c.path, c.body)
		code := resp.StatusCode
		if code != c.status || !strings.Contains(body, c.error) {
			t.Errorf("%s %s: %d %s, want %d with %q", c.path, c.body, code, body, c.status, c.error)
			continue
		}
		if c.status != 200 {
			continue
		}
		reqs := eng.Requests()
		if len(reqs) != n+1 {
			t.Errorf("%s: %d requests reached the engine", c.body, len(reqs)-n)
			continue
		}
		r := reqs[len(reqs)-1]
		if !strings.Contains(r.Grammar, c.grammar) || r.GrammarTrigger != c.trigger {
			t.Errorf("%s: grammar %q trigger %q, want one with %q and trigger %q", c.body, r.Grammar, r.GrammarTrigger, c.grammar, c.trigger)
		}
	}
}
