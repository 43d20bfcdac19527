package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/cmd/internal/httpapi"
	"github.com/geisten/geist/cmd/internal/models"
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

// TestModelPool: the pool's bounds, with the zoo's small models. A
// request for a loaded model is answered while another model loads (it
// never waits on a load it does not need); past the count bound the idle
// model least recently used is unloaded for a new one, and with the loaded
// one in use a new one is refused with ErrModelBudget (a 503), as it is
// when the memory available has no room; keep_alive 0 unloads as the last
// request ends.
func TestModelPool(t *testing.T) {
	store := t.TempDir()
	for name, file := range map[string]string{"a": serveModel, "b": "tiny-llama-Q4_0.gguf", "c": "tiny-qwen2-Q4_0.gguf"} {
		if err := os.Symlink(zoo.Path(t, "models", file), filepath.Join(store, name+".gguf")); err != nil {
			t.Fatal(err)
		}
	}
	c, err := parseServe(&env{stdout: os.Stdout, stderr: os.Stderr}, []string{"-m", filepath.Join(store, "a.gguf"), "--models-dir", store, "--ctx", "256", "--data-dir", ""})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	p := newModelPool(&c, models.New(store), slog.New(slog.NewTextHandler(logs, nil)))
	defer p.Close()
	p.maxLoaded = 1
	ctx := t.Context()
	ask := func(h http.Handler, model string) int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("POST", "http://127.0.0.1/api/generate", strings.NewReader(`{"model":"`+model+`","prompt":"hi","stream":false,"options":{"num_predict":2}}`))
		req.RemoteAddr = "127.0.0.1:40000"
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	hb, releaseB, err := p.Route(ctx, "b", httpapi.KeepAliveDefault)
	if err != nil {
		t.Fatal(err)
	}
	if code := ask(hb, "b"); code != 200 {
		t.Fatalf("b answered %d", code)
	}
	// b in use, the count bound reached: c is refused, not queued.
	if _, _, err := p.Route(ctx, "c", httpapi.KeepAliveDefault); !errors.Is(err, httpapi.ErrModelBudget) {
		t.Fatalf("c with b in use: %v", err)
	}
	releaseB()
	// b idle: unloaded for c (the count bound, least recently used).
	hc, releaseC, err := p.Route(ctx, "c", httpapi.KeepAliveDefault)
	if err != nil {
		t.Fatalf("c with b idle: %v", err)
	}
	releaseC()
	if run := p.Running(); len(run) != 1 || run[0].Model.Name != "c" {
		t.Errorf("running after c took b's place: %+v", run)
	}
	// While b loads (held here), c answers: a request never waits on a
	// load it does not need.
	p.maxLoaded = 2
	hold := make(chan struct{})
	testPoolLoad = func(name string) {
		if name == "b" {
			<-hold
		}
	}
	defer func() { testPoolLoad = nil }()
	loaded := make(chan error, 1)
	go func() {
		_, release, err := p.Route(ctx, "b", 0)
		if err == nil {
			release()
		}
		loaded <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		p.mu.Lock()
		_, loading := p.loaded["b"]
		p.mu.Unlock()
		if loading {
			break
		} else if time.Now().After(deadline) {
			t.Fatal("b's load did not start")
		}
	}
	begin := time.Now()
	hc, releaseC, err = p.Route(ctx, "c", httpapi.KeepAliveDefault)
	if err != nil {
		t.Fatal(err)
	}
	if code := ask(hc, "c"); code != 200 || time.Since(begin) > 5*time.Second {
		t.Fatalf("c during b's load: %d after %v", code, time.Since(begin))
	}
	releaseC()
	close(hold)
	if err := <-loaded; err != nil {
		t.Fatalf("b: %v", err)
	}
	// b had keep_alive 0: unloaded as its request ended.
	if run := p.Running(); len(run) != 1 || run[0].Model.Name != "c" {
		t.Errorf("running after b's keep_alive 0: %+v", run)
	}
	// No memory for b: refused naming the sizes, c kept.
	p.memAvailable = func() int64 { return 1 << 20 }
	if _, _, err := p.Route(ctx, "b", httpapi.KeepAliveDefault); !errors.Is(err, httpapi.ErrModelBudget) || !strings.Contains(err.Error(), "MiB are available") {
		t.Fatalf("b without memory: %v", err)
	}
	if run := p.Running(); len(run) != 1 || run[0].Model.Name != "c" {
		t.Errorf("running after b was refused: %+v", run)
	}
	if !strings.Contains(logs.String(), "model unloaded") {
		t.Errorf("log:\n%s", logs.String())
	}
}

