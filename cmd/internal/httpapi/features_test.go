package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
	"github.com/geisten/geist/engine/chat"
)

// TestThinking: a model with a thinking template answers with its
// thinking in message.thinking (streamed and not); think false turns it
// off in the template (enable_thinking false).
func TestThinking(t *testing.T) {
	eng := scripted("<think>\nThe user greets.\n</think>\n\nHello!")
	ts := newTestServer(t, eng, func(c *Config, _ *appliance.Config) {
		c.Model.Capabilities = []string{"completion", "thinking"}
	})
	_, body := ts.do(t, "POST", "/api/chat", `{"model":"tiny","stream":false,"messages":[{"role":"user","content":"hi"}]}`)
	var r chatResponse
	json.Unmarshal([]byte(body), &r)
	if r.Message.Thinking != "\nThe user greets.\n" || r.Message.Content != "Hello!" {
		t.Errorf("not streamed: %s", body)
	}
	_, body = ts.do(t, "POST", "/api/chat", `{"model":"tiny","think":true,"messages":[{"role":"user","content":"hi"}]}`)
	var thinking, content strings.Builder
	for _, l := range ndjsonLines(t, body) {
		m := l["message"].(map[string]any)
		if s, ok := m["thinking"].(string); ok {
			thinking.WriteString(s)
		}
		content.WriteString(m["content"].(string))
	}
	if thinking.String() != "\nThe user greets.\n" || content.String() != "Hello!" {
		t.Errorf("streamed: thinking %q content %q", thinking.String(), content.String())
	}
	ts.do(t, "POST", "/api/chat", `{"model":"tiny","think":false,"stream":false,"messages":[{"role":"user","content":"hi"}]}`)
	reqs := eng.Requests()
	if v := reqs[len(reqs)-1].TemplateVars["enable_thinking"]; v != false {
		t.Errorf("think false: template variables %v", reqs[len(reqs)-1].TemplateVars)
	}
}

// TestThinkUnsupported: think true (or a level) to a model that cannot
// think is a 400 in Ollama's words, on /api/chat and /api/generate; think
// false or absent is served.
func TestThinkUnsupported(t *testing.T) {
	ts := newTestServer(t, &appliancetest.Engine{}, nil) // capabilities: completion, tools
	for _, c := range []struct{ path, body string }{
		{"/api/chat", `{"model":"tiny","think":true,"stream":false,"messages":[{"role":"user","content":"hi"}]}`},
		{"/api/chat", `{"model":"tiny","think":"high","messages":[{"role":"user","content":"hi"}]}`},
		{"/api/generate", `{"model":"tiny","think":true,"stream":false,"prompt":"hi"}`},
	} {
		resp, body := ts.do(t, "POST", c.path, c.body)
		if resp.StatusCode != 400 || body != `{"error":"\"tiny\" does not support thinking"}`+"\n" {
			t.Errorf("%s %s: %d %q", c.path, c.body, resp.StatusCode, body)
		}
	}
	for _, body := range []string{
		`{"model":"tiny","think":false,"stream":false,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"tiny","stream":false,"messages":[{"role":"user","content":"hi"}]}`,
	} {
		if resp, out := ts.do(t, "POST", "/api/chat", body); resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", body, resp.StatusCode, out)
		}
	}
}

// TestGenerateContext: /api/generate returns the conversation's tokens as
// context, and a request with context reads the earlier conversation
// (detokenized) before the new turn, rendered, raw.
func TestGenerateContext(t *testing.T) {
	eng := &appliancetest.Engine{}
	ts := newTestServer(t, eng, func(c *Config, _ *appliance.Config) {
		c.Model.RenderPrompt = func(system, prompt string) (string, error) { return "<u>" + prompt + "</u>", nil }
		c.Model.Tokenize = func(text string, bos bool) []int {
			out := make([]int, len(text))
			for i := range text {
				out[i] = int(text[i])
			}
			return out
		}
		c.Model.Detokenize = func(ids []int) string {
			b := make([]byte, len(ids))
			for i, id := range ids {
				b[i] = byte(id)
			}
			return string(b)
		}
	})
	_, body := ts.do(t, "POST", "/api/generate", `{"model":"tiny","prompt":"hi","stream":false}`)
	var r generateResponse
	json.Unmarshal([]byte(body), &r)
	want := "<u>hi</u> w0 w1 w2."
	got := make([]byte, len(r.Context))
	for i, id := range r.Context {
		got[i] = byte(id)
	}
	if string(got) != want {
		t.Fatalf("context %q, want %q", got, want)
	}
	ctx, _ := json.Marshal(r.Context)
	_, body = ts.do(t, "POST", "/api/generate", `{"model":"tiny","prompt":"more","stream":false,"context":`+string(ctx)+`}`)
	reqs := eng.Requests()
	if p := reqs[len(reqs)-1].Prompt; p != want+"<u>more</u>" {
		t.Errorf("the engine read %q", p)
	}
	if !strings.Contains(body, `"context":[`) {
		t.Errorf("no context in %s", body)
	}
}

// TestLlamaToolCalls: a model writing Llama 3's JSON calls.
func TestLlamaToolCalls(t *testing.T) {
	eng := &appliancetest.Engine{Script: func(engine.Request) []string {
		return []string{`{"name": "get_weather", `, `"parameters": {"city": "Paris"}}`}
	}}
	ts := newTestServer(t, eng, func(c *Config, _ *appliance.Config) { c.Model.ToolFormat = chat.ToolsJSON })
	for _, stream := range []string{"true", "false"} {
		_, body := ts.do(t, "POST", "/api/chat", `{"model":"tiny","stream":`+stream+`,"tools":`+toolTools+`,"messages":[{"role":"user","content":"weather?"}]}`)
		if !strings.Contains(body, `"tool_calls":[{"function":{"index":0,"name":"get_weather","arguments":{"city":"Paris"}}}]`) || strings.Contains(body, `"content":"{`) {
			t.Errorf("stream %s: %s", stream, body)
		}
	}
}

// TestResentHistory: the earlier turns a client resends are history the
// engine may leave out (all before the last user message, after the
// system message); a tool round after the last question stays.
func TestResentHistory(t *testing.T) {
	eng := &appliancetest.Engine{}
	ts := newTestServer(t, eng, nil)
	for _, c := range []struct {
		body    string
		history int
	}{
		{`{"model":"tiny","stream":false,"messages":[{"role":"system","content":"s"},{"role":"user","content":"1"},{"role":"assistant","content":"a"},{"role":"user","content":"2"},{"role":"assistant","content":"b"},{"role":"user","content":"3"}]}`, 4},
		{`{"model":"tiny","stream":false,"messages":[{"role":"user","content":"1"},{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{}}}]},{"role":"tool","content":"r"}]}`, 0},
	} {
		ts.do(t, "POST", "/api/chat", c.body)
		reqs := eng.Requests()
		if h := reqs[len(reqs)-1].History; h != c.history {
			t.Errorf("%s: engine history %d, want %d", c.body, h, c.history)
		}
	}
}
