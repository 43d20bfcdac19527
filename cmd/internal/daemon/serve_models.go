package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/geisten/geist/cmd/internal/httpapi"
	"github.com/geisten/geist/cmd/internal/models"
	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/embed"
)

// modelPool is the HTTP API's httpapi.ModelSwitch: the stored models
// other than the one serve started with, each loaded on demand into its
// own engine, appliance core and HTTP handler, on the goroutine of the
// request that names it (a request for a loaded model never waits on it),
// unloaded keepAlive after its last request (Ollama's keep_alive: 5
// minutes unless the request says otherwise, -1 never, 0 at once) or when
// the memory budget needs its room. The model serve started with is not
// in the pool: its core is serve's, and its engine (firstModel) unloads
// only by keep_alive. MQTT and Wyoming reach the pool through that core
// (poolRouter: appliance.Models).
//
// The embedding models the embedding endpoints load on demand live here
// too (pooled.emb), with a count bound of their own (maxEmbed) and the
// one memory budget and least-recently-used order: a load evicts the
// idle model of either kind used least recently when the memory needs
// it. A text model's drafter (the sidecar MODEL.draft.gguf) is loaded
// with it and counted in its size.
type modelPool struct {
	c         *Config
	store     *models.Store
	log       *slog.Logger
	keepAlive time.Duration // the default keep_alive
	maxLoaded int           // text models loaded at once besides the first
	maxEmbed  int           // embedding models loaded on demand at once
	// resident are the models loaded for the life of the process besides
	// the first (--embed-model): /api/ps lists them, never expiring.
	resident []httpapi.Model
	// memAvailable reads the memory available for a load (tests replace
	// it); a model is loaded only when its file and a margin fit.
	memAvailable func() int64
	// cache is the prompt cache the text models loaded keep their
	// prompts' KV states in, beside the first model's (its keys name the
	// model); storage reports it in their cores' State. Nil: none.
	cache   engine.PromptCache
	storage *appliance.Storage
	// group is what MQTT's state and the status page read: the first
	// model's core with the loaded models' cores, which the pool adds on
	// load and removes on unload. Nil: none (tests).
	group *appliance.Group

	mu     sync.Mutex
	loaded map[string]*pooled // by stored name
	stop   chan struct{}
	done   chan struct{}
}

// pooled is one loaded model.
type pooled struct {
	name    string
	ready   chan struct{} // closed when the load ended (err says how)
	err     error
	eng     *engine.Engine
	core    *appliance.Core
	cancel  context.CancelFunc
	handler http.Handler
	model   httpapi.Model
	emb     *embed.Model  // an embedding model (no core, no handler)
	embed   bool          // loaded (or loading) as an embedding model
	size    int64         // its files: model and drafter
	refs    int           // requests using it
	keep    time.Duration // its keep_alive (negative: for ever)
	last    time.Time     // when the last request ended (or began)

	loadTime time.Duration // how long the load took
	loadedAt time.Time     // when it ended
}

func newModelPool(c *Config, store *models.Store, log *slog.Logger) *modelPool {
	p := &modelPool{c: c, store: store, log: log.With("component", "models"), keepAlive: 5 * time.Minute, maxLoaded: 3, maxEmbed: maxOnDemand,
		loaded: map[string]*pooled{}, stop: make(chan struct{}), done: make(chan struct{})}
	p.memAvailable = func() int64 {
		avail, err := engine.ReadMemAvailable(engine.MemInfo)
		if err != nil {
			return 1 << 62 // unknown: the count bound only
		}
		return avail
	}
	go p.expire()
	return p
}

// expire unloads the models whose keep_alive ran out, every second.
func (p *modelPool) expire() {
	defer close(p.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		p.unloadExpired(time.Now())
	}
}

func (p *modelPool) unloadExpired(now time.Time) {
	p.mu.Lock()
	var gone []*pooled
	for n, m := range p.loaded {
		if p.expiredLocked(m, now) {
			delete(p.loaded, n)
			gone = append(gone, m)
		}
	}
	p.mu.Unlock()
	for _, m := range gone {
		p.close(m, "keep_alive ended")
	}
}

