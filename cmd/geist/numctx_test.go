package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/zoo"
)

// A server started with a context of 2048 answers Home Assistant's
// num_ctx 8192 with a prompt of ~4,000 tokens (the KV cache grows, the
// model is not reloaded); without num_ctx the same prompt is refused,
// naming num_ctx, --ctx and ctx.
func TestServeNumCtx(t *testing.T) {
	if testing.Short() {
		t.Skip("a 4,000-token prefill: natively only")
	}
	model := zoo.Path(t, "new", "models", "tiny-granite-Q4_0.gguf")
	addr, logs := serveHTTP(t, "-m", model, "--ctx", "2048")
	var ents strings.Builder
	for i := range 75 {
		ents.WriteString("- names: Kitchen Light " + itoa(i) + "\n  domain: light\n  state: 'on'\n  areas: Kitchen\n")
	}
	ask := func(numCtx int) (int, map[string]any) {
		opts := map[string]any{"temperature": 0, "num_predict": 4}
		if numCtx > 0 {
			opts["num_ctx"] = numCtx
		}
		body, _ := json.Marshal(map[string]any{"model": "tiny-granite-Q4_0", "stream": false, "options": opts,
			"messages": []map[string]string{{"role": "system", "content": "You are a voice assistant for Home Assistant.\n" + ents.String()}, {"role": "user", "content": "turn on the kitchen light"}}})
		resp, err := http.Post("http://"+addr+"/api/chat", "application/json", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	code, out := ask(0)
	if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.Contains(msg, "num_ctx") || !strings.Contains(msg, "--ctx") {
		t.Errorf("without num_ctx: %d %v", code, out)
	}
	code, out = ask(8192)
	n, _ := out["prompt_eval_count"].(float64)
	if code != http.StatusOK || n < 3000 || n > 8192 {
		t.Errorf("num_ctx 8192: %d %v\n%s", code, out, logs.String())
	}
	t.Logf("num_ctx 8192 on a --ctx 2048 server: %v prompt tokens answered", n)
}
