package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
)

// The page in a real browser: Debian's chromium, headless, driven with
// chromedp. Natively only (-short skips it, as under qemu), and skipped,
// saying so, where chromium is not installed (.ci/run installs it).
// GEIST_SCREENSHOTS=DIR saves the desktop and phone screenshots there.

// chromium returns the browser's path, skipping the test without one.
func statusChromium(t *testing.T) string {
	if testing.Short() {
		t.Skip("browser test: native runs only (-short)")
	}
	for _, p := range []string{os.Getenv("GEIST_CHROMIUM"), "chromium", "chromium-browser", "/usr/bin/chromium"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	t.Skip("chromium not found (Debian: apt-get install chromium; or set GEIST_CHROMIUM): the page cannot be shown in a browser")
	return ""
}

// browser starts a headless chromium for the test, with the flags a
// machine with a closed network needs, and a fresh profile.
func statusBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	path := statusChromium(t)
	actx, cancel := chromedp.NewExecAllocator(context.Background(), append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}, extra...)...,
	)
	t.Cleanup(cancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	if err := chromedp.Do(bctx); err != nil { // starts the browser
		t.Fatalf("starting chromium: %v", err)
	}
	return bctx
}

func TestStatusPageInBrowser(t *testing.T) {
	bctx := statusBrowser(t)
	eng := &appliancetest.Engine{Words: 14, Delay: 40 * time.Millisecond, Varied: true}
	core := statusCore(t, eng, true)
	// Some history for the charts and the table, from other front ends.
	for i, src := range []appliance.Source{appliance.SourceWyoming, appliance.SourceMQTT, appliance.SourceButton, appliance.SourceWyoming, appliance.SourceMQTT} {
		tk, err := core.Submit(context.Background(), appliance.Request{Source: src, Text: fmt.Sprintf("question %d", i)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		<-tk.Done()
	}

	// The HTTP front end (its Ollama /api/chat and /api/tags, its guard)
	// with the page mounted, as geist serve mounts it.
	web, err := New(Config{Core: core, Model: Model{Name: "stories260K-Q4_0", Family: "llama", ContextLength: 512}, Version: "v-test", Logger: statusLogger()})
	if err != nil {
		t.Fatal(err)
	}
	NewStatusPage(StatusConfig{ShowText: true, Tick: 100 * time.Millisecond, Plain: http.NotFoundHandler()}, core).Register(web)
	mux := web.Handler()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	base, _ := url.Parse(srv.URL)

	// A geist started with an access token, seen from the LAN (the
	// guard's peer address is rewritten to 192.168.1.7): the page loads
	// without the token and asks for it; the feed and the chat want it.
	t.Run("token", func(t *testing.T) {
		guarded, err := New(Config{Core: core, Model: Model{Name: "stories260K-Q4_0"}, Version: "v-test", Logger: statusLogger(),
			Token: "s3cret", Allow: []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")}})
		if err != nil {
			t.Fatal(err)
		}
		NewStatusPage(StatusConfig{Tick: 100 * time.Millisecond}, core).Register(guarded)
		h := guarded.Handler()
		gsrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.RemoteAddr = "192.168.1.7:40000"
			h.ServeHTTP(w, r)
		}))
		defer gsrv.Close()
		tab, cancel := chromedp.NewContext(bctx)
		defer cancel()
		ctx, tcancel := context.WithTimeout(tab, 30*time.Second)
		defer tcancel()
		poll := func(what, expr string) {
			t.Helper()
			if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(10*time.Millisecond))); err != nil {
				t.Fatalf("waiting for %s: %v", what, err)
			}
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(gsrv.URL+"/")); err != nil {
			t.Fatal(err)
		}
		poll("the token form", `!document.getElementById("token-form").hidden && document.getElementById("state").textContent === "offline"`)
		if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#token"), "s3cret"), chromedp.Click(chromedp.CSS("#token-form button"))); err != nil {
			t.Fatal(err)
		}
		poll("the feed with the token", `document.getElementById("token-form").hidden && document.getElementById("state").textContent === "idle"`)
		if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS("#prompt"), "with a token"), chromedp.Click(chromedp.CSS("#send"))); err != nil {
			t.Fatal(err)
		}
		poll("an answer with the token", `!document.querySelector(".msg.assistant[data-streaming]") && !!document.querySelector(".msg.assistant") && document.querySelector(".msg.assistant").textContent.includes("w13.")`)
	})

	shots := os.Getenv("GEIST_SCREENSHOTS")
	for _, vp := range []struct {
		name          string
		width, height int64
		mobile        bool
	}{
		{"desktop", 1280, 900, false},
		{"phone", 390, 844, true},
	} {
		t.Run(vp.name, func(t *testing.T) {
			tab, cancel := chromedp.NewContext(bctx)
			defer cancel()
			var mu sync.Mutex
			var requests []string
			if err := chromedp.Listen(tab, func(ev any) {
				if e, ok := ev.(*network.EventRequestWillBeSent); ok {
					mu.Lock()
					requests = append(requests, e.Request.Method+" "+e.Request.URL)
					mu.Unlock()
				}
			}); err != nil {
				t.Fatal(err)
			}
			opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
			if vp.mobile {
				opts = []chromedp.EmulateViewportOption{chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait}
			}
			ctx, tcancel := context.WithTimeout(tab, 60*time.Second)
			defer tcancel()
			do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
				t.Helper()
				if err := chromedp.Do(ctx, steps...); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			eval := func(expr string) string {
				t.Helper()
				v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
				if err != nil {
					t.Fatalf("%s: %v", expr, err)
				}
				return v
			}
			poll := func(what, expr string) {
				t.Helper()
				if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(10*time.Millisecond))); err != nil {
					t.Fatalf("waiting for %s (%s): %v", what, expr, err)
				}
			}
			do("viewport", chromedp.EmulateViewport(vp.width, vp.height, opts...))
			do("load", chromedp.Navigate(srv.URL+"/"))
			poll("the live feed", `document.getElementById("state").textContent === "idle" && document.querySelectorAll("#requests tr").length >= 5`)
			before := eval(`document.querySelector("#speed svg").dataset.points + "/" + document.querySelector("#accept svg").dataset.points + "/" + document.querySelector("#cache svg").dataset.points`)
			rows := eval(`String(document.querySelectorAll("#requests tr").length)`)

			do("ask", chromedp.SendKeys(chromedp.CSS("#prompt"), "Tell me a story about the "+vp.name), chromedp.Click(chromedp.CSS("#send")))
			// The answer appears piece by piece: part of it is on the page
			// while the rest is still being written, and the queue card
			// shows the running request with its live speed.
			poll("a partly streamed answer", `(() => { const m = document.querySelector(".msg.assistant[data-streaming]");
				return !!m && +m.dataset.pieces >= 3 && !m.textContent.includes("w13."); })()`)
			partial := eval(`document.querySelector(".msg.assistant[data-streaming]").textContent`)
			poll("the running request in the queue card", `document.getElementById("jobs").textContent.includes("running")`)
			poll("the whole answer", `!document.querySelector(".msg.assistant[data-streaming]") && document.querySelector(".msg.assistant").textContent.includes("w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13.")`)
			// The charts take the new answer's point, the table its row.
			poll("the charts and the table to update", fmt.Sprintf(`(document.querySelector("#speed svg").dataset.points + "/" + document.querySelector("#accept svg").dataset.points + "/" + document.querySelector("#cache svg").dataset.points) !== %q && document.querySelectorAll("#requests tr").length > %s`, before, rows))
			after := eval(`document.querySelector("#speed svg").dataset.points + "/" + document.querySelector("#accept svg").dataset.points + "/" + document.querySelector("#cache svg").dataset.points`)
			first := eval(`document.querySelector("#requests tr").textContent`)
			if !strings.Contains(first, "http") || !strings.Contains(first, "answered") {
				t.Errorf("newest row %q: want the chat's request (http, answered)", first)
			}
			// Texts are shown only when asked for.
			if strings.Contains(eval(`document.getElementById("requests").textContent`), "question 1") {
				t.Error("the table shows texts before the toggle")
			}
			do("show texts", chromedp.Click(chromedp.CSS("#show-text")))
			poll("texts in the table", `document.getElementById("requests").textContent.includes("» question 1")`)
			overflow := eval(`String(document.documentElement.scrollWidth - window.innerWidth)`)
			if overflow != "0" {
				t.Errorf("the page is %s px wider than the %s viewport", overflow, vp.name)
			}
			t.Logf("%s: streamed %q… then the whole answer; chart points (speed/acceptance/cache) %s -> %s; newest row %q", vp.name, partial, before, after, first)
			if shots != "" {
				do("hide texts", chromedp.Click(chromedp.CSS("#show-text")))
				poll("texts hidden", `!document.getElementById("requests").textContent.includes("» question 1")`)
				png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
				if err != nil {
					t.Fatal(err)
				}
				p := filepath.Join(shots, "i13-page-"+vp.name+".png")
				if err := os.WriteFile(p, png, 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("screenshot %s (%d bytes)", p, len(png))
			}
			// Every request the page made went to the box itself.
			mu.Lock()
			defer mu.Unlock()
			for _, r := range requests {
				_, raw, _ := strings.Cut(r, " ")
				u, err := url.Parse(raw)
				if err != nil || (u.Host != base.Host && u.Scheme != "data") {
					t.Errorf("request to another host: %s", r)
				}
			}
			slices.Sort(requests)
			t.Logf("%s: the page's requests: %s", vp.name, strings.Join(slices.Compact(requests), ", "))
		})
	}
}
