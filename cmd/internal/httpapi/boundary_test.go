package httpapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/engine/appliance"
)

// The browser boundary without a browser (issue 22, item 1): the Host,
// the Origin, preflights, the content type, the pull switch.
func TestBoundary(t *testing.T) {
	store := &countingStore{}
	ts := newTestServer(t, nil, func(c *Config, _ *appliance.Config) {
		c.Hosts = []string{"geist.lan", "*.home.arpa"}
		c.Origins = []string{"http://localhost:*", "chrome-extension://abc"}
		c.Store = store
	})
	h := ts.Handler()
	chat := `{"model":"tiny","stream":false,"messages":[{"role":"user","content":"hi"}]}`
	for _, c := range []struct {
		name, method, path, host, body string
		hdr                            map[string]string
		remote                         string
		status                         int
		want                           string
	}{
		{"rebound name", "GET", "/api/tags", "evil.example:11434", "", nil, "", 403, "--http-host"},
		{"rebound subdomain", "GET", "/api/tags", "localhost.evil.example", "", nil, "", 403, ""},
		{"IP literal", "GET", "/api/tags", "127.0.0.1:11434", "", nil, "", 200, ""},
		{"IPv6 literal", "GET", "/api/tags", "[::1]:11434", "", nil, "", 200, ""},
		{"localhost", "GET", "/api/tags", "localhost:11434", "", nil, "", 200, ""},
		{"added name", "GET", "/api/tags", "GEIST.LAN.:11434", "", nil, "", 200, ""},
		{"added suffix", "GET", "/api/tags", "pi.home.arpa", "", nil, "", 200, ""},
		{"other origin", "POST", "/api/chat", "127.0.0.1:11434", chat, map[string]string{"Origin": "http://127.0.0.2:8000", "Content-Type": "text/plain"}, "", 403, "--http-origins"},
		{"null origin", "POST", "/api/chat", "127.0.0.1:11434", chat, map[string]string{"Origin": "null", "Content-Type": "application/json"}, "", 403, ""},
		{"same origin", "POST", "/api/chat", "127.0.0.1:11434", chat, map[string]string{"Origin": "http://127.0.0.1:11434", "Content-Type": "application/json"}, "", 200, ""},
		{"same origin, text/plain", "POST", "/api/chat", "127.0.0.1:11434", chat, map[string]string{"Origin": "http://127.0.0.1:11434", "Content-Type": "text/plain"}, "", 415, "application/json"},
		{"allowed origin", "POST", "/api/chat", "127.0.0.1:11434", chat, map[string]string{"Origin": "http://localhost:3000", "Content-Type": "application/json"}, "", 200, ""},
		{"allowed origin's pull", "POST", "/api/pull", "127.0.0.1:11434", `{"model":"hf:a/b/c.gguf"}`, map[string]string{"Origin": "http://localhost:3000", "Content-Type": "application/json"}, "", 403, "token"},
		{"allowed origin's feed texts", "GET", "/api/geist/events?text=1", "127.0.0.1:11434", "", map[string]string{"Origin": "chrome-extension://abc"}, "", 403, "token"},
		{"curl -d", "POST", "/api/chat", "127.0.0.1:11434", chat, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "", 200, ""},
		{"no type", "POST", "/api/chat", "127.0.0.1:11434", chat, nil, "", 200, ""},
		{"text/plain from a script", "POST", "/api/chat", "127.0.0.1:11434", chat, map[string]string{"Content-Type": "text/plain"}, "", 415, ""},
		{"form from a page", "POST", "/api/chat", "127.0.0.1:11434", chat, map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Sec-Fetch-Site": "cross-site"}, "", 403, ""},
		{"pull from the LAN", "POST", "/api/pull", "192.168.1.2:11434", `{"model":"hf:a/b/c.gguf"}`, map[string]string{"Content-Type": "application/json"}, "192.168.1.7:5000", 403, "--http-pull on"},
		{"pull from loopback", "POST", "/api/pull", "127.0.0.1:11434", `{"model":"hf:a/b/c.gguf","stream":false}`, map[string]string{"Content-Type": "application/json"}, "", 200, ""},
	} {
		r := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
		r.Host = c.host
		r.RemoteAddr = "127.0.0.1:5000"
		if c.remote != "" {
			r.RemoteAddr = c.remote
		}
		for k, v := range c.hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		if c.remote != "" {
			ts.cfg.Allow = append(ts.cfg.Allow[:0], netip.MustParsePrefix("192.168.1.0/24"))
		}
		h.ServeHTTP(w, r)
		ts.cfg.Allow = nil
		if w.Code != c.status || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("%s: %d %s, want %d %q", c.name, w.Code, strings.TrimSpace(w.Body.String()), c.status, c.want)
		}
		if c.name == "allowed origin" && w.Header().Get("Access-Control-Allow-Origin") != "http://localhost:3000" {
			t.Errorf("allowed origin: Access-Control-Allow-Origin %q", w.Header().Get("Access-Control-Allow-Origin"))
		}
	}
	if n := store.pulls.Load(); n != 1 {
		t.Errorf("%d pulls reached the store, want 1 (from loopback)", n)
	}
	// Preflights: allowed origins get CORS answers, others 403.
	for _, c := range []struct {
		origin string
		status int
		allow  string
	}{{"http://localhost:5173", 204, "http://localhost:5173"}, {"http://evil.example", 403, ""}} {
		r := httptest.NewRequest("OPTIONS", "/api/chat", nil)
		r.Host = "127.0.0.1:11434"
		r.RemoteAddr = "127.0.0.1:5000"
		r.Header.Set("Origin", c.origin)
		r.Header.Set("Access-Control-Request-Method", "POST")
		r.Header.Set("Access-Control-Request-Headers", "content-type,authorization")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.status || w.Header().Get("Access-Control-Allow-Origin") != c.allow ||
			c.allow != "" && !strings.Contains(w.Header().Get("Access-Control-Allow-Headers"), "Authorization") {
			t.Errorf("preflight from %s: %d %v", c.origin, w.Code, w.Header())
		}
	}
	// Pulls switched off.
	ts.cfg.Pull = PullOff
	r := httptest.NewRequest("POST", "/api/pull", strings.NewReader(`{"model":"hf:a/b/c.gguf"}`))
	r.Host, r.RemoteAddr = "127.0.0.1", "127.0.0.1:1"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 403 || !strings.Contains(w.Body.String(), "--http-pull") {
		t.Errorf("pull switched off: %d %s", w.Code, w.Body.String())
	}
}

