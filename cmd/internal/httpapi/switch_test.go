package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/geisten/geist/engine/appliance"
)

// fakeSwitch stores "other" and "third" and routes to a handler that
// names the model it answers for.
type fakeSwitch struct {
	mu       sync.Mutex
	loaded   map[string]time.Duration
	routed   []string
	kas      []time.Duration
	unloaded []string
}

func (f *fakeSwitch) Route(ctx context.Context, name string, ka time.Duration) (http.Handler, func(), error) {
	n := canonicalName(name)
	if n != "other" && n != "third" {
		return nil, nil, fmt.Errorf("model %q: %w", name, ErrNotStored)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loaded[n] = ka
	f.routed = append(f.routed, n)
	f.kas = append(f.kas, ka)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"answered_by": n, "path": r.URL.Path})
	}), func() {}, nil
}

func (f *fakeSwitch) Unload(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := canonicalName(name)
	_, ok := f.loaded[n]
	delete(f.loaded, n)
	f.unloaded = append(f.unloaded, n)
	return ok
}

func (f *fakeSwitch) Stored() ([]Model, error) {
	return []Model{{Name: "other", Size: 10}, {Name: "third", Size: 20}, {Name: "tiny", Size: 1234}}, nil
}

func (f *fakeSwitch) Running() []RunningModel {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []RunningModel
	for n, ka := range f.loaded {
		exp := NeverExpires
		switch {
		case ka == KeepAliveDefault:
			exp = time.Now().Add(5 * time.Minute)
		case ka >= 0:
			exp = time.Now().Add(ka)
		}
		out = append(out, RunningModel{Model: Model{Name: n}, ExpiresAt: exp})
	}
	return out
}

// TestModelSwitch: with Config.Models a request naming another stored
// model goes to its handler (Ollama's and OpenAI's endpoints), keep_alive
// as Ollama reads it; /api/tags and /v1/models list every stored model
// once, /api/ps the loaded ones with their expiry; keep_alive 0 without a
// prompt unloads; a model not stored is still a 404, and the model serve
// started with is answered by this server.
func TestModelSwitch(t *testing.T) {
	fs := &fakeSwitch{loaded: map[string]time.Duration{}}
	ts := newTestServer(t, scripted("hello"), func(c *Config, _ *appliance.Config) { c.Models = fs })
	for _, c := range []struct{ path, body, want string }{
		{"/api/chat", `{"model":"other:latest","messages":[{"role":"user","content":"x"}],"keep_alive":"10m"}`, "other"},
		{"/api/generate", `{"model":"third","prompt":"x","keep_alive":-1}`, "third"},
		{"/v1/chat/completions", `{"model":"other","messages":[{"role":"user","content":"x"}]}`, "other"},
		{"/v1/completions", `{"model":"third","prompt":"x"}`, "third"},
	} {
		resp, out := ts.do(t, "POST", c.path, c.body)
		var got map[string]string
		json.Unmarshal([]byte(out), &got)
		if resp.StatusCode != 200 || got["answered_by"] != c.want || got["path"] != c.path {
			t.Errorf("%s %s: %d %s", c.path, c.body, resp.StatusCode, out)
		}
	}
	if fmt.Sprint(fs.kas) != fmt.Sprint([]time.Duration{10 * time.Minute, KeepAliveForever, KeepAliveDefault, KeepAliveDefault}) {
		t.Errorf("keep_alive as routed: %v", fs.kas)
	}
	// The model serve started with: this server answers.
	resp, out := ts.do(t, "POST", "/api/chat", `{"model":"tiny","stream":false,"messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 200 || !strings.Contains(out, `"content":"hello"`) {
		t.Errorf("the first model: %d %s", resp.StatusCode, out)
	}
	resp, out = ts.do(t, "POST", "/api/chat", `{"model":"missing","messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 404 {
		t.Errorf("a model not stored: %d %s", resp.StatusCode, out)
	}
	_, out = ts.do(t, "GET", "/api/tags", "")
	var tags struct{ Models []listedModel }
	json.Unmarshal([]byte(out), &tags)
	var names []string
	for _, m := range tags.Models {
		names = append(names, m.Name)
	}
	if strings.Join(names, " ") != "tiny:latest other:latest third:latest" {
		t.Errorf("/api/tags lists %v", names)
	}
	_, out = ts.do(t, "GET", "/v1/models", "")
	if strings.Count(out, `"id"`) != 3 {
		t.Errorf("/v1/models: %s", out)
	}
	if resp, out := ts.do(t, "GET", "/v1/models/third:latest", ""); resp.StatusCode != 200 || !strings.Contains(out, `"id":"third:latest"`) {
		t.Errorf("/v1/models/third:latest: %d %s", resp.StatusCode, out)
	}
	if resp, _ := ts.do(t, "GET", "/v1/models/missing", ""); resp.StatusCode != 404 {
		t.Errorf("/v1/models/missing: %d", resp.StatusCode)
	}
	_, out = ts.do(t, "GET", "/api/ps", "")
	var ps struct{ Models []runningModel }
	json.Unmarshal([]byte(out), &ps)
	if len(ps.Models) != 3 {
		t.Errorf("/api/ps: %s", out)
	}
	for _, m := range ps.Models {
		if m.Name == "other:latest" && m.ExpiresAt.Year() != time.Now().Year() {
			t.Errorf("other's expiry %v", m.ExpiresAt)
		}
	}
	// Ollama's unload request.
	resp, out = ts.do(t, "POST", "/api/generate", `{"model":"other","keep_alive":0}`)
	if resp.StatusCode != 200 || !strings.Contains(out, `"done_reason":"unload"`) || len(fs.unloaded) != 1 || fs.unloaded[0] != "other" {
		t.Errorf("keep_alive 0: %d %s, unloaded %v", resp.StatusCode, out, fs.unloaded)
	}
	if resp, out = ts.do(t, "POST", "/api/chat", `{"model":"other","keep_alive":"soon"}`); resp.StatusCode != 400 || !strings.Contains(out, "keep_alive") {
		t.Errorf("a bad keep_alive: %d %s", resp.StatusCode, out)
	}
}

func TestParseKeepAlive(t *testing.T) {
	for in, want := range map[string]time.Duration{``: KeepAliveDefault, `null`: KeepAliveDefault, `0`: 0, `"0"`: 0, `"0s"`: 0,
		`300`: 5 * time.Minute, `"300"`: 5 * time.Minute, `"5m"`: 5 * time.Minute, `-1`: KeepAliveForever, `"-1"`: KeepAliveForever, `"-1m"`: KeepAliveForever, `"1h30m"`: 90 * time.Minute} {
		if got, err := parseKeepAlive(json.RawMessage(in)); err != nil || got != want {
			t.Errorf("keep_alive %s: %v %v, want %v", in, got, err, want)
		}
	}
}

// fakeFirst is a FirstModel recording what the API asks of it.
type fakeFirst struct {
	mu     sync.Mutex
	loaded bool
	keeps  []time.Duration
}

func (f *fakeFirst) KeepAlive(d time.Duration) {
	f.mu.Lock()
	f.keeps = append(f.keeps, d)
	f.mu.Unlock()
}

func (f *fakeFirst) Unload() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	was := f.loaded
	f.loaded = false
	return was
}

