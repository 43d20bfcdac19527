package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/chat"
)

// A model without a template that renders tools refuses a request with
// tools, as Ollama does, on both APIs; tool_choice none and no tools pass.
func TestToolsRefusedWithoutTemplate(t *testing.T) {
	eng := scripted("Hello!")
	chatml, err := chat.Compile("")
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, eng, func(c *Config, a *appliance.Config) {
		c.Model.Capabilities = []string{"completion"}
		c.Model.Template = chatml.Source()
		a.NoTools = appliance.NoTools(chatml) // as serve sets it: the core refuses, for every front end
	})
	tools := `[{"type":"function","function":{"name":"HassTurnOn","parameters":{"type":"object","properties":{"name":{"type":"string"}}}}}]`
	code, body := ts.do(t, "POST", "/api/chat", `{"model":"tiny","stream":false,"tools":`+tools+`,"messages":[{"role":"user","content":"lights on"}]}`)
	if code.StatusCode != http.StatusBadRequest || !strings.Contains(body, "tiny does not support tools") || !strings.Contains(body, "no chat template") {
		t.Errorf("/api/chat: %d %s", code.StatusCode, body)
	}
	code, body = ts.do(t, "POST", "/v1/chat/completions", `{"model":"tiny","tools":`+tools+`,"messages":[{"role":"user","content":"lights on"}]}`)
	if code.StatusCode != http.StatusBadRequest || !strings.Contains(body, "does not support tools") {
		t.Errorf("/v1/chat/completions: %d %s", code.StatusCode, body)
	}
	code, body = ts.do(t, "POST", "/v1/chat/completions", `{"model":"tiny","tool_choice":"none","tools":`+tools+`,"messages":[{"role":"user","content":"hi"}]}`)
	if code.StatusCode != http.StatusOK {
		t.Errorf("tool_choice none: %d %s", code.StatusCode, body)
	}
	code, body = ts.do(t, "POST", "/api/chat", `{"model":"tiny","stream":false,"messages":[{"role":"user","content":"hi"}]}`)
	if code.StatusCode != http.StatusOK || !strings.Contains(body, "Hello!") {
		t.Errorf("no tools: %d %s", code.StatusCode, body)
	}
	code, body = ts.do(t, "POST", "/api/show", `{"model":"tiny"}`)
	if code.StatusCode != http.StatusOK || strings.Contains(body, `"tools"`) {
		t.Errorf("/api/show claims tools: %s", body)
	}
}