func (p *modelPool) expiredLocked(m *pooled, now time.Time) bool {
	select {
	case <-m.ready:
	default:
		return false // loading
	}
	return m.err == nil && m.refs == 0 && m.keep >= 0 && !now.Before(m.last.Add(m.keep))
}

// Close unloads every pooled model (the process ends).
func (p *modelPool) Close() {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	all := make([]*pooled, 0, len(p.loaded))
	for _, m := range p.loaded {
		all = append(all, m)
	}
	p.loaded = map[string]*pooled{}
	p.mu.Unlock()
	for _, m := range all {
		<-m.ready
		p.close(m, "serve stopped")
	}
}

func (p *modelPool) close(m *pooled, why string) {
	if m.err == nil && m.emb != nil {
		m.emb.Close()
		if m.keep == 0 {
			why = "keep_alive 0"
		}
		p.log.Info("embedding model unloaded", "model", m.name, "reason", why)
		return
	}
	if m.err != nil || m.core == nil {
		return
	}
	m.cancel()
	<-m.core.Done()
	if p.group != nil {
		p.group.Remove(m.core) // its counts stay in the group's
	}
	m.eng.Close()
	p.log.Info("model unloaded", "model", m.name, "why", why)
}

// resolve turns a client's model name into the stored name and path.
func (p *modelPool) resolve(name string) (string, string, error) {
	n := strings.TrimSuffix(strings.TrimSpace(name), ":latest")
	n, err := models.CheckName(n)
	if err != nil {
		return "", "", fmt.Errorf("model %q: %w", name, httpapi.ErrNotStored)
	}
	sm, err := p.store.Get(n)
	if errors.Is(err, models.ErrNotFound) || err == nil && sm.Path == "" {
		return "", "", fmt.Errorf("model %q: %w", name, httpapi.ErrNotStored)
	}
	if err != nil {
		return "", "", err
	}
	return n, sm.Path, nil
}

// Route implements httpapi.ModelSwitch.
func (p *modelPool) Route(ctx context.Context, name string, keepAlive time.Duration) (http.Handler, func(), error) {
	m, release, err := p.acquire(ctx, name, keepAlive, false)
	if err != nil {
		return nil, nil, err
	}
	return m.handler, release, nil
}

// acquireEmbed returns the stored embedding model name, loading it when
// it is not loaded, and release, to be called when the request is
// answered.
func (p *modelPool) acquireEmbed(ctx context.Context, name string, keepAlive time.Duration) (*embed.Model, time.Duration, func(), error) {
	start := time.Now()
	m, release, err := p.acquire(ctx, name, keepAlive, true)
	if err != nil {
		return nil, 0, nil, err
	}
	var load time.Duration
	if m.loadedAt.After(start) {
		load = m.loadTime
	}
	return m.emb, load, release, nil
}

// acquire finds or loads the stored model name as a text model or an
// embedding model and counts a request using it.
func (p *modelPool) acquire(ctx context.Context, name string, keepAlive time.Duration, embedding bool) (*pooled, func(), error) {
	n, path, err := p.resolve(name)
	if err != nil {
		return nil, nil, err
	}
	p.mu.Lock()
	_, known := p.loaded[n]
	p.mu.Unlock()
	if !known && IsEmbeddingFile(path) != embedding { // a header read, only to load
		if embedding {
			return nil, nil, checkEmbedding(path, n)
		}
		return nil, nil, fmt.Errorf("%w: %q is an embedding model: /api/embed and /v1/embeddings answer with it", httpapi.ErrNotGenerative, n)
	}
	keep := keepAlive
	if keep == httpapi.KeepAliveDefault {
		keep = p.keepAlive
	}
	p.mu.Lock()
	m, ok := p.loaded[n]
	if !ok {
		var evict []*pooled
		if evict, err = p.roomLocked(path, embedding); err != nil {
			p.mu.Unlock()
			return nil, nil, err
		}
		m = &pooled{name: n, ready: make(chan struct{}), keep: keep, last: time.Now(), embed: embedding}
		p.loaded[n] = m
		p.mu.Unlock()
		for _, e := range evict {
			p.close(e, "room for "+n)
		}
		if embedding {
			go p.loadEmbed(m, path)
		} else {
			go p.load(m, path) // the load outlives a client that leaves
		}
		p.mu.Lock()
	} else if m.embed != embedding {
		p.mu.Unlock()
		if embedding {
			return nil, nil, fmt.Errorf("%w: %q is loaded as a text model", httpapi.ErrNotEmbeddingModel, n)
		}
		return nil, nil, fmt.Errorf("%w: %q is loaded as an embedding model", httpapi.ErrNotGenerative, n)
	}
	m.refs++
	if keepAlive != httpapi.KeepAliveDefault || !ok {
		m.keep = keep
	}
	p.mu.Unlock()
	release := func() {
		p.mu.Lock()
		m.refs--
		m.last = time.Now()
		now := m.keep == 0
		p.mu.Unlock()
		if now {
			p.unloadExpired(time.Now())
		}
	}
	select {
	case <-m.ready:
	case <-ctx.Done():
		release()
		return nil, nil, ctx.Err()
	}
	if m.err != nil {
		release()
		p.mu.Lock()
		if p.loaded[n] == m {
			delete(p.loaded, n) // the next request tries again
		}
		p.mu.Unlock()
		return nil, nil, m.err
	}
	return m, release, nil
}

