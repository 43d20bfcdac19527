package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/cmd/internal/daemon/daemontest"
	"github.com/geisten/geist/engine/zoo"
)

// The official clients' npm packages, by exact version. They are
// installed (npm install --no-save, no lock file) into GEIST_NPM_DIR,
// default the user's cache directory's geist-npm, never into the
// repository; .ci/run installs node and npm.
var npmClients = []string{"ollama@0.6.4", "openai@6.30.1"}

// npmDir returns a directory whose node_modules holds npmClients and
// extra, installing them when missing (all at once: an install without a
// package.json drops what it was not given); it skips the test when node
// or npm is missing or the install fails.
func npmDir(t *testing.T, extra ...string) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (apt-get install nodejs npm): the official Ollama and OpenAI clients cannot run", tool)
		}
	}
	dir := os.Getenv("GEIST_NPM_DIR")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		dir = filepath.Join(cache, "geist-npm")
	}
	pkgs := append(slices.Clip(npmClients), extra...)
	installed := true
	for _, p := range pkgs {
		at := strings.LastIndex(p, "@")
		name, version := p[:at], p[at+1:]
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", name, "package.json"))
		var pkg struct{ Version string }
		if err != nil || json.Unmarshal(b, &pkg) != nil || pkg.Version != version {
			installed = false
		}
	}
	if !installed {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		args := append([]string{"install", "--no-save", "--no-package-lock", "--no-audit", "--no-fund", "--prefix", dir}, pkgs...)
		if out, err := exec.CommandContext(ctx, "npm", args...).CombinedOutput(); err != nil {
			t.Skipf("npm install %v into %s failed (no registry?): %v\n%s", pkgs, dir, err, out)
		}
	}
	return dir
}

// serveHTTP starts geist serve with args on a free loopback port and
// returns its address and log.
func serveHTTP(t *testing.T, args ...string) (string, *daemontest.SyncBuffer) {
	t.Helper()
	_, logs := runServe(t, append(args, "--http", "127.0.0.1:0", "--data-dir", filepath.Join(t.TempDir(), "state"))...)
	return httpAddr(t, logs), logs
}

// httpAddr waits for serve's "HTTP API listening" line in logs and
// returns its address.
func httpAddr(t *testing.T, logs *daemontest.SyncBuffer) string {
	t.Helper()
	re := regexp.MustCompile(`HTTP API listening.*? addr=(\S+)`)
	var addr string
	waitFor(t, 30*time.Second, "the HTTP listener", func() bool {
		if m := re.FindStringSubmatch(logs.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	return addr
}

// runNode runs a node script with the npm clients of dir and returns what
// it printed, failing the test (with the serve log) if it fails.
func runNode(t *testing.T, dir string, timeout time.Duration, logs *daemontest.SyncBuffer, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("%s: %v\n%s\n%s\nserve log:\n%s", args[0], err, out, stderr, logs.String())
	}
	return out
}

// TestServeHTTPClients: geist serve --http with the zoo's model, driven by
// the official Ollama JavaScript client and the official OpenAI client:
// list, show, ps, version, chat and generate streamed and not, OpenAI's
// chat streamed (with usage) and not and its completions. At temperature
// 0 every chat answer is the text geist run --chat prints for the prompt,
// and every completion the text geist run prints.
func TestServeHTTPClients(t *testing.T) {
	if testing.Short() || daemontest.Emulated() {
		t.Skip("runs node and the npm clients: native only")
	}
	dir := npmDir(t)
	model := zoo.Path(t, "models", serveModel)
	const prompt, n = "Once upon a time", "24"
	code, wantChat, errs := geist(t, "", "run", "-m", model, "--chat", "--temp", "0", "-n", n, "--ctx", "256", prompt)
	if code != 0 {
		t.Fatalf("geist run --chat: %d %s", code, errs)
	}
	code, wantRaw, errs := geist(t, "", "run", "-m", model, "--temp", "0", "-n", n, "--ctx", "256", prompt)
	if code != 0 {
		t.Fatalf("geist run: %d %s", code, errs)
	}
	addr, logs := serveHTTP(t, "-m", model, "--ctx", "256", "--temp", "0.8")
	name := strings.TrimSuffix(filepath.Base(model), ".gguf")
	out := runNode(t, dir, 2*time.Minute, logs, "testdata/http/clients.mjs", "http://"+addr, name, prompt, n)
	var r struct {
		Version                                        string
		List, OpenaiModels                             []string
		PS                                             [][]any
		Show                                           map[string]any
		Chat, ChatStream, Generate, GenerateStream     string
		OpenaiChat, OpenaiChatStream, OpenaiCompletion string
		ChatFinal                                      map[string]any
		OpenaiUsage, OpenaiStreamUsage                 map[string]any
		WrongModel                                     string
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("clients.mjs printed %s: %v", out, err)
	}
	t.Logf("clients: %s", out)
	tagged := name + ":latest"
	if r.Version == "" || !slices.Equal(r.List, []string{tagged}) || !slices.Equal(r.OpenaiModels, []string{tagged}) ||
		len(r.PS) != 1 || r.PS[0][0] != tagged || r.PS[0][1] != float64(256) {
		t.Errorf("version %q, list %v, OpenAI models %v, ps %v", r.Version, r.List, r.OpenaiModels, r.PS)
	}
	if caps, _ := r.Show["capabilities"].([]any); len(caps) == 0 || caps[0] != "completion" || r.Show["family"] != "llama" || r.Show["template"] != true {
		t.Errorf("show %v", r.Show)
	}
	want := strings.TrimSpace(wantChat)
	for what, got := range map[string]string{"ollama chat": r.Chat, "ollama chat streamed": r.ChatStream,
		"OpenAI chat": r.OpenaiChat, "OpenAI chat streamed": r.OpenaiChatStream} {
		if strings.TrimSpace(got) != want {
			t.Errorf("%s: %q; geist run --chat --temp 0 -n %s: %q", what, got, n, want)
		}
	}
	// /api/generate renders the prompt as a one-turn chat, as Ollama does.
	for what, got := range map[string]string{"ollama generate": r.Generate, "ollama generate streamed": r.GenerateStream} {
		if strings.TrimSpace(got) != want {
			t.Errorf("%s: %q; geist run --chat: %q", what, got, want)
		}
	}
	if strings.TrimSpace(r.OpenaiCompletion) != strings.TrimSpace(strings.TrimPrefix(wantRaw, prompt)) {
		t.Errorf("OpenAI completion %q; geist run (raw): %q", r.OpenaiCompletion, wantRaw)
	}
	if r.ChatFinal["done_reason"] != "length" || r.ChatFinal["eval_count"] != float64(24) || r.ChatFinal["eval_duration"] != true {
		t.Errorf("final chat object %v", r.ChatFinal)
	}
	if r.OpenaiUsage["completion_tokens"] != float64(24) || r.OpenaiStreamUsage["completion_tokens"] != float64(24) {
		t.Errorf("OpenAI usage %v, streamed %v", r.OpenaiUsage, r.OpenaiStreamUsage)
	}
	if !strings.HasPrefix(r.WrongModel, "404 ") {
		t.Errorf("a chat naming another model: %s", r.WrongModel)
	}
}
