package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/engine/zoo"
)

// TestServeModelSwitch is issue 37's several-models test with the npm
// ollama client: geist serve started with one model answers for every
// model of its store: /api/tags lists them all, a chat naming another is
// answered by that model (exactly the text geist run --chat prints with
// it), /api/ps lists it with its 5-minute expiry (a third, keep_alive -1,
// without one), keep_alive 0 unloads it, the first model still answers,
// and a model not stored is a 404.
func TestServeModelSwitch(t *testing.T) {
	if testing.Short() || emulated() {
		t.Skip("runs node and the npm clients: native only")
	}
	dir := npmDir(t)
	store := t.TempDir()
	for name, file := range map[string]string{"stories": serveModel, "tiny-llama": "tiny-llama-Q4_0.gguf", "tiny-qwen": "tiny-qwen2-Q4_0.gguf"} {
		if err := os.Symlink(zoo.Path(t, "models", file), filepath.Join(store, name+".gguf")); err != nil {
			t.Fatal(err)
		}
	}
	const prompt, n = "Once upon a time", "12"
	want := map[string]string{}
	for _, name := range []string{"stories", "tiny-llama", "tiny-qwen"} {
		code, out, errs := geist(t, "", "run", "-m", filepath.Join(store, name+".gguf"), "--chat", "--temp", "0", "-n", n, "--ctx", "256", prompt)
		if code != 0 {
			t.Fatalf("geist run %s: %d %s", name, code, errs)
		}
		want[name] = strings.TrimSpace(out)
	}
	addr, logs := serveHTTP(t, "-m", filepath.Join(store, "stories.gguf"), "--models-dir", store, "--ctx", "256")
	begin := time.Now()
	out := runNode(t, dir, 3*time.Minute, logs, "testdata/http/models.mjs", "http://"+addr, "stories", "tiny-llama", "tiny-qwen:latest", prompt, n)
	t.Logf("client: %s", out)
	var r struct {
		List                                []string
		PsBefore, PsLoaded, PsBoth, PsAfter [][2]string
		Other, OtherStreamed, First, Third  string
		Unload, Missing                     string
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("models.mjs printed %s: %v", out, err)
	}
	if !slices.Equal(r.List, []string{"stories:latest", "tiny-llama:latest", "tiny-qwen:latest"}) {
		t.Errorf("/api/tags lists %v, want every stored model", r.List)
	}
	for what, got := range map[string][2]string{"tiny-llama": {r.Other, want["tiny-llama"]}, "tiny-llama streamed": {r.OtherStreamed, want["tiny-llama"]},
		"stories": {r.First, want["stories"]}, "tiny-qwen (generate)": {r.Third, want["tiny-qwen"]}} {
		if strings.TrimSpace(got[0]) != got[1] {
			t.Errorf("%s answered %q; geist run --chat with it: %q", what, got[0], got[1])
		}
	}
	names := func(ps [][2]string) []string {
		var out []string
		for _, m := range ps {
			out = append(out, m[0])
		}
		return out
	}
	if !slices.Equal(names(r.PsBefore), []string{"stories:latest"}) || !slices.Equal(names(r.PsLoaded), []string{"stories:latest", "tiny-llama:latest"}) ||
		!slices.Equal(names(r.PsBoth), []string{"stories:latest", "tiny-llama:latest", "tiny-qwen:latest"}) ||
		!slices.Equal(names(r.PsAfter), []string{"stories:latest", "tiny-qwen:latest"}) {
		t.Errorf("/api/ps before %v, loaded %v, both %v, after keep_alive 0 %v", r.PsBefore, r.PsLoaded, r.PsBoth, r.PsAfter)
	}
	if len(r.PsLoaded) == 2 {
		exp, err := time.Parse(time.RFC3339Nano, r.PsLoaded[1][1])
		if d := exp.Sub(begin); err != nil || d < 4*time.Minute || d > 6*time.Minute {
			t.Errorf("tiny-llama expires %s (%v after the start): want in about 5 minutes", r.PsLoaded[1][1], d)
		}
	}
	if len(r.PsBoth) == 3 && !strings.HasPrefix(r.PsBoth[2][1], "9999-") {
		t.Errorf("tiny-qwen with keep_alive -1 expires %s", r.PsBoth[2][1])
	}
	if r.Unload != "unload" || !strings.HasPrefix(r.Missing, "404 ") {
		t.Errorf("keep_alive 0: done_reason %q; a model not stored: %s", r.Unload, r.Missing)
	}
	if !strings.Contains(logs.String(), "model unloaded") {
		t.Errorf("no unload in the log:\n%s", logs.String())
	}
}
