package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/cmd/internal/daemon"
	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/zoo"
)

// runStats runs geist run with --stats and returns its statistics.
func runStats(t *testing.T, args ...string) engine.Stats {
	t.Helper()
	code, _, errs := geist(t, "", append([]string{"run", "--stats", "--temp", "0", "-n", "2"}, args...)...)
	var st engine.Stats
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	if code != 0 || json.Unmarshal([]byte(lines[len(lines)-1]), &st) != nil || len(lines) != 1 {
		t.Fatalf("run %v: exit %d, stderr %q", args, code, errs)
	}
	return st
}

// Beside a running serve, run uses the daemon's prompt cache through the
// control socket: it restores the system prompt serve stored, and a
// prefix it stored is found by a second run and by serve. Without the
// daemon's cache sharing (an older serve, or no socket) it goes on
// without a cache, quietly and at once.
func TestRunBesideServeSharesCache(t *testing.T) {
	if testing.Short() {
		t.Skip("no arm64 code: run natively (2.4 s)")
	}
	model := zoo.Path(t, "models", serveModel)
	dir := t.TempDir()
	stop, logs := runServe(t, "-m", model, "--data-dir", dir)
	addr := httpAddr(t, logs)
	sys := strings.Repeat("Once upon a time there was a little girl named Lily who loved to play in the park with her dog. ", 24)
	sys = strings.TrimSpace(sys)
	chat := func(system string) int {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"model": daemon.ModelName(model), "stream": false, "options": map[string]any{"num_predict": 2, "temperature": 0},
			"messages": []map[string]string{{"role": "system", "content": system}, {"role": "user", "content": "hi"}}})
		resp, err := http.Post("http://"+addr+"/api/chat", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			PromptEvalCount int `json:"prompt_eval_count"`
		}
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&out) != nil {
			t.Fatalf("/api/chat: %s", resp.Status)
		}
		return out.PromptEvalCount
	}
	chat(sys)
	// serve stores the system prompt's prefix in the background.
	var st engine.Stats
	waitFor(t, 10*time.Second, "serve's snapshot", func() bool {
		st = runStats(t, "-m", model, "--data-dir", dir, "--chat", "--system", sys, "hi")
		return st.RestoredTokens > 0
	})
	t.Logf("run beside serve: %d of %d prompt tokens restored from serve's cache, ttft %.1f ms", st.RestoredTokens, st.PromptTokens, st.TTFTms)
	if st.PromptTokens < 600 || st.RestoredTokens < st.PromptTokens-50 {
		t.Errorf("restored %d of %d prompt tokens", st.RestoredTokens, st.PromptTokens)
	}
	sys2 := strings.TrimSpace(strings.Repeat("The dog ran to the big tree and saw a bird that sang a happy song. ", 24))
	if st := runStats(t, "-m", model, "--data-dir", dir, "--chat", "--system", sys2, "hi"); st.RestoredTokens != 0 {
		t.Errorf("a new system prompt restored %d tokens", st.RestoredTokens)
	}
	// The run's snapshot went to the daemon before the run ended; the
	// daemon stores it in the background.
	waitFor(t, 10*time.Second, "a second run restoring the prefix the first stored through serve", func() bool {
		st = runStats(t, "-m", model, "--data-dir", dir, "--chat", "--system", sys2, "hi")
		return st.RestoredTokens > 0
	})
	if n := chat(sys2); n >= st.PromptTokens-st.RestoredTokens+10 {
		t.Errorf("serve evaluated %d prompt tokens of a prefix run stored (want about %d)", n, st.PromptTokens-st.RestoredTokens)
	}
	// geist chat beside serve restores it too, and says nothing about a
	// missing data directory.
	code, _, errs := geist(t, "hi\n/bye\n", "chat", "-m", model, "--data-dir", dir, "--system", sys, "-n", "2", "--temp", "0", "--verbose")
	if m := regexp.MustCompile(`(\d+) of them restored`).FindStringSubmatch(errs); code != 0 || m == nil || m[1] == "0" || strings.Contains(errs, "WARN") {
		t.Errorf("chat beside serve: exit %d, %s", code, errs)
	}
	// Another model file: lookups miss, the put is refused and the run
	// says nothing on stderr (runStats checks it).
	other := zoo.Path(t, "models", "stories260K-Q8_0.gguf")
	if st := runStats(t, "-m", other, "--data-dir", dir, "--chat", "--system", sys, "hi"); st.RestoredTokens != 0 {
		t.Errorf("another model restored %d tokens", st.RestoredTokens)
	}
	if code := stop(); code != 0 {
		t.Fatalf("serve: exit %d\n%s", code, logs.String())
	}

	// A serve whose socket does not share its cache (an older version),
	// and one with no socket at all: no cache, no wait.
	old := t.TempDir()
	release, err := daemon.LockDataDir(old)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	t0 := time.Now()
	runStats(t, "-m", model, "--data-dir", old, "--cache-size", "0", "--chat", "--system", sys, "hi")
	ref := time.Since(t0) // the same run without a cache
	for _, withSocket := range []bool{true, false} {
		if withSocket {
			ln, err := net.Listen("unix", filepath.Join(old, daemon.SocketName))
			if err != nil {
				t.Fatal(err)
			}
			srv := &http.Server{Handler: http.NewServeMux()} // 404 for everything
			go srv.Serve(ln)
			defer srv.Close()
		}
		t0 := time.Now()
		st := runStats(t, "-m", model, "--data-dir", old, "--chat", "--system", sys, "hi")
		if el := time.Since(t0); st.RestoredTokens != 0 || el > 2*ref+time.Second {
			t.Errorf("socket %v: restored %d, took %v (%v without a cache)", withSocket, st.RestoredTokens, el, ref)
		}
	}
}
