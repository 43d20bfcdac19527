package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
)

// FuzzRequests: any body on any generation route gets a well-formed
// answer or a JSON error with a 4xx/5xx status the API documents, never a
// panic or a 500. The scripted model answers with tool calls, so the
// parser runs too.
func FuzzRequests(f *testing.F) {
	eng := &appliancetest.Engine{Script: func(req engine.Request) []string {
		return []string{"Sure <tool_", "call>{\"name\": \"a\", \"arguments\": {}}</tool_call> ok"}
	}}
	core := appliancetest.Start(f, appliance.Config{Engine: eng})
	s, err := New(Config{Core: core.Core, Model: Model{Name: "tiny", Capabilities: []string{"completion", "tools", "thinking"}}})
	if err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	routes := []string{"/api/chat", "/api/generate", "/v1/chat/completions", "/v1/completions", "/api/show", "/api/pull"}
	for _, seed := range []string{
		`{"model":"tiny","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"a"}}]}`,
		`{"model":"tiny","stream":false,"prompt":"hi","options":{"temperature":0,"stop":["x"],"num_predict":3}}`,
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"a","arguments":"{\"x\":1}"}}]},{"role":"tool","tool_call_id":"c","content":"1"}],"tools":[{"type":"function","function":{"name":"a"}}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"tiny","think":true,"format":"json","keep_alive":-1,"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`,
		`{"model":"tiny","context":[1,2,3],"prompt":"x","raw":true}`,
		`{"options":{"temperature":"hot"}}`, `[`, ``,
	} {
		for i := range routes {
			f.Add(uint8(i), seed)
		}
	}
	f.Fuzz(func(t *testing.T, route uint8, body string) {
		r := httptest.NewRequest("POST", routes[int(route)%len(routes)], strings.NewReader(body))
		r.RemoteAddr = "127.0.0.1:1"
		r.Host = "127.0.0.1:11434"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		switch w.Code {
		case 200, 400, 404, 413, 501, 503:
		default:
			t.Fatalf("%s %q: status %d: %s", r.URL.Path, body, w.Code, w.Body.String())
		}
		if w.Code != 200 && !strings.Contains(w.Body.String(), `"error":`) {
			t.Fatalf("%s %q: %d without a JSON error: %s", r.URL.Path, body, w.Code, w.Body.String())
		}
	})
}