// roomLocked makes room for the model file at path: at most maxLoaded
// models, and its file with a quarter more (the KV cache, buffers) within
// the memory available; it picks the idle models to unload, least
// recently used first, or fails with httpapi.ErrModelBudget when the ones
// in use leave no room.
func (p *modelPool) roomLocked(path string, embedding bool) ([]*pooled, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	if !embedding {
		size += draftSize(path)
	}
	need := size + size/4 + 64<<20
	var idle []*pooled
	count, max := 0, p.maxLoaded // of the kind loading
	if embedding {
		max = p.maxEmbed
	}
	for _, m := range p.loaded {
		if m.embed == embedding {
			count++
		}
		select {
		case <-m.ready:
			if m.refs == 0 {
				idle = append(idle, m)
			}
		default:
		}
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].last.Before(idle[j].last) })
	avail := p.memAvailable()
	var evict []*pooled
	for count >= max || avail < need {
		// Past the count bound the kind's least recently used idle
		// model goes; for memory, either kind's.
		i := slices.IndexFunc(idle, func(e *pooled) bool { return count < max || e.embed == embedding })
		if i < 0 {
			break
		}
		e := idle[i]
		idle = slices.Delete(idle, i, i+1)
		evict = append(evict, e)
		delete(p.loaded, e.name)
		if e.embed == embedding {
			count--
		}
		avail += e.size // its weights' pages and KV come back
	}
	if count >= max || avail < need {
		for _, e := range evict {
			p.loaded[e.name] = e // nothing unloaded after all
		}
		kind := "models"
		if embedding {
			kind = "embedding models"
		}
		return nil, fmt.Errorf("%w: loading %s needs about %d MiB, %d MiB are available and the %d %s loaded besides the first are in use; retry when they are answered",
			httpapi.ErrModelBudget, fi.Name(), need>>20, avail>>20, count, kind)
	}
	return evict, nil
}

// roomForFirst makes room in memory for the first model's reload (its
// file at path, with its drafter): the idle pooled models of either kind
// are unloaded, least recently used first, until it fits or none is left
// idle. The first model is loaded all the same (it is the appliance's
// own); it reports whether it fits.
func (p *modelPool) roomForFirst(path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return true // the load reports it
	}
	size := fi.Size() + draftSize(path)
	need := size + size/4 + 64<<20
	p.mu.Lock()
	var idle []*pooled
	for _, m := range p.loaded {
		select {
		case <-m.ready:
			if m.refs == 0 {
				idle = append(idle, m)
			}
		default:
		}
	}
	sort.Slice(idle, func(i, j int) bool { return idle[i].last.Before(idle[j].last) })
	avail := p.memAvailable()
	var evict []*pooled
	for _, e := range idle {
		if avail >= need {
			break
		}
		evict = append(evict, e)
		delete(p.loaded, e.name)
		avail += e.size
	}
	p.mu.Unlock()
	for _, e := range evict {
		p.close(e, "room for "+ModelName(path))
	}
	return avail >= need
}