// TestServeEmbedPool: embedding models in serve's one model pool, with
// the npm ollama client: /api/tags lists the stored embedding models
// (family "bert", capability "embedding"), an embed call loads one that
// /api/ps lists beside the text model with its size and the keep_alive's
// expiry (10m), keep_alive 0 unloads it, keep_alive -1 keeps another for
// ever.
func TestServeEmbedPool(t *testing.T) {
	if testing.Short() || emulated() {
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

// TestModelPoolKinds: text and embedding models share the pool's memory
// budget: with room for one model, loading the text model evicts the idle
// embedding model and the reverse (least recently used, either kind); with
// the loaded one in use the other is refused (ErrModelBudget); keep_alive
// 0 unloads an embedding model as its request ends; a text model's name
// is refused for embeddings and an embedding model's for generation.
func TestModelPoolKinds(t *testing.T) {
	store := t.TempDir()
	for name, file := range map[string]string{"a": zoo.Path(t, "models", serveModel), "b": zoo.Path(t, "models", "tiny-llama-Q4_0.gguf"),
		"e": zoo.Path(t, "embed", "models", "tiny-bert-embed-Q8_0.gguf")} {
		if err := os.Symlink(file, filepath.Join(store, name+".gguf")); err != nil {
			t.Fatal(err)
		}
	}
	c, err := parseServe(&env{stdout: os.Stdout, stderr: os.Stderr}, []string{"-m", filepath.Join(store, "a.gguf"), "--models-dir", store, "--ctx", "256", "--data-dir", ""})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	p := newModelPool(&c, models.New(store), slog.New(slog.NewTextHandler(logs, nil)))
	defer p.Close()
	need := func(name string) int64 {
		fi, err := os.Stat(filepath.Join(store, name+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size() + fi.Size()/4 + 64<<20
	}
	// Room for one of them: what is loaded takes its size from the total
	// (memAvailable runs under p.mu).
	total := max(need("b"), need("e")) + 1<<10
	p.memAvailable = func() int64 {
		avail := total
		for _, m := range p.loaded {
			avail -= m.size
		}
		return avail
	}
	running := func() []string {
		var out []string
		for _, r := range p.Running() {
			out = append(out, r.Model.Name)
		}
		return out
	}
	ctx := t.Context()
	em, _, release, err := p.acquireEmbed(ctx, "e", httpapi.KeepAliveDefault)
	if err != nil {
		t.Fatal(err)
	}
	if em.Dim() == 0 {
		t.Fatal("e: no dimension")
	}
	// e in use: b is refused, not queued.
	if _, _, err := p.Route(ctx, "b", httpapi.KeepAliveDefault); !errors.Is(err, httpapi.ErrModelBudget) {
		t.Fatalf("b with e in use: %v", err)
	}
	release()
	if got := running(); !slices.Equal(got, []string{"e"}) {
		t.Fatalf("running %v, want e", got)
	}
	if r := p.Running(); r[0].Model.Size == 0 || r[0].Model.Family != "bert" || !slices.Equal(r[0].Model.Capabilities, []string{"embedding"}) || !r[0].ExpiresAt.After(time.Now().Add(4*time.Minute)) {
		t.Errorf("e in /api/ps: %+v", r[0])
	}
	// e idle: evicted for b (memory, the other kind).
	_, releaseB, err := p.Route(ctx, "b", httpapi.KeepAliveDefault)
	if err != nil {
		t.Fatalf("b with e idle: %v", err)
	}
	releaseB()
	if got := running(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("running %v, want b in e's place", got)
	}
	// b idle: evicted for e; keep_alive 0 unloads e after its request.
	_, _, release, err = p.acquireEmbed(ctx, "e", 0)
	if err != nil {
		t.Fatalf("e with b idle: %v", err)
	}
	if got := running(); !slices.Equal(got, []string{"e"}) {
		t.Fatalf("running %v, want e in b's place", got)
	}
	release()
	if got := running(); len(got) != 0 {
		t.Errorf("running after e's keep_alive 0: %v", got)
	}
	// The wrong kind is refused by name, loading nothing.
	if _, _, _, err := p.acquireEmbed(ctx, "b", httpapi.KeepAliveDefault); !errors.Is(err, httpapi.ErrNotEmbeddingModel) {
		t.Errorf("b for embeddings: %v", err)
	}
	if _, _, err := p.Route(ctx, "e", httpapi.KeepAliveDefault); !errors.Is(err, httpapi.ErrNotGenerative) {
		t.Errorf("e for generation: %v", err)
	}
	for _, want := range []string{"embedding model unloaded", "model unloaded"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no %q in the log:\n%s", want, logs.String())
		}
	}
}

// TestModelPoolDrafterBudget: a stored text model's sidecar drafter
// (NAME.draft.gguf) counts in the memory a load needs.
func TestModelPoolDrafterBudget(t *testing.T) {
	store := t.TempDir()
	for name, file := range map[string]string{"a": serveModel, "b": "tiny-llama-Q4_0.gguf", "b.draft": "tiny-llama-F16.gguf"} {
		if err := os.Symlink(zoo.Path(t, "models", file), filepath.Join(store, name+".gguf")); err != nil {
			t.Fatal(err)
		}
	}
	c, err := parseServe(&env{stdout: os.Stdout, stderr: os.Stderr}, []string{"-m", filepath.Join(store, "a.gguf"), "--models-dir", store, "--ctx", "256", "--data-dir", ""})
	if err != nil {
		t.Fatal(err)
	}
	p := newModelPool(&c, models.New(store), slog.New(slog.NewTextHandler(&syncBuffer{}, nil)))
	defer p.Close()
	p.memAvailable = func() int64 { return 1 << 20 }
	size := func(name string) int64 {
		fi, err := os.Stat(filepath.Join(store, name+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	if got, want := draftSize(filepath.Join(store, "b.gguf")), size("b.draft"); got != want {
		t.Fatalf("draftSize %d, want %d", got, want)
	}
	all := size("b") + size("b.draft")
	want := fmt.Sprintf("needs about %d MiB", (all+all/4+64<<20)>>20)
	if _, _, err := p.Route(t.Context(), "b", httpapi.KeepAliveDefault); !errors.Is(err, httpapi.ErrModelBudget) || !strings.Contains(err.Error(), want) {
		t.Fatalf("b with its drafter: %v, want %q", err, want)
	}
}

// TestModelPoolRoomForFirst: the first model's reload takes the memory of
// the idle pooled models it needs (least recently used first), never of
// one in use, and none while the memory suffices.
func TestModelPoolRoomForFirst(t *testing.T) {
	store := t.TempDir()
	for name, file := range map[string]string{"a": serveModel, "b": "tiny-llama-Q4_0.gguf", "c": "tiny-qwen2-Q4_0.gguf"} {
		if err := os.Symlink(zoo.Path(t, "models", file), filepath.Join(store, name+".gguf")); err != nil {
			t.Fatal(err)
		}
	}
	c, err := parseServe(&env{stdout: os.Stdout, stderr: os.Stderr}, []string{"-m", filepath.Join(store, "a.gguf"), "--models-dir", store, "--ctx", "256", "--data-dir", ""})
	if err != nil {
		t.Fatal(err)
	}
	p := newModelPool(&c, models.New(store), slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer p.Close()
	ctx := t.Context()
	for _, n := range []string{"b", "c"} {
		_, release, err := p.Route(ctx, n, httpapi.KeepAliveDefault)
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	names := func() []string {
		var out []string
		for _, r := range p.Running() {
			out = append(out, r.Model.Name)
		}
		return out
	}
	first := filepath.Join(store, "a.gguf")
	if !p.roomForFirst(first) || !slices.Equal(names(), []string{"b", "c"}) {
		t.Errorf("with room: loaded %v", names())
	}
	// c in use, b idle: b goes, c stays; still too little memory.
	_, releaseC, err := p.Route(ctx, "c", httpapi.KeepAliveDefault)
	if err != nil {
		t.Fatal(err)
	}
	p.memAvailable = func() int64 { return 1 << 20 }
	if p.roomForFirst(first) || !slices.Equal(names(), []string{"c"}) {
		t.Errorf("without room: loaded %v, want c (in use) only", names())
	}
	releaseC()
}
