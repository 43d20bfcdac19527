package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/geisten/geist/cmd/appliance"
	"github.com/geisten/geist/cmd/internal/httpapi"
	"github.com/geisten/geist/cmd/internal/models"
	"github.com/geisten/geist/engine"
)

// modelPool is the HTTP API's httpapi.ModelSwitch: the stored models
// other than the one serve started with, each loaded on demand into its
// own engine, appliance core and HTTP handler, on the goroutine of the
// request that names it (a request for a loaded model never waits on it),
// unloaded keepAlive after its last request (Ollama's keep_alive: 5
// minutes unless the request says otherwise, -1 never, 0 at once) or when
// the memory budget needs its room. The model serve started with is not
// in the pool: it stays loaded for the life of the process.
type modelPool struct {
	c         *serveConfig
	store     *models.Store
	log       *slog.Logger
	keepAlive time.Duration // the default keep_alive
	maxLoaded int           // models loaded at once besides the first
	// memAvailable reads the memory available for a load (tests replace
	// it); a model is loaded only when its file and a margin fit.
	memAvailable func() int64

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
	size    int64
	refs    int           // requests using it
	keep    time.Duration // its keep_alive (negative: for ever)
	last    time.Time     // when the last request ended (or began)
}

func newModelPool(c *serveConfig, store *models.Store, log *slog.Logger) *modelPool {
	p := &modelPool{c: c, store: store, log: log.With("component", "models"), keepAlive: 5 * time.Minute, maxLoaded: 3,
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
	if m.err != nil || m.core == nil {
		return
	}
	m.cancel()
	<-m.core.Done()
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
	n, path, err := p.resolve(name)
	if err != nil {
		return nil, nil, err
	}
	keep := keepAlive
	if keep == httpapi.KeepAliveDefault {
		keep = p.keepAlive
	}
	p.mu.Lock()
	m, ok := p.loaded[n]
	if !ok {
		var evict []*pooled
		if evict, err = p.roomLocked(path); err != nil {
			p.mu.Unlock()
			return nil, nil, err
		}
		m = &pooled{name: n, ready: make(chan struct{}), keep: keep, last: time.Now()}
		p.loaded[n] = m
		p.mu.Unlock()
		for _, e := range evict {
			p.close(e, "room for "+n)
		}
		go p.load(m, path) // the load outlives a client that leaves
		p.mu.Lock()
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
	return m.handler, release, nil
}

// roomLocked makes room for the model file at path: at most maxLoaded
// models, and its file with a quarter more (the KV cache, buffers) within
// the memory available; it picks the idle models to unload, least
// recently used first, or fails with httpapi.ErrModelBudget when the ones
// in use leave no room.
func (p *modelPool) roomLocked(path string) ([]*pooled, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	need := fi.Size() + fi.Size()/4 + 64<<20
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
	avail, count := p.memAvailable(), len(p.loaded)
	var evict []*pooled
	for (count >= p.maxLoaded || avail < need) && len(idle) > 0 {
		e := idle[0]
		idle = idle[1:]
		evict = append(evict, e)
		delete(p.loaded, e.name)
		count--
		avail += e.size // its weights' pages and KV come back
	}
	if count >= p.maxLoaded || avail < need {
		for _, e := range evict {
			p.loaded[e.name] = e // nothing unloaded after all
		}
		return nil, fmt.Errorf("%w: loading %s needs about %d MiB, %d MiB are available and the %d models loaded besides the first are in use; retry when they are answered",
			httpapi.ErrModelBudget, fi.Name(), need>>20, avail>>20, count)
	}
	return evict, nil
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
	c.Model = path
	log := p.log.With("model", m.name)
	eng, err := engine.Load(path, engine.Options{Threads: c.Threads, MemInfo: os.Getenv("GEIST_MEMINFO"), KVType: c.KVType,
		RepackBudget: c.Repack, Logger: log.With("component", "engine"), OnLoadProgress: loadLog(log, path)})
	if err != nil {
		m.err = err
		return
	}
	load := time.Since(start)
	cc := c.coreConfig(eng, nil, log)
	cc.ModelLoad, cc.ToolFormat, cc.ThinkMarks, cc.NoTools = load, eng.Template().ToolFormat(), eng.Template().ThinkMarks(), appliance.NoTools(eng.Template())
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
	if fi, err := os.Stat(path); err == nil {
		m.size = fi.Size()
	}
	log.Info("model loaded", "ctx", eng.Ctx(), "ms", load.Milliseconds())
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
	sort.Slice(out, func(i, j int) bool { return out[i].Model.Name < out[j].Model.Name })
	return out
}
