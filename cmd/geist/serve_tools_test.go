package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/zoo"
)

// TestServeToolRoundPrompt: a whole tool round (the user's question, the
// model's call, the tool's result) with two tools, sent over the Ollama
// API and over the OpenAI API (arguments as a string, call ids) to geist
// serve running a model with Qwen 2.5's chat template, reaches the model
// as exactly the prompt Python's jinja2 renders from the same
// conversation the way transformers does: the prompt token counts both
// APIs report equal the tokens of that golden.
func TestServeToolRoundPrompt(t *testing.T) {
	if _, err := exec.Command("/usr/bin/python3", "-c", "import jinja2").CombinedOutput(); err != nil {
		t.Skipf("/usr/bin/python3 with jinja2 renders the golden (apt-get install python3-jinja2): %v", err)
	}
	const name = "Qwen-Qwen2.5-7B-Instruct"
	tmpl := zooTemplate(t, name)
	model := withTemplate(t, zoo.Path(t, "models", serveModel), tmpl)

	const tools = `[{"type": "function", "function": {"name": "HassTurnOn", "description": "Turns on a device", "parameters": {"type": "object", "properties": {"name": {"type": "string"}, "brightness": {"type": "number", "minimum": 0.5}}, "required": ["name"]}}},
		{"type": "function", "function": {"name": "get_weather", "description": "Weather – Wetter", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]`
	// The conversation as transformers takes it.
	hf := `[{"role": "system", "content": "You control the home."},
		{"role": "user", "content": "Turn on the kitchen light"},
		{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "HassTurnOn", "arguments": {"name": "Kitchen", "brightness": 1.0}}}]},
		{"role": "tool", "content": "{\"success\": true}", "name": "HassTurnOn"}]`
	in, _ := json.Marshal(map[string]any{
		"templates": map[string]string{name: tmpl},
		"cases": []any{map[string]any{"template": name, "messages": json.RawMessage(hf), "tools": json.RawMessage(tools),
			"add_generation_prompt": true, "bos_token": "", "eos_token": "<|im_end|>"}},
	})
	cmd := exec.Command("/usr/bin/python3", filepath.Join("..", "..", "engine", "chat", "testdata", "tools", "render.py"))
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("render.py: %v", err)
	}
	var golden []struct{ Prompt, Error string }
	if err := json.Unmarshal(out, &golden); err != nil || len(golden) != 1 || golden[0].Error != "" {
		t.Fatalf("render.py: %s %v", out, err)
	}
	tok, f, err := engine.LoadVocab(model)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	want := len(tok.Encode(golden[0].Prompt, true, true))

	_, logs := runServe(t, "-m", model, "--ctx", "2048", "--http", "127.0.0.1:0", "--cache-size", "0", "--data-dir", "")
	addr := httpAddr(t, logs)
	post := func(path, body string) map[string]any {
		resp, err := http.Post("http://"+addr+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if resp.StatusCode != 200 || json.Unmarshal(b, &m) != nil {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
		return m
	}
	ollama := post("/api/chat", `{"model": "", "stream": false, "options": {"num_predict": 1, "temperature": 0}, "tools": `+tools+`, "messages": [
		{"role": "system", "content": "You control the home."},
		{"role": "user", "content": "Turn on the kitchen light"},
		{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "HassTurnOn", "arguments": {"name": "Kitchen", "brightness": 1.0}}}]},
		{"role": "tool", "content": "{\"success\": true}", "tool_name": "HassTurnOn"}]}`)
	openai := post("/v1/chat/completions", `{"model": "", "max_tokens": 1, "temperature": 0, "tools": `+tools+`, "messages": [
		{"role": "system", "content": "You control the home."},
		{"role": "user", "content": "Turn on the kitchen light"},
		{"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "HassTurnOn", "arguments": "{\"name\": \"Kitchen\", \"brightness\": 1.0}"}}]},
		{"role": "tool", "tool_call_id": "call_1", "content": "{\"success\": true}"}]}`)
	got := ollama["prompt_eval_count"]
	gotOpenAI := openai["usage"].(map[string]any)["prompt_tokens"]
	if got != float64(want) || gotOpenAI != float64(want) {
		t.Errorf("prompt tokens: Ollama API %v, OpenAI API %v; the jinja2 golden has %d", got, gotOpenAI, want)
	}
	t.Logf("a tool round of %d prompt tokens reaches the model as the jinja2 golden (%d bytes)", want, len(golden[0].Prompt))
}

// TestServeHTTPLongConversation: a stateless client resends a
// conversation longer than the context (256 tokens here): the oldest
// exchanges are left out and the question is answered, as Ollama does,
// rather than refused as too long.
func TestServeHTTPLongConversation(t *testing.T) {
	model := zoo.Path(t, "models", serveModel)
	_, logs := runServe(t, "-m", model, "--ctx", "256", "--http", "127.0.0.1:0", "--data-dir", "")
	addr := httpAddr(t, logs)
	var msgs []map[string]string
	for i := range 12 {
		msgs = append(msgs, map[string]string{"role": "user", "content": "Tell me a story about a cat and a dog number " + strings.Repeat("x", i%3)},
			map[string]string{"role": "assistant", "content": "Once upon a time there was a little cat. She loved to play with the dog in the park."})
	}
	msgs = append(msgs, map[string]string{"role": "user", "content": "Once upon a time"})
	body, _ := json.Marshal(map[string]any{"model": "", "stream": false, "messages": msgs, "options": map[string]any{"num_predict": 8, "temperature": 0}})
	resp, err := http.Post("http://"+addr+"/api/chat", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var r struct {
		PromptEvalCount int `json:"prompt_eval_count"`
		EvalCount       int `json:"eval_count"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &r) != nil || r.PromptEvalCount >= 256 || r.EvalCount == 0 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	t.Logf("25 messages answered with %d prompt tokens of 256", r.PromptEvalCount)
}
