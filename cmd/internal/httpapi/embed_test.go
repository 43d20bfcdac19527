package httpapi

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
)

// fakeEmbedder answers each input with [len(text) or tokens, 1] and
// records the last request.
type fakeEmbedder struct{ last EmbedRequest }

func (f *fakeEmbedder) Embed(ctx context.Context, r EmbedRequest) (EmbedResult, error) {
	f.last = r
	switch r.Model {
	case "gone":
		return EmbedResult{}, fmt.Errorf("%w: %q", ErrEmbedModelNotFound, r.Model)
	case "text":
		return EmbedResult{}, fmt.Errorf("%w: %q", ErrNotEmbeddingModel, r.Model)
	case "busy":
		return EmbedResult{}, ErrEmbedBusy
	case "long":
		return EmbedResult{}, fmt.Errorf("%w: too long (truncate is off)", ErrEmbedInput)
	}
	res := EmbedResult{Model: "emb"}
	for _, in := range r.Inputs {
		x := float32(len(in.Text))
		if in.Tokens != nil {
			x = float32(len(in.Tokens))
		}
		res.Embeddings = append(res.Embeddings, []float32{x, 1})
		res.Tokens += 2
	}
	return res, nil
}

// TestEmbedEndpoints: the three endpoints' request shapes reach the
// embedder as inputs, their answers have Ollama's and OpenAI's shapes, and
// the embedder's errors get their statuses.
func TestEmbedEndpoints(t *testing.T) {
	fe := &fakeEmbedder{}
	ts := newTestServer(t, &appliancetest.Engine{}, func(c *Config, _ *appliance.Config) { c.Embedder = fe })
	for _, c := range []struct {
		path, body string
		status     int
		contains   string
		inputs     []EmbedInput
	}{
		{"/api/embed", `{"model":"e","input":"abc"}`, 200, `"embeddings":[[3,1]]`, []EmbedInput{{Text: "abc"}}},
		{"/api/embed", `{"input":["a","bb"],"truncate":false,"dimensions":1,"keep_alive":0}`, 200, `"prompt_eval_count":4`, []EmbedInput{{Text: "a"}, {Text: "bb"}}},
		{"/api/embed", `{"input":""}`, 200, `"embeddings":[]`, nil},
		{"/api/embed", `{"input":{"a":1}}`, 400, "string or an array", nil},
		{"/api/embed", `{"input":[1,2]}`, 400, "input", nil},
		{"/api/embeddings", `{"prompt":"abcd"}`, 200, `{"embedding":[4,1]}`, []EmbedInput{{Text: "abcd"}}},
		{"/v1/embeddings", `{"input":"ab"}`, 200, `"data":[{"object":"embedding","embedding":[2,1],"index":0}]`, []EmbedInput{{Text: "ab"}}},
		{"/v1/embeddings", `{"input":[1,2,3]}`, 200, `"embedding":[3,1]`, []EmbedInput{{Tokens: []int32{1, 2, 3}}}},
		{"/v1/embeddings", `{"input":[[1],"x"],"encoding_format":"base64"}`, 200, `"embedding":"AACAPwAAgD8="`, []EmbedInput{{Tokens: []int32{1}}, {Text: "x"}}},
		{"/v1/embeddings", `{"input":[]}`, 400, "empty", nil},
		{"/v1/embeddings", `{"input":[true]}`, 400, "input[0]", nil},
		{"/v1/embeddings", `{"model":"gone","input":"x"}`, 404, "model_not_found", nil},
		{"/api/embed", `{"model":"text","input":"x"}`, 400, "does not compute embeddings", nil},
		{"/api/embed", `{"model":"busy","input":"x"}`, 503, "busy", nil},
		{"/api/embed", `{"model":"long","input":"x"}`, 400, "truncate", nil},
	} {
		fe.last = EmbedRequest{}
		resp, body := ts.do(t, "POST", c.path, c.body)
		if resp.StatusCode != c.status || !strings.Contains(body, c.contains) {
			t.Errorf("%s %s: %d %s, want %d containing %s", c.path, c.body, resp.StatusCode, body, c.status, c.contains)
		}
		if c.inputs != nil && !slices.EqualFunc(fe.last.Inputs, c.inputs, func(a, b EmbedInput) bool {
			return a.Text == b.Text && slices.Equal(a.Tokens, b.Tokens)
		}) {
			t.Errorf("%s %s: inputs %+v", c.path, c.body, fe.last.Inputs)
		}
	}
	ts.do(t, "POST", "/api/embed", `{"input":["a"],"truncate":false,"dimensions":7,"keep_alive":"0s"}`)
	if fe.last.Truncate || fe.last.Dimensions != 7 || fe.last.KeepAlive != "0s" {
		t.Errorf("options: %+v", fe.last)
	}
	ts.do(t, "POST", "/api/embed", `{"input":["a"]}`)
	if !fe.last.Truncate {
		t.Error("truncate defaults to false")
	}
}
