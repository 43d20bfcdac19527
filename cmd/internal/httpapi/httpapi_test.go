package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
	"github.com/geisten/geist/engine/chat"
)

// testServer runs a core over eng and the HTTP front end on a loopback
// port until the test ends.
type testServer struct {
	*Server
	core *appliance.Core
	eng  *appliancetest.Engine
	url  string
}

func newTestServer(t *testing.T, eng *appliancetest.Engine, tune func(*Config, *appliance.Config)) *testServer {
	t.Helper()
	if eng == nil {
		eng = &appliancetest.Engine{}
	}
	ccfg := appliance.Config{Engine: eng, Model: "tiny", Version: "test", Logger: slog.New(slog.DiscardHandler)}
	cfg := Config{
		Model: Model{Name: "tiny", Family: "llama", ParameterSize: "1M", Quantization: "Q4_0", ContextLength: 512, Size: 1234,
			Template: "{{ messages }}", Capabilities: []string{"completion", "tools"}, ToolFormat: chat.ToolsTagged,
			Info: map[string]any{"general.architecture": "llama"}},
		Version: "test",
		Hosts:   []string{"example.com"}, // httptest.NewRequest's host
	}
	if tune != nil {
		tune(&cfg, &ccfg)
	}
	ccfg.ToolFormat = cfg.Model.ToolFormat // the core parses the calls, as serve sets it
	core := appliancetest.Start(t, ccfg)
	cfg.Core = core.Core
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	core.Serve(func(ctx context.Context) error { return s.Serve(ctx, ln) })
	return &testServer{Server: s, core: core.Core, eng: eng, url: "http://" + ln.Addr().String()}
}

func (ts *testServer) do(t *testing.T, method, path, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, ts.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestOllamaInfoEndpoints(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	for _, c := range []struct {
		method, path, body string
		status             int
		contains           string
	}{
		{"GET", "/", "", 200, "Ollama is running"},
		{"HEAD", "/", "", 200, ""},
		{"GET", "/api/version", "", 200, `"version":"`},
		{"GET", "/api/tags", "", 200, `"name":"tiny:latest","model":"tiny:latest"`},
		{"GET", "/api/ps", "", 200, `"context_length":512`},
		{"POST", "/api/show", `{"model":"tiny"}`, 200, `"capabilities":["completion","tools"]`},
		{"POST", "/api/show", `{"model":"other"}`, 404, `"error":"model \"other\" not found`},
		{"GET", "/v1/models", "", 200, `"id":"tiny:latest","object":"model"`},
		{"GET", "/healthz", "", 200, `"status":"ok"`},
		{"GET", "/readyz", "", 200, `"model":"ok"`},
		{"GET", "/metrics", "", 200, "geist_build_info"},
		{"POST", "/api/embed", `{}`, 501, "not supported"},
		{"GET", "/nope", "", 404, "404"},
	} {
		resp, body := ts.do(t, c.method, c.path, c.body)
		if resp.StatusCode != c.status || !strings.Contains(body, c.contains) {
			t.Errorf("%s %s: %d %q, want %d containing %q", c.method, c.path, resp.StatusCode, body, c.status, c.contains)
		}
	}
}

// ndjsonLines decodes a stream of JSON objects.
func ndjsonLines(t *testing.T, body string) []map[string]any {
	t.Helper()
	var out []map[string]any
	dec := json.NewDecoder(strings.NewReader(body))
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%v in %q", err, body)
		}
		out = append(out, m)
	}
	return out
}