// draftSize is the size of the drafter a text model at path loads with
// (its sidecar MODEL.draft.gguf), 0 for none.
func draftSize(path string) int64 {
	if d := sidecarDraft(path); d != "" {
		if fi, err := os.Stat(d); err == nil {
			return fi.Size()
		}
	}
	return 0
}

// sidecarDraft is the drafter beside the model file at path ("": none).
func sidecarDraft(path string) string {
	c := Config{Model: path}
	return c.DraftFile()
}

// loadEmbed loads the embedding model m from path.
func (p *modelPool) loadEmbed(m *pooled, path string) {
	defer close(m.ready)
	if testPoolLoad != nil {
		testPoolLoad(m.name)
	}
	start := time.Now()
	e, err := embed.Open(path, embed.Options{Threads: p.c.Threads})
	if err != nil {
		m.err = err
		return
	}
	m.loadTime, m.loadedAt = time.Since(start), time.Now()
	m.emb = e
	if fi, err := os.Stat(path); err == nil {
		m.size = fi.Size()
	}
	if sm, err := p.store.Get(m.name); err == nil {
		m.model = describedModel(sm)
	}
	m.model.Name, m.model.Size, m.model.ContextLength = m.name, m.size, e.Ctx()
	m.model.Capabilities = []string{"embedding"}
	p.log.Info("embedding model loaded", "model", m.name, "arch", e.Arch(), "dim", e.Dim(), "ctx", e.Ctx(), "ms", m.loadTime.Milliseconds())
}

// load loads m from path: engine, core (running until unloaded) and HTTP
// handler, as serve builds its first model's.
func (p *modelPool) load(m *pooled, path string) {
	defer close(m.ready)
	if testPoolLoad != nil {
		testPoolLoad(m.name)
	}
	start := time.Now()
	c := *p.c
	c.Model, c.DraftModel = path, "" // the first model's drafter is not this one's
	draft := c.DraftFile()
	log := p.log.With("model", m.name)
	opt := engine.Options{Threads: c.Threads, MemInfo: os.Getenv("GEIST_MEMINFO"), KVType: c.KVType, DraftModel: draft,
		RepackBudget: c.Repack, Logger: log.With("component", "engine"), OnLoadProgress: loadLog(log, path)}
	if p.cache != nil {
		// Its prompts' KV states in the prompt cache, as the first
		// model's: a request that repeats a prefix (Home Assistant's
		// instructions and tools) restores it, also after an unload.
		opt.Cache, opt.StablePrefix = p.cache, c.Prompt.StablePrefix
	}
	eng, err := engine.Load(path, opt)
	if err != nil {
		m.err = err
		return
	}
	if n, took := eng.Warm(); n > 0 {
		log.Info("prompt cache warmed", "tokens", n, "ms", took.Milliseconds())
	}
	load := time.Since(start)
	cc := c.coreConfig(eng, nil, log)
	cc.ModelLoad, cc.ToolFormat, cc.ThinkMarks, cc.NoTools = load, eng.Template().ToolFormat(), eng.Template().ThinkMarks(), appliance.NoTools(eng.Template())
	if p.cache != nil {
		cc.Storage = p.storage
	}
	core, err := appliance.New(cc)
	if err != nil {
		eng.Close()
		m.err = err
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	go core.Run(ctx)
	hc, err := c.httpConfig(core, eng, p.store, load, log)
	if err == nil {
		var web *httpapi.Server
		if web, err = httpapi.New(hc); err == nil {
			m.handler, m.model = web.Handler(), hc.Model
		}
	}
	if err != nil {
		cancel()
		<-core.Done()
		eng.Close()
		m.err = err
		return
	}
	m.eng, m.core, m.cancel = eng, core, cancel
	if p.group != nil {
		p.group.Add(core)
	}
	if fi, err := os.Stat(path); err == nil {
		m.size = fi.Size() + draftSize(path)
	}
	m.model.Size = m.size
	log.Info("model loaded", "ctx", eng.Ctx(), "ms", load.Milliseconds(), "draft_model", draft)
}

// testPoolLoad, when set (tests), runs first in every load.
var testPoolLoad func(name string)

// Unload implements httpapi.ModelSwitch.
func (p *modelPool) Unload(name string) bool {
	n, _, err := p.resolve(name)
	if err != nil {
		return false
	}
	p.mu.Lock()
	m, ok := p.loaded[n]
	if ok {
		m.keep, m.last = 0, time.Now().Add(-time.Second)
	}
	p.mu.Unlock()
	if ok {
		p.unloadExpired(time.Now()) // now, or when its last request is answered
	}
	return ok
}

// Stored implements httpapi.ModelSwitch.
func (p *modelPool) Stored() ([]httpapi.Model, error) {
	list, err := p.store.List()
	var out []httpapi.Model
	for _, sm := range list {
		if sm.Type == "invalid" || sm.Problem != "" {
			continue
		}
		hm := describedModel(sm)
		hm.Name = sm.Name
		if sm.Type == "embedding" {
			hm.Capabilities = []string{"embedding"} // Ollama's word: /api/embed answers with it
		}
		out = append(out, hm)
	}
	return out, err
}

// Running implements httpapi.ModelSwitch.
func (p *modelPool) Running() []httpapi.RunningModel {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []httpapi.RunningModel
	for _, m := range p.loaded {
		select {
		case <-m.ready:
		default:
			continue
		}
		if m.err != nil {
			continue
		}
		exp := httpapi.NeverExpires
		switch {
		case m.keep < 0:
		case m.refs > 0:
			exp = time.Now().Add(m.keep)
		default:
			exp = m.last.Add(m.keep)
		}
		out = append(out, httpapi.RunningModel{Model: m.model, ExpiresAt: exp})
	}
	for _, m := range p.resident {
		out = append(out, httpapi.RunningModel{Model: m, ExpiresAt: httpapi.NeverExpires})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model.Name < out[j].Model.Name })
	return out
}

