package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/engine/zoo"
)

// geist serve mounts the status page on its HTTP listener: browsers get
// the page at /, other clients Ollama's liveness text; the live feed
// reports the model and, after a chat over /api/chat, the request.
func TestServePage(t *testing.T) {
	model := zoo.Path(t, "models", serveModel)
	_, logs := runServe(t, "-m", model, "--ctx", "256", "--temp", "0", "--max-tokens", "16", "--http", "127.0.0.1:0", "--http-page-texts")
	addr := httpAddr(t, logs)
	base := "http://" + addr
	get := func(path, accept string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, body := get("/", "text/html,application/xhtml+xml"); resp.StatusCode != 200 || !strings.HasPrefix(body, "<!doctype html>") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("GET / from a browser: %s %.40q CSP %q", resp.Status, body, resp.Header.Get("Content-Security-Policy"))
	}
	if _, body := get("/", ""); !strings.HasPrefix(body, "Ollama is running (geist ") {
		t.Errorf("GET / from a script: %q", body)
	}

	req, _ := http.NewRequest("GET", base+"/api/geist/events?text=1", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan [2]string, 32)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev string
		for sc.Scan() {
			if e, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				ev = e
			} else if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- [2]string{ev, d}
			}
		}
		close(events)
	}()
	want := func(kind string) string {
		t.Helper()
		for {
			select {
			case e, ok := <-events:
				if !ok {
					t.Fatalf("the feed ended before a %s event", kind)
				}
				if e[0] == kind {
					return e[1]
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no %s event", kind)
			}
		}
	}
	var st struct {
		Model  string `json:"model"`
		State  string `json:"state"`
		TextOK bool   `json:"text_allowed"`
	}
	json.Unmarshal([]byte(want("state")), &st)
	if st.Model != "stories260K-Q4_0" || st.State != "idle" || !st.TextOK {
		t.Errorf("first state %+v", st)
	}
	cresp, err := http.Post(base+"/api/chat", "application/json", strings.NewReader(`{"model":"","messages":[{"role":"user","content":"Once upon a time"}],"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	chat, _ := io.ReadAll(cresp.Body)
	cresp.Body.Close()
	var rec struct {
		Source, Outcome, Question, Answer string
		Generated                         int `json:"generated_tokens"`
	}
	json.Unmarshal([]byte(want("request")), &rec)
	if rec.Source != "http" || rec.Outcome != "answered" || rec.Generated == 0 || rec.Question != "Once upon a time" || rec.Answer == "" ||
		!strings.Contains(string(chat), `"done":true`) {
		t.Errorf("the feed's request %+v after /api/chat answered %s", rec, chat)
	}
	t.Logf("feed: %+v", rec)
}