// HTTP slots (issue 22, item 6): slow bodies and slow pulls hold no slot
// of the operations routes or the chat; a pull past MaxPulls gets 503.
func TestSlotsAfterBody(t *testing.T) {
	block := make(chan struct{})
	store := &blockingStore{release: block, started: make(chan struct{}, 8)}
	ts := newTestServer(t, nil, func(c *Config, _ *appliance.Config) {
		c.MaxConns = 4
		c.Store = store
		c.BodyTimeout = 3 * time.Second
	})
	defer close(block)
	addr := strings.TrimPrefix(ts.url, "http://")
	// 2·MaxConns clients that announce a body and send one byte of it.
	for range 2 * 4 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	}
	// Two pulls from a server that never ends.
	for range 2 {
		go func() {
			resp, err := http.Post(ts.url+"/api/pull", "application/json", strings.NewReader(`{"model":"hf:a/b/c.gguf"}`))
			if err == nil {
				resp.Body.Close()
			}
		}()
		<-store.started
	}
	time.Sleep(100 * time.Millisecond)
	get := func(path string) int {
		resp, err := http.Get(ts.url + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, p := range []string{"/healthz", "/metrics", "/api/tags"} {
		if code := get(p); code != 200 {
			t.Errorf("GET %s with 8 slow bodies and 2 pulls: %d", p, code)
		}
	}
	resp, err := http.Post(ts.url+"/api/chat", "application/json", strings.NewReader(`{"model":"tiny","stream":false,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("chat with 8 slow bodies and 2 pulls: %d", resp.StatusCode)
	}
	resp, err = http.Post(ts.url+"/api/pull", "application/json", strings.NewReader(`{"model":"hf:a/b/d.gguf"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Errorf("a third pull: %d, want 503", resp.StatusCode)
	}
}

type blockingStore struct {
	release chan struct{}
	started chan struct{}
}

func (b *blockingStore) Get(string) (Model, bool, error) { return Model{}, false, nil }
func (b *blockingStore) Pull(ctx context.Context, src string, progress func(PullProgress)) error {
	b.started <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return ctx.Err()
}
