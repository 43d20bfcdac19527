package daemon

import (
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

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/daemon/daemontest"
	"github.com/geisten/geist/cmd/internal/httpapi"
	"github.com/geisten/geist/cmd/internal/models"
	"github.com/geisten/geist/engine/zoo"
)

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
	c, err := ParseConfig(&cli.Env{Stdout: os.Stdout, Stderr: os.Stderr}, []string{"-m", filepath.Join(store, "a.gguf"), "--models-dir", store, "--ctx", "256", "--data-dir", ""})
	if err != nil {
		t.Fatal(err)
	}
	logs := &daemontest.SyncBuffer{}
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
	_, releaseC, err := p.Route(ctx, "c", httpapi.KeepAliveDefault)
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
	hc, releaseC, err := p.Route(ctx, "c", httpapi.KeepAliveDefault)
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
	c, err := ParseConfig(&cli.Env{Stdout: os.Stdout, Stderr: os.Stderr}, []string{"-m", filepath.Join(store, "a.gguf"), "--models-dir", store, "--ctx", "256", "--data-dir", ""})
	if err != nil {
		t.Fatal(err)
	}
	logs := &daemontest.SyncBuffer{}
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
	c, err := ParseConfig(&cli.Env{Stdout: os.Stdout, Stderr: os.Stderr}, []string{"-m", filepath.Join(store, "a.gguf"), "--models-dir", store, "--ctx", "256", "--data-dir", ""})
	if err != nil {
		t.Fatal(err)
	}
	p := newModelPool(&c, models.New(store), slog.New(slog.NewTextHandler(&daemontest.SyncBuffer{}, nil)))
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
	c, err := ParseConfig(&cli.Env{Stdout: os.Stdout, Stderr: os.Stderr}, []string{"-m", filepath.Join(store, "a.gguf"), "--models-dir", store, "--ctx", "256", "--data-dir", ""})
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
