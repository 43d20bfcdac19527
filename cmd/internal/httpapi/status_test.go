package httpapi

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
)

func statusCore(t *testing.T, eng *appliancetest.Engine, text bool) *appliance.Core {
	t.Helper()
	return appliancetest.Start(t, appliance.Config{Engine: eng, Logger: statusLogger(), Model: "stories260K-Q4_0", Version: "v-test",
		RecentText: text, ShutdownGrace: time.Second}).Core
}

// statusSSE is one event of the feed.
type statusSSE struct {
	Event string
	Data  string
}

// statusFeed reads events from the feed into a channel.
func statusFeed(t *testing.T, body io.Reader) <-chan statusSSE {
	ch := make(chan statusSSE, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev statusSSE
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.Event = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				ev.Data = line[len("data: "):]
			case line == "" && ev.Event != "":
				ch <- ev
				ev = statusSSE{}
			}
		}
	}()
	return ch
}

func statusNext(t *testing.T, ch <-chan statusSSE, kind string) statusSSE {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("feed ended before a %s event", kind)
			}
			if ev.Event == kind {
				return ev
			}
		case <-timeout:
			t.Fatalf("no %s event", kind)
		}
	}
}

func TestStatusFeed(t *testing.T) {
	for _, allow := range []bool{false, true} {
		eng := &appliancetest.Engine{Words: 6, Delay: 20 * time.Millisecond}
		core := statusCore(t, eng, allow)
		p := NewStatusPage(StatusConfig{ShowText: allow, MaxFeeds: 2, Tick: 50 * time.Millisecond}, core)
		mux := http.NewServeMux()
		p.Register(mux)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)

		tk, _ := core.Submit(context.Background(), appliance.Request{Source: appliance.SourceCLI, Text: "before"}, nil)
		<-tk.Done()
		resp, err := http.Get(srv.URL + "/api/geist/events?text=1")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("content type %q", ct)
		}
		feed := statusFeed(t, resp.Body)
		var st statusState
		json.Unmarshal([]byte(statusNext(t, feed, "state").Data), &st)
		if st.Model != "stories260K-Q4_0" || st.Served != 1 || st.TextOK != allow || st.State != "idle" {
			t.Errorf("first state %+v", st)
		}
		var recent []statusRecord
		json.Unmarshal([]byte(statusNext(t, feed, "recent").Data), &recent)
		if len(recent) != 1 || recent[0].Source != "cli" || recent[0].Generated != 6 || (recent[0].Question == "before") != allow {
			t.Errorf("recent %+v (texts allowed: %v)", recent, allow)
		}

		// A request while the feed is open: states with its progress,
		// then the finished request.
		core.Submit(context.Background(), appliance.Request{Source: appliance.SourceWyoming, Text: "during"}, nil)
		sawRunning := false
		for !sawRunning {
			json.Unmarshal([]byte(statusNext(t, feed, "state").Data), &st)
			sawRunning = len(st.Jobs) == 1 && st.Jobs[0].State == "running" && st.Jobs[0].Source == "wyoming"
		}
		var rec statusRecord
		json.Unmarshal([]byte(statusNext(t, feed, "request").Data), &rec)
		if rec.Source != "wyoming" || rec.Outcome != "answered" || rec.Generated != 6 || rec.TokS != 100 ||
			(rec.Answer == " w0 w1 w2 w3 w4 w5.") != allow {
			t.Errorf("finished request %+v", rec)
		}
		// Feeds are bounded.
		second, _ := http.Get(srv.URL + "/api/geist/events")
		third, _ := http.Get(srv.URL + "/api/geist/events")
		if third.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("a third feed past MaxFeeds 2: %s", third.Status)
		}
		second.Body.Close()
		third.Body.Close()
	}
}

