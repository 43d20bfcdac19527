package httpapi

import (
	"strings"
	"testing"
)

// TestNumCtxOption: Ollama's num_ctx reaches the engine as the request's
// context; a negative one is refused with 400 naming it (it was silently
// ignored), and 0 means the server's.
func TestNumCtxOption(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	chat := func(opts string) (int, string) {
		resp, body := ts.do(t, "POST", "/api/chat", `{"model":"tiny","stream":false,"messages":[{"role":"user","content":"hi"}],"options":`+opts+`}`)
		return resp.StatusCode, body
	}
	if code, body := chat(`{"num_ctx":-1}`); code != 400 || !strings.Contains(body, "options.num_ctx must not be negative") {
		t.Errorf("num_ctx -1: %d %s", code, body)
	}
	if code, body := chat(`{"num_ctx":-1.5}`); code != 400 || !strings.Contains(body, "options.num_ctx must be an integer") {
		t.Errorf("num_ctx -1.5: %d %s", code, body)
	}
	for _, c := range []struct {
		opts string
		want int
	}{{`{"num_ctx":8192}`, 8192}, {`{"num_ctx":0}`, 0}, {`{}`, 0}} {
		if code, body := chat(c.opts); code != 200 {
			t.Fatalf("%s: %d %s", c.opts, code, body)
		}
		reqs := ts.eng.Requests()
		if got := reqs[len(reqs)-1].NumCtx; got != c.want {
			t.Errorf("%s: the engine's NumCtx %d, want %d", c.opts, got, c.want)
		}
	}
	if len(ts.eng.Requests()) != 3 {
		t.Errorf("%d requests reached the engine, want the 3 valid ones", len(ts.eng.Requests()))
	}
}