// poolRouter is the cores' appliance.Models: the stored models other
// than the first, named by the requests of every front end (an MQTT
// ask's model, a Wyoming transcript's context.model), answered by their
// pooled cores.
type poolRouter struct {
	pool  *modelPool
	first []string // the first model's names (its stored name, its file's), canonical
}

// router returns the Models of the first model's core; path is its file.
func (p *modelPool) router(path string) appliance.Models {
	r := poolRouter{pool: p, first: []string{appliance.CanonicalModel(ModelName(path))}}
	if n, ok := p.store.NameOf(path); ok {
		r.first = append(r.first, appliance.CanonicalModel(n))
	}
	return r
}

// Other implements appliance.Models.
func (r poolRouter) Other(name string) (bool, error) {
	if slices.Contains(r.first, appliance.CanonicalModel(name)) {
		return false, nil
	}
	n, _, err := r.pool.resolve(name)
	if err != nil {
		if errors.Is(err, httpapi.ErrNotStored) {
			return false, &appliance.Error{Code: appliance.CodeBadRequest, Message: fmt.Sprintf("model %q is not stored: geist list names the stored models, geist pull NAME stores one", name)}
		}
		return false, err
	}
	return !slices.Contains(r.first, appliance.CanonicalModel(n)), nil
}

// Acquire implements appliance.Models.
func (r poolRouter) Acquire(ctx context.Context, name string) (*appliance.Core, func(), error) {
	m, release, err := r.pool.acquire(ctx, name, httpapi.KeepAliveDefault, false)
	switch {
	case errors.Is(err, httpapi.ErrNotGenerative), errors.Is(err, httpapi.ErrNotStored):
		return nil, nil, &appliance.Error{Code: appliance.CodeBadRequest, Message: err.Error()}
	case errors.Is(err, httpapi.ErrModelBudget):
		return nil, nil, &appliance.Error{Code: appliance.CodeBusy, Message: err.Error()}
	case err != nil:
		return nil, nil, &appliance.Error{Code: appliance.CodeInternal, Message: fmt.Sprintf("loading model %q failed: %v", name, err)}
	}
	return m.core, release, nil
}
