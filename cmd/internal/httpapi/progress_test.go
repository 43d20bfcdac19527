package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/engine/appliance/appliancetest"
)

// TestPromptProgressStream: with llama-server's return_progress a streamed
// OpenAI chat answer tells the prompt's progress while it is read (chunks
// with prompt_progress {total, cache, processed, time_ms} and an assistant
// delta without content), before the answer's text; without it, none.
func TestPromptProgressStream(t *testing.T) {
	ts := newTestServer(t, &appliancetest.Engine{Words: 2, Delay: 5 * time.Millisecond}, nil)
	for _, ask := range []bool{true, false} {
		body := `{"model":"tiny","stream":true,"messages":[{"role":"user","content":"PREFILL"}]`
		if ask {
			body += `,"return_progress":true`
		}
		resp, out := ts.do(t, "POST", "/v1/chat/completions", body+`}`)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
		var seen []promptProgress
		text := false
		for _, line := range strings.Split(out, "\n") {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			var c struct {
				Choices []struct {
					Delta struct {
						Role    string
						Content *string
					}
				}
				PromptProgress *promptProgress `json:"prompt_progress"`
			}
			if err := json.Unmarshal([]byte(data), &c); err != nil {
				t.Fatal(err)
			}
			if c.PromptProgress != nil {
				if text || len(c.Choices) != 1 || c.Choices[0].Delta.Role != "assistant" || c.Choices[0].Delta.Content != nil {
					t.Errorf("a progress chunk %s (after text: %v)", data, text)
				}
				seen = append(seen, *c.PromptProgress)
			}
			if len(c.Choices) > 0 && c.Choices[0].Delta.Content != nil && *c.Choices[0].Delta.Content != "" {
				text = true
			}
		}
		if !ask {
			if len(seen) > 0 {
				t.Errorf("progress without return_progress: %v", seen)
			}
			continue
		}
		// The pipe keeps the latest: some passes may be merged.
		if len(seen) < 2 || seen[len(seen)-1].Processed != 1280 || seen[0].Total != 1280 || seen[0].Cache != 64 {
			t.Fatalf("progress %+v", seen)
		}
		for i := 1; i < len(seen); i++ {
			if seen[i].Processed <= seen[i-1].Processed || seen[i].TimeMS < seen[i-1].TimeMS {
				t.Errorf("progress %+v not increasing", seen)
			}
		}
		if !text {
			t.Errorf("no answer text after the progress: %s", out)
		}
	}
}
