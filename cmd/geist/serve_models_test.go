package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/cmd/internal/daemon/daemontest"
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
	if testing.Short() || daemontest.Emulated() {
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
		UnloadFirst, FirstAgain             string
		PsFirstGone, PsFirstBack            [][2]string
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
	// The first model unloads with keep_alive 0 and the next request
	// naming it loads it again, with the same answer.
	if r.UnloadFirst != "unload" || slices.Contains(names(r.PsFirstGone), "stories:latest") || !slices.Contains(names(r.PsFirstBack), "stories:latest") {
		t.Errorf("the first model's keep_alive 0: done_reason %q, /api/ps after %v, after the next request %v", r.UnloadFirst, r.PsFirstGone, r.PsFirstBack)
	}
	if strings.TrimSpace(r.FirstAgain) != want["stories"] {
		t.Errorf("stories loaded again answered %q; geist run --chat: %q", r.FirstAgain, want["stories"])
	}
	if !strings.Contains(logs.String(), "model loaded again") {
		t.Errorf("no reload in the log:\n%s", logs.String())
	}
}

// TestServeEmbedPool: embedding models in serve's one model pool, with
// the npm ollama client: /api/tags lists the stored embedding models
// (family "bert", capability "embedding"), an embed call loads one that
// /api/ps lists beside the text model with its size and the keep_alive's
// expiry (10m), keep_alive 0 unloads it, keep_alive -1 keeps another for
// ever.
func TestServeEmbedPool(t *testing.T) {
	if testing.Short() || daemontest.Emulated() {
		t.Skip("runs node and the npm clients: native only")
	}
	dir := npmDir(t)
	store := embedStore(t)
	addr, logs := serveHTTP(t, "-m", zoo.Path(t, "models", serveModel), "--ctx", "256", "--models-dir", store)
	begin := time.Now()
	out := runNode(t, dir, 2*time.Minute, logs, "testdata/http/embedps.mjs", "http://"+addr, "tiny-bert-embed-Q8_0", "tiny-nomic-embed-Q8_0")
	t.Logf("client: %s", out)
	var r struct {
		List                                [][3]string
		PsBefore, PsLoaded, PsAfter, PsKept [][4]string
		Dim                                 int
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("embedps.mjs printed %s: %v", out, err)
	}
	listed := map[string][3]string{}
	for _, m := range r.List {
		listed[m[0]] = m
	}
	for _, name := range zoo.EmbedModels {
		m, ok := listed[name+":latest"]
		if !ok || m[2] != "embedding" || m[1] == "" {
			t.Errorf("/api/tags: %s listed as %v (ok %v), want family and capability embedding", name, m, ok)
		}
	}
	if m := listed["tiny-bert-embed-Q8_0:latest"]; m[1] != "bert" {
		t.Errorf("tiny-bert-embed family %q, want bert", m[1])
	}
	find := func(ps [][4]string, name string) ([4]string, bool) {
		for _, m := range ps {
			if m[0] == name+":latest" {
				return m, true
			}
		}
		return [4]string{}, false
	}
	if len(r.PsBefore) != 1 || r.Dim == 0 {
		t.Errorf("/api/ps before: %v; dim %d", r.PsBefore, r.Dim)
	}
	m, ok := find(r.PsLoaded, "tiny-bert-embed-Q8_0")
	if !ok || len(r.PsLoaded) != 2 || m[2] == "0" || m[3] != "bert" {
		t.Fatalf("/api/ps after an embed call: %v", r.PsLoaded)
	}
	if exp, err := time.Parse(time.RFC3339Nano, m[1]); err != nil || exp.Sub(begin) < 9*time.Minute || exp.Sub(begin) > 11*time.Minute {
		t.Errorf("keep_alive 10m: expires %s (%v after the start)", m[1], exp.Sub(begin))
	}
	if _, ok := find(r.PsAfter, "tiny-bert-embed-Q8_0"); ok || len(r.PsAfter) != 1 {
		t.Errorf("/api/ps after keep_alive 0: %v", r.PsAfter)
	}
	if m, ok := find(r.PsKept, "tiny-nomic-embed-Q8_0"); !ok || !strings.HasPrefix(m[1], "9999-") {
		t.Errorf("/api/ps after keep_alive -1: %v", r.PsKept)
	}
	if !strings.Contains(logs.String(), "embedding model unloaded") {
		t.Errorf("no unload in the log:\n%s", logs.String())
	}
}