func (f *fakeFirst) Expires() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), f.loaded
}

// TestFirstModelKeepAlive: with Config.First, the model serve started
// with takes keep_alive as the others do: a request's duration reaches
// it (none leaves it), Ollama's unload request (keep_alive 0, nothing to
// answer) unloads it instead of the 400 of a model kept for ever, /api/ps
// shows its expiry and leaves it out while it is unloaded, and a bad
// keep_alive is a 400.
func TestFirstModelKeepAlive(t *testing.T) {
	ff := &fakeFirst{loaded: true}
	ts := newTestServer(t, nil, func(c *Config, _ *appliance.Config) { c.First = ff })
	if resp, out := ts.do(t, "POST", "/api/generate", `{"model":"tiny","prompt":"hi","stream":false,"keep_alive":"10m"}`); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	if resp, out := ts.do(t, "POST", "/api/chat", `{"model":"tiny","stream":false,"messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	if _, out := ts.do(t, "GET", "/api/ps", ""); !strings.Contains(out, `"name":"tiny:latest"`) || !strings.Contains(out, `"expires_at":"2030-01-02T03:04:05Z"`) {
		t.Errorf("/api/ps while loaded: %s", out)
	}
	resp, out := ts.do(t, "POST", "/api/chat", `{"model":"tiny","messages":[],"keep_alive":0}`)
	if resp.StatusCode != 200 || !strings.Contains(out, `"done_reason":"unload"`) || ff.loaded {
		t.Errorf("unload request: %d %s, loaded %v", resp.StatusCode, out, ff.loaded)
	}
	if _, out := ts.do(t, "GET", "/api/ps", ""); strings.Contains(out, "tiny") {
		t.Errorf("/api/ps lists the unloaded model: %s", out)
	}
	if resp, out := ts.do(t, "POST", "/api/generate", `{"model":"tiny","prompt":"hi","keep_alive":"soon"}`); resp.StatusCode != 400 || !strings.Contains(out, "keep_alive") {
		t.Errorf("a bad keep_alive: %d %s", resp.StatusCode, out)
	}
	ff.mu.Lock()
	defer ff.mu.Unlock()
	if len(ff.keeps) != 2 || ff.keeps[0] != 10*time.Minute || ff.keeps[1] != 0 {
		t.Errorf("keep_alive heard: %v; want 10m (the request without one sets nothing), then 0", ff.keeps)
	}
}