func TestStatusPageHeaders(t *testing.T) {
	plain := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "Ollama is running") })
	p := NewStatusPage(StatusConfig{Plain: plain}, statusCore(t, &appliancetest.Engine{}, false))
	mux := http.NewServeMux()
	p.Register(mux)
	// curl, scripts and Ollama clients keep the liveness text.
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Body.String() != "Ollama is running" {
		t.Errorf("GET / without Accept: text/html: %q", rec.Body.String())
	}
	rec = httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	mux.ServeHTTP(rec, req)
	body := rec.Body.String()
	csp := rec.Header().Get("Content-Security-Policy")
	if rec.Code != 200 || !strings.HasPrefix(body, "<!doctype html>") || !strings.Contains(csp, "default-src 'none'") {
		t.Fatalf("GET /: %d, CSP %q", rec.Code, csp)
	}
	// The policy allows exactly the page's inline script and style.
	for _, tag := range []string{"script", "style"} {
		i := strings.Index(body, "<"+tag+">") + len(tag) + 2
		j := strings.Index(body, "</"+tag+">")
		sum := sha256.Sum256([]byte(body[i:j]))
		if !strings.Contains(csp, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'") {
			t.Errorf("CSP %q lacks the hash of the page's %s", csp, tag)
		}
	}
	// Nothing in the page names another host.
	for _, bad := range []string{"http://", "https://", "//cdn", "@import", "src=\""} {
		if strings.Contains(strings.ReplaceAll(body, "http://www.w3.org/2000/svg", ""), bad) {
			t.Errorf("the page contains %q", bad)
		}
	}
	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/nothing", nil))
	if rec.Code != 404 {
		t.Errorf("GET /nothing: %d", rec.Code)
	}
}

func statusLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}

// With a token, GET / (the page, or the liveness text) passes the token
// check but not the allow-list; the feed needs the token.
func TestStatusPageBehindGuard(t *testing.T) {
	core := statusCore(t, &appliancetest.Engine{}, false)
	web, err := New(Config{Core: core, Model: Model{Name: "tiny"}, Version: "v-test", Logger: statusLogger(),
		Token: "s3cret", Allow: []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")}, Hosts: []string{"example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	NewStatusPage(StatusConfig{}, core).Register(web)
	h := web.Handler()
	for _, c := range []struct {
		method, path, remote, auth string
		status                     int
	}{
		{"GET", "/", "192.168.1.7:1234", "", 200},
		{"HEAD", "/", "192.168.1.7:1234", "", 200},
		{"GET", "/", "10.0.0.1:1234", "", 403},
		{"GET", "/api/geist/events", "192.168.1.7:1234", "", 401},
		{"GET", "/api/geist/events", "192.168.1.7:1234", "Bearer s3cret", 200},
		{"GET", "/api/tags", "192.168.1.7:1234", "", 401},
		{"GET", "/index.html", "192.168.1.7:1234", "", 401},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		r := httptest.NewRequestWithContext(ctx, c.method, c.path, nil)
		r.RemoteAddr = c.remote
		r.Header.Set("Accept", "text/html")
		if c.auth != "" {
			r.Header.Set("Authorization", c.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		cancel()
		if w.Code != c.status {
			t.Errorf("%s %s from %s %q: %d, want %d", c.method, c.path, c.remote, c.auth, w.Code, c.status)
		}
	}
}

// TestStatusPromptProgress: while a long prompt is read, the status
// feed's running job shows how much of it is read.
func TestStatusPromptProgress(t *testing.T) {
	eng := &appliancetest.Engine{Words: 2, Delay: 30 * time.Millisecond}
	core := statusCore(t, eng, false)
	p := NewStatusPage(StatusConfig{MaxFeeds: 2, Tick: 20 * time.Millisecond}, core)
	mux := http.NewServeMux()
	p.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/api/geist/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	feed := statusFeed(t, resp.Body)
	tk, _ := core.Submit(context.Background(), appliance.Request{Source: appliance.SourceHTTP, Text: "PREFILL"}, nil)
	var st statusState
	for {
		json.Unmarshal([]byte(statusNext(t, feed, "state").Data), &st)
		if len(st.Jobs) == 1 && st.Jobs[0].PromptDone > 0 && st.Jobs[0].PromptDone < st.Jobs[0].PromptTotal {
			break
		}
	}
	if j := st.Jobs[0]; j.State != "running" || j.PromptTotal != 1280 || j.Tokens != 0 {
		t.Errorf("job %+v", j)
	}
	<-tk.Done()
}