func TestOllamaChatStreamedEqualsWhole(t *testing.T) {
	ts := newTestServer(t, &appliancetest.Engine{Words: 5}, nil)
	resp, body := ts.do(t, "POST", "/api/chat", `{"model":"tiny:latest","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("%d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	lines := ndjsonLines(t, body)
	var streamed strings.Builder
	for _, l := range lines[:len(lines)-1] {
		streamed.WriteString(l["message"].(map[string]any)["content"].(string))
		if l["done"] != false {
			t.Errorf("a chunk before the last is done: %v", l)
		}
	}
	final := lines[len(lines)-1]
	if final["done"] != true || final["done_reason"] != "stop" || final["eval_count"] != float64(5) || final["total_duration"] == nil || final["eval_duration"] == nil {
		t.Errorf("final object %v", final)
	}
	resp, body = ts.do(t, "POST", "/api/chat", `{"model":"tiny","stream":false,"messages":[{"role":"user","content":"hi"}]}`)
	var whole chatResponse
	if err := json.Unmarshal([]byte(body), &whole); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %s %v", resp.StatusCode, body, err)
	}
	if whole.Message.Content != streamed.String() || whole.Message.Content != " w0 w1 w2 w3 w4." {
		t.Errorf("whole %q, streamed %q", whole.Message.Content, streamed.String())
	}
	if whole.PromptEvalCount != 3 || whole.EvalCount != 5 || whole.TotalDuration <= 0 {
		t.Errorf("timings %+v", whole.timings)
	}
}

func TestModelNameChecked(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	resp, body := ts.do(t, "POST", "/api/chat", `{"model":"llama3.2:latest","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 404 || !strings.Contains(body, `geist serves \"tiny:latest\"`) {
		t.Errorf("other model: %d %s", resp.StatusCode, body)
	}
	resp, body = ts.do(t, "POST", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 404 || !strings.Contains(body, `"code":"model_not_found"`) {
		t.Errorf("openai other model: %d %s", resp.StatusCode, body)
	}
	for _, name := range []string{"tiny", "tiny:latest", "TINY", "tiny.gguf", ""} {
		resp, body = ts.do(t, "POST", "/api/generate", `{"model":"`+name+`","prompt":"hi","stream":false}`)
		if resp.StatusCode != 200 {
			t.Errorf("model %q: %d %s", name, resp.StatusCode, body)
		}
	}
}

// toolTools are two tool definitions as Home Assistant sends them.
const toolTools = `[{"type":"function","function":{"name":"HassTurnOn","description":"Turns on a device","parameters":{"type":"object","properties":{"name":{"type":"string"}},"required":[]}}},
{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`

func scripted(answer string) *appliancetest.Engine {
	return &appliancetest.Engine{Script: func(engine.Request) []string {
		// Two-byte pieces, as tokens might split it.
		var ps []string
		for i := 0; i < len(answer); i += 2 {
			ps = append(ps, answer[i:min(i+2, len(answer))])
		}
		return ps
	}}
}

func TestToolCallsOllama(t *testing.T) {
	one := "<tool_call>\n{\"name\": \"HassTurnOn\", \"arguments\": {\"name\": \"Kitchen\"}}\n</tool_call>"
	two := "Sure.\n<tool_call>\n{\"name\": \"HassTurnOn\", \"arguments\": {\"name\": \"Kitchen\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Köln\"}}\n</tool_call>"
	bad := "<tool_call>\n{\"name\": \"HassTurnOn\", \"arguments\": {\"name\": }\n</tool_call>"
	for _, c := range []struct {
		name, answer, content string
		calls                 []string
	}{
		{"one", one, "", []string{`HassTurnOn{"name":"Kitchen"}`}},
		{"two", two, "Sure.", []string{`HassTurnOn{"name":"Kitchen"}`, `get_weather{"city":"Köln"}`}},
		{"malformed", bad, bad, nil},
	} {
		ts := newTestServer(t, scripted(c.answer), nil)
		req := `{"model":"tiny","messages":[{"role":"user","content":"turn on the kitchen light"}],"tools":` + toolTools
		for _, stream := range []bool{false, true} {
			body := req + `,"stream":false}`
			if stream {
				body = req + `}`
			}
			resp, out := ts.do(t, "POST", "/api/chat", body)
			if resp.StatusCode != 200 {
				t.Fatalf("%s: %d %s", c.name, resp.StatusCode, out)
			}
			var content strings.Builder
			var calls []string
			for _, l := range ndjsonLines(t, out) {
				var m chatResponse
				b, _ := json.Marshal(l)
				json.Unmarshal(b, &m)
				content.WriteString(m.Message.Content)
				for _, tc := range m.Message.ToolCalls {
					var args map[string]any
					if err := json.Unmarshal(tc.Function.Arguments, &args); err != nil {
						t.Errorf("%s: arguments %s are not an object", c.name, tc.Function.Arguments)
					}
					a, _ := json.Marshal(args)
					calls = append(calls, tc.Function.Name+string(a))
				}
			}
			if content.String() != c.content || strings.Join(calls, " ") != strings.Join(c.calls, " ") {
				t.Errorf("%s (stream %v): content %q calls %v, want %q %v", c.name, stream, content.String(), calls, c.content, c.calls)
			}
		}
	}
}

func TestToolCallsOpenAI(t *testing.T) {
	two := "<tool_call>\n{\"name\": \"HassTurnOn\", \"arguments\": {\"name\": \"Kitchen\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Köln\"}}\n</tool_call>"
	ts := newTestServer(t, scripted(two), nil)
	req := `{"model":"tiny","messages":[{"role":"user","content":"x"}],"tools":` + toolTools
	resp, out := ts.do(t, "POST", "/v1/chat/completions", req+`}`)
	var r struct {
		Choices []struct {
			Message struct {
				Content   *string
				ToolCalls []openaiToolCall `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	m := r.Choices[0].Message
	if r.Choices[0].FinishReason != "tool_calls" || m.Content != nil || len(m.ToolCalls) != 2 || m.ToolCalls[1].Function.Arguments != `{"city": "Köln"}` || !strings.HasPrefix(m.ToolCalls[0].ID, "call_") {
		t.Errorf("non-streamed: %s", out)
	}
	resp, out = ts.do(t, "POST", "/v1/chat/completions", req+`,"stream":true,"stream_options":{"include_usage":true}}`)
	if resp.Header.Get("Content-Type") != "text/event-stream" || !strings.HasSuffix(out, "data: [DONE]\n\n") {
		t.Fatalf("stream: %s %q", resp.Header.Get("Content-Type"), out)
	}
	if !strings.Contains(out, `"finish_reason":"tool_calls"`) || !strings.Contains(out, `"index":1,"id":"call_`) || !strings.Contains(out, `"usage":{"prompt_tokens":3`) {
		t.Errorf("stream: %s", out)
	}
}

// TestToolCallCutOffHTTP: an answer max_tokens cuts off inside its
// second call gets the first as a tool call and no markup in the content,
// on both APIs, plain and streamed (finish_reason "tool_calls", as for
// any answer with calls: TestServeFamilyTools); cut off inside its only
// call, it has no calls, no markup and finish_reason "length".
func TestToolCallCutOffHTTP(t *testing.T) {
	two := "<tool_call>\n{\"name\": \"HassTurnOn\", \"arguments\": {\"name\": \"Kitchen\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Köln\"}}\n</tool_call>"
	n := (strings.Index(two, "get_weather") + 4) / 2 // two-byte pieces: cut inside the second call's name
	ts := newTestServer(t, scripted(two), nil)
	msgs := fmt.Sprintf(`"messages":[{"role":"user","content":"x"}],"tools":%s`, toolTools)
	_, out := ts.do(t, "POST", "/v1/chat/completions", fmt.Sprintf(`{"model":"tiny","max_tokens":%d,%s}`, n, msgs))
	var r struct {
		Choices []struct {
			Message struct {
				Content   *string
				ToolCalls []openaiToolCall `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Choices) != 1 {
		t.Fatalf("openai: %s", out)
	}
	if m := r.Choices[0].Message; r.Choices[0].FinishReason != "tool_calls" || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "HassTurnOn" || strings.Contains(out, "tool_call>") {
		t.Errorf("openai: %s", out)
	}
	_, out = ts.do(t, "POST", "/v1/chat/completions", fmt.Sprintf(`{"model":"tiny","max_tokens":%d,"stream":true,%s}`, n, msgs))
	if !strings.Contains(out, `"finish_reason":"tool_calls"`) || !strings.Contains(out, `"name":"HassTurnOn"`) || strings.Contains(out, "get_weather") || strings.Contains(out, "tool_call>") {
		t.Errorf("openai stream: %s", out)
	}
	for _, stream := range []string{"false", "true"} {
		_, out = ts.do(t, "POST", "/api/chat", fmt.Sprintf(`{"model":"tiny","stream":%s,"options":{"num_predict":%d},%s}`, stream, n, msgs))
		if !strings.Contains(out, `"done_reason":"stop"`) || !strings.Contains(out, `"name":"HassTurnOn"`) || strings.Contains(out, "get_weather") || strings.Contains(out, "tool_call>") {
			t.Errorf("ollama (stream %s): %s", stream, out)
		}
	}
	// Cut inside the only call: nothing of it, "length".
	_, out = ts.do(t, "POST", "/v1/chat/completions", fmt.Sprintf(`{"model":"tiny","max_tokens":%d,%s}`, strings.Index(two, "Kitchen")/2, msgs))
	if !strings.Contains(out, `"finish_reason":"length"`) || strings.Contains(out, "tool_call") || strings.Contains(out, "HassTurnOn") {
		t.Errorf("openai, cut in the only call: %s", out)
	}
}

// TestParallelToolCallsFalse: parallel_tool_calls false gets one call
// out of a model writing two, plain and streamed, and the engine the
// grammar of one call (tool_choice required; lazy under auto); true or
// absent leaves both calls and the grammar of several.
func TestParallelToolCallsFalse(t *testing.T) {
	two := "Sure.\n<tool_call>\n{\"name\": \"HassTurnOn\", \"arguments\": {\"name\": \"Kitchen\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Köln\"}}\n</tool_call>"
	eng := scripted(two)
	ts := newTestServer(t, eng, nil)
	var tools []json.RawMessage
	json.Unmarshal([]byte(toolTools), &tools)
	for _, c := range []struct {
		extra string
		calls int
		one   bool
		lazy  bool
	}{
		{`,"tool_choice":"required","parallel_tool_calls":false`, 1, true, false},
		{`,"parallel_tool_calls":false`, 1, true, true},
		{`,"tool_choice":"required","parallel_tool_calls":true`, 2, false, false},
		{`,"tool_choice":"required"`, 2, false, false},
	} {
		want, trigger, err := chat.ToolsTagged.Grammar(tools, "", c.lazy, c.one)
		if err != nil {
			t.Fatal(err)
		}
		req := `{"model":"tiny","messages":[{"role":"user","content":"x"}],"tools":` + toolTools + c.extra
		resp, out := ts.do(t, "POST", "/v1/chat/completions", req+`}`)
		var r struct {
			Choices []struct {
				Message struct {
					Content   *string
					ToolCalls []openaiToolCall `json:"tool_calls"`
				}
				FinishReason string `json:"finish_reason"`
			}
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", c.extra, resp.StatusCode, out)
		}
		m := r.Choices[0].Message
		if r.Choices[0].FinishReason != "tool_calls" || len(m.ToolCalls) != c.calls || m.ToolCalls[0].Function.Name != "HassTurnOn" || m.Content == nil || *m.Content != "Sure." {
			t.Errorf("%s: %s", c.extra, out)
		}
		reqs := eng.Requests()
		if got := reqs[len(reqs)-1]; got.Grammar != want || got.GrammarTrigger != trigger {
			t.Errorf("%s: the engine's grammar (trigger %q):\n%s\nwant (trigger %q):\n%s", c.extra, got.GrammarTrigger, got.Grammar, trigger, want)
		}
		_, out = ts.do(t, "POST", "/v1/chat/completions", req+`,"stream":true}`)
		if n := strings.Count(out, `"id":"call_`); n != c.calls || !strings.Contains(out, `"finish_reason":"tool_calls"`) || !strings.HasSuffix(out, "data: [DONE]\n\n") ||
			c.calls == 1 && strings.Contains(out, "get_weather") {
			t.Errorf("%s, streamed: %d calls in %s", c.extra, n, out)
		}
	}
}

// TestToolRoundReachesTheEngine: a whole round (the call, its result)
// arrives at the engine as chat messages with tool calls and the tools.
func TestToolRoundReachesTheEngine(t *testing.T) {
	eng := scripted("The kitchen light is on.")
	ts := newTestServer(t, eng, nil)
	resp, out := ts.do(t, "POST", "/api/chat", `{"model":"tiny","stream":false,"tools":`+toolTools+`,"messages":[
		{"role":"user","content":"turn on the kitchen light"},
		{"role":"assistant","content":"","tool_calls":[{"function":{"name":"HassTurnOn","arguments":{"name":"Kitchen"}}}]},
		{"role":"tool","content":"{\"success\":true}","tool_name":"HassTurnOn"}]}`)
	if resp.StatusCode != 200 || !strings.Contains(out, "The kitchen light is on.") {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	reqs := eng.Requests()
	got := reqs[len(reqs)-1]
	if len(got.Tools) != 2 || len(got.Messages) != 3 || len(got.Messages[1].ToolCalls) != 1 || got.Messages[1].ToolCalls[0].Name != "HassTurnOn" ||
		string(got.Messages[1].ToolCalls[0].Arguments) != `{"name":"Kitchen"}` || got.Messages[2].ToolName != "HassTurnOn" {
		t.Errorf("engine request %+v", got)
	}
}

func TestGuard(t *testing.T) {
	ts := newTestServer(t, nil, func(c *Config, _ *appliance.Config) {
		c.Allow = []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")}
		c.Token = "s3cret"
	})
	h := ts.Handler()
	for _, c := range []struct {
		remote, auth string
		status       int
	}{
		{"10.0.0.1:1234", "", 403},
		{"10.0.0.1:1234", "Bearer s3cret", 403},
		{"192.168.1.7:1234", "", 401},
		{"192.168.1.7:1234", "Bearer wrong", 401},
		{"192.168.1.7:1234", "Bearer s3cret", 200},
		{"127.0.0.1:1234", "", 200},
		{"[::1]:1234", "", 200},
	} {
		r := httptest.NewRequest("GET", "/api/tags", nil)
		r.RemoteAddr = c.remote
		if c.auth != "" {
			r.Header.Set("Authorization", c.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.status || w.Code != 200 && !strings.Contains(w.Body.String(), `"error":`) {
			t.Errorf("%s %q: %d %s, want %d", c.remote, c.auth, w.Code, w.Body.String(), c.status)
		}
	}
}

func TestBodyBounds(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	big := `{"model":"tiny","messages":[{"role":"user","content":"` + strings.Repeat("a", 1<<20) + `"}]}`
	resp, body := ts.do(t, "POST", "/api/chat", big)
	if resp.StatusCode != 413 || !strings.Contains(body, "limit") {
		t.Errorf("1 MiB with Content-Length: %d %s", resp.StatusCode, body)
	}
	// Chunked, no Content-Length: stopped while reading.
	req, _ := http.NewRequest("POST", ts.url+"/api/chat", io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	r2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	if r2.StatusCode != 413 {
		t.Errorf("chunked 1 MiB: %d %s", r2.StatusCode, b)
	}
	st := ts.core.Snapshot()
	if st.Requests[appliance.SourceHTTP]["too_long"] != 2 {
		t.Errorf("refusals not counted: %v", st.Requests)
	}
}

func TestSlowLoris(t *testing.T) {
	ts := newTestServer(t, nil, func(c *Config, _ *appliance.Config) { c.ReadHeaderTimeout = 200 * time.Millisecond })
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("GET /api/tags HTTP/1.1\r\nHost: 127.0.0.1\r\n")) // never ends the headers
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = io.ReadAll(conn)
	if took := time.Since(start); err != nil || took > 2*time.Second {
		t.Errorf("a slow client held its connection %v (err %v)", took, err)
	}
}

func TestBusyIs503(t *testing.T) {
	eng := &appliancetest.Engine{}
	ts := newTestServer(t, eng, func(_ *Config, c *appliance.Config) { c.Limits.Queue = 1 })
	eng.Hold()
	defer eng.Release()
	var wg sync.WaitGroup
	// One runs (held), then one waits: the second goes out once the first
	// runs, or it could find the first still queued and be refused.
	waitState := func(what string, ok func(appliance.State) bool) {
		deadline := time.Now().Add(5 * time.Second)
		for st := ts.core.Snapshot(); !ok(st); st = ts.core.Snapshot() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v", what, st)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for i := range 2 {
		wg.Go(func() { ts.do(t, "POST", "/api/generate", `{"model":"tiny","prompt":"hi","stream":false}`) })
		if i == 0 {
			waitState("the first request does not run", func(st appliance.State) bool { return len(st.Running) == 1 })
		}
	}
	waitState("the second request is not queued", func(st appliance.State) bool { return st.Queue == 1 })
	resp, body := ts.do(t, "POST", "/api/chat", `{"model":"tiny","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "queue full") {
		t.Errorf("full queue: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	resp, body = ts.do(t, "POST", "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, `"type":"server_error"`) {
		t.Errorf("openai full queue: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	eng.Release()
	wg.Wait()
}

// TestDisconnectCancels: a client that goes away mid-stream cancels its
// generation within a token.
func TestDisconnectCancels(t *testing.T) {
	eng := &appliancetest.Engine{Delay: 20 * time.Millisecond}
	ts := newTestServer(t, eng, nil)
	finished := make(chan appliance.Outcome, 1)
	stop := ts.core.Watch(func(ev appliance.Event) {
		if ev.Kind == appliance.EventFinished {
			finished <- *ev.Outcome
		}
	})
	defer stop()
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"model":"tiny","messages":[{"role":"user","content":"long"}]}`
	conn.Write([]byte("POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " + itoa(len(body)) + "\r\n\r\n" + body))
	br := bufio.NewReader(conn)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, `"content":" w2"`) {
			break
		}
	}
	closed := time.Now()
	conn.Close()
	select {
	case o := <-finished:
		if o.Err == nil || o.Err.Code != appliance.CodeCancelled {
			t.Errorf("outcome %+v", o)
		}
		took := time.Since(closed)
		if o.Usage.GeneratedTokens > 6 {
			t.Errorf("generated %d words, %v after the client went away", o.Usage.GeneratedTokens, took)
		}
		t.Logf("cancelled %v after the disconnect, %d words generated", took, o.Usage.GeneratedTokens)
	case <-time.After(5 * time.Second):
		t.Fatal("the generation went on after the client left")
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestHealthDegraded: a degraded part shows in /healthz and /readyz
// (status "degraded", still 200: geist serves on) and as
// geist_degraded{part} 1 in /metrics.
func TestHealthDegraded(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	if _, body := ts.do(t, "GET", "/metrics", ""); !strings.Contains(body, `geist_degraded{part="storage"} 0`) {
		t.Errorf("metrics without degradation:\n%s", body)
	}
	ts.core.SetDegraded(appliance.PartStorage, "the last session save failed: the device's disk is full")
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, body := ts.do(t, "GET", path, "")
		if resp.StatusCode != 200 || !strings.Contains(body, `"status":"degraded"`) || !strings.Contains(body, `"degraded":{"storage":"the last session save failed: the device's disk is full"}`) {
			t.Errorf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
	if _, body := ts.do(t, "GET", "/metrics", ""); !strings.Contains(body, `geist_degraded{part="storage"} 1`) || !strings.Contains(body, `geist_degraded{part="broker"} 0`) {
		t.Errorf("metrics with storage degraded:\n%s", body)
	}
}

// fakeStore pulls by reporting three progress objects.
type fakeStore struct{}

func (fakeStore) Get(name string) (Model, bool, error) {
	if canonicalName(name) == "stored" {
		return Model{Name: "stored", Family: "qwen2", Capabilities: []string{"completion"}}, true, nil
	}
	return Model{}, false, nil
}

func (fakeStore) Pull(ctx context.Context, src string, progress func(PullProgress)) error {
	if !strings.HasPrefix(src, "hf:") {
		return fmt.Errorf("%w: %q", ErrBadSource, src)
	}
	progress(PullProgress{Status: "pulling manifest"})
	if strings.Contains(src, "norange") {
		// The store's second report: the server ignores range requests,
		// as its answer to the header probe tells, past the 100 ms that
		// hold back a repeated status.
		time.Sleep(120 * time.Millisecond)
		progress(PullProgress{Status: "pulling manifest"})
	}
	progress(PullProgress{Status: "pulling 0123456789ab", Digest: "sha256:0123", Total: 10, Completed: 10})
	progress(PullProgress{Status: "verifying sha256 digest"})
	return nil
}

func TestPullAndShowStored(t *testing.T) {
	ts := newTestServer(t, nil, func(c *Config, _ *appliance.Config) { c.Store = fakeStore{} })
	resp, body := ts.do(t, "POST", "/api/pull", `{"model":"llama3.2:latest"}`)
	if resp.StatusCode != 400 || !strings.Contains(body, "not a model geist can pull") {
		t.Errorf("an Ollama library name: %d %s", resp.StatusCode, body)
	}
	resp, body = ts.do(t, "POST", "/api/pull", `{"model":"hf:o/r/f.gguf"}`)
	lines := ndjsonLines(t, body)
	if resp.StatusCode != 200 || len(lines) != 4 || lines[1]["total"] != float64(10) || lines[3]["status"] != "success" {
		t.Errorf("pull: %d %s", resp.StatusCode, body)
	}
	// "pulling manifest" once a pull (issue 37: it came twice), also
	// when the store reports it again.
	resp, body = ts.do(t, "POST", "/api/pull", `{"model":"hf:o/r/norange.gguf"}`)
	if n := strings.Count(body, `"pulling manifest"`); resp.StatusCode != 200 || n != 1 {
		t.Errorf("pull from a server ignoring ranges: %d manifests: %d %s", n, resp.StatusCode, body)
	}
	resp, body = ts.do(t, "POST", "/api/pull", `{"model":"hf:o/r/f.gguf","stream":false}`)
	if resp.StatusCode != 200 || strings.TrimSpace(body) != `{"status":"success"}` {
		t.Errorf("pull, not streamed: %d %s", resp.StatusCode, body)
	}
	resp, body = ts.do(t, "POST", "/api/pull", `{"model":"tiny:latest"}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"success"`) {
		t.Errorf("pulling the loaded model: %d %s", resp.StatusCode, body)
	}
	resp, body = ts.do(t, "POST", "/api/show", `{"model":"stored:latest"}`)
	if resp.StatusCode != 200 || !strings.Contains(body, `"family":"qwen2"`) {
		t.Errorf("show a stored model: %d %s", resp.StatusCode, body)
	}
}

// TestMetricsSpeculation: /metrics reports model passes, tokens per pass,
// the mean tree size and accepted depth, and each drafter's drafted and
// accepted tokens.
func TestMetricsSpeculation(t *testing.T) {
	eng := &appliancetest.Engine{Speculation: engine.Stats{TargetPasses: 5, TreePasses: 4, Drafted: 12, Accepted: 5,
		Drafters: map[string]engine.DrafterStats{"lookup": {Drafted: 8, Accepted: 4, Steps: 3}, "self": {Drafted: 4, Accepted: 1, Steps: 1}}}}
	ts := newTestServer(t, eng, nil)
	if resp, body := ts.do(t, "POST", "/api/generate", `{"model":"tiny","prompt":"hi","stream":false}`); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	_, body := ts.do(t, "GET", "/metrics", "")
	for _, want := range []string{`geist_model_passes_total{kind="all"} 5`, `geist_model_passes_total{kind="tree"} 4`,
		"geist_tokens_per_pass 2", "geist_draft_tree_size 3", "geist_draft_accepted_depth 1.25",
		`geist_draft_tokens_total{drafter="lookup"} 8`, `geist_draft_accepted_tokens_total{drafter="self"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in the metrics:\n%s", want, body)
		}
	}
}

// TestCacheAccounting: Ollama's prompt_eval_count counts only the prompt
// tokens evaluated, OpenAI's usage says how many were cached, and
// /metrics counts prompt, cached, restored and evaluated tokens.
func TestCacheAccounting(t *testing.T) {
	ts := newTestServer(t, &appliancetest.Engine{Words: 3, Varied: true}, nil)
	// The engine's first answer: 60 prompt tokens, 48 reused (24 restored).
	resp, body := ts.do(t, "POST", "/api/chat", `{"model":"tiny","stream":false,"messages":[{"role":"user","content":"hi"}]}`)
	var oll chatResponse
	if err := json.Unmarshal([]byte(body), &oll); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %s %v", resp.StatusCode, body, err)
	}
	if oll.PromptEvalCount != 60-48 {
		t.Errorf("prompt_eval_count %d, want the 12 of 60 prompt tokens not reused", oll.PromptEvalCount)
	}
	// The second: 80 prompt tokens, 67 reused.
	resp, body = ts.do(t, "POST", "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"hi"}]}`)
	var oai struct{ Usage openaiUsage }
	if err := json.Unmarshal([]byte(body), &oai); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %s %v", resp.StatusCode, body, err)
	}
	if u := oai.Usage; u.PromptTokens != 80 || u.PromptTokensDetails.CachedTokens != 67 {
		t.Errorf("usage %+v, want 80 prompt tokens, 67 cached", u)
	}
	_, body = ts.do(t, "GET", "/metrics", "")
	for _, want := range []string{`geist_tokens_total{kind="prompt"} 140`, `geist_tokens_total{kind="cached"} 115`,
		`geist_tokens_total{kind="restored"} 57`, `geist_tokens_total{kind="evaluated"} 25`} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in the metrics:\n%s", want, body)
		}
	}
}
