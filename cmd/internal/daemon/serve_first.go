package daemon

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/geisten/geist/cmd/internal/httpapi"
	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/chat"
)

// firstModel is the engine of the model serve started with, as its core
// runs it (appliance.Engine): loaded at the start and for ever by
// default, unloaded by keep_alive (Ollama's: 0 once the requests using
// it are answered, a duration after its last request) and loaded again,
// on the worker of the first request that needs it, with the options of
// the first load (its context, its number of sequences). A request for
// another model never waits on that load: the other models have cores of
// their own.
//
// The core, the sessions and every front end stay while the weights,
// the KV cache and the drafter are released; what the front ends read of
// the model (its template, tokenizer, description) is kept from the first
// load, which is the same file.
type firstModel struct {
	path     string
	opt      engine.Options
	log      *slog.Logger
	id       []byte
	parallel int
	// room, if set, makes room in memory before a reload (the model
	// pool's idle models go) and says whether the model fits.
	room func(path string) bool

	mu      sync.Mutex
	eng     *engine.Engine // nil: unloaded
	prev    *engine.Engine // the engine last loaded (its template and tokenizer outlive Close)
	loading chan struct{}  // closed when the load under way ends
	refs    int            // calls using eng
	keep    time.Duration  // httpapi.KeepAliveForever (the default) or a duration
	last    time.Time      // when the last call ended
	stop    chan struct{}
	done    chan struct{}
	closed  bool
}

// newFirstModel takes over eng, loaded from path with opt.
func newFirstModel(eng *engine.Engine, path string, opt engine.Options, log *slog.Logger) *firstModel {
	opt.Ctx, opt.Parallel = eng.Ctx(), eng.Parallel() // a reload gets what the first load chose
	opt.OnLoadProgress = loadLog(log, path)
	f := &firstModel{path: path, opt: opt, log: log, id: eng.ModelID(), parallel: eng.Parallel(),
		eng: eng, prev: eng, keep: httpapi.KeepAliveForever, last: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go f.expire()
	return f
}

// expire unloads the model once its keep_alive after the last request
// ran out, looking every second.
func (f *firstModel) expire() {
	defer close(f.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case now := <-t.C:
			f.mu.Lock()
			if f.eng != nil && f.refs == 0 && f.keep > 0 && !now.Before(f.last.Add(f.keep)) {
				f.unloadLocked("keep_alive ended")
			}
			f.mu.Unlock()
		}
	}
}

// unloadLocked closes the engine (f.mu held, no call using it).
func (f *firstModel) unloadLocked(why string) {
	f.eng.Close()
	f.eng = nil
	f.keep = httpapi.KeepAliveForever // a keep_alive holds until the unload
	f.log.Info("model unloaded", "model", ModelName(f.path), "why", why)
}

// acquire returns the loaded engine, loading it when it is not, and
// counts a call using it (release ends it). beat, if set, hears the
// progress of a load it runs (the core's stall watchdog sees the request
// alive while a big file's weights are repacked).
func (f *firstModel) acquire(ctx context.Context, beat func()) (*engine.Engine, error) {
	f.mu.Lock()
	for f.eng == nil {
		if f.closed {
			f.mu.Unlock()
			return nil, errors.New("geist is shutting down")
		}
		if ch := f.loading; ch != nil {
			f.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
			f.mu.Lock()
			continue
		}
		ch := make(chan struct{})
		f.loading = ch
		f.mu.Unlock()
		if f.room != nil && !f.room(f.path) {
			f.log.Warn("loading the model again with less memory available than it needs: the other models loaded are in use", "model", f.path)
		}
		start := time.Now()
		opt := f.opt
		if beat != nil {
			logged := opt.OnLoadProgress
			opt.OnLoadProgress = func(done, total int64) {
				if logged != nil {
					logged(done, total)
				}
				beat()
			}
		}
		eng, err := engine.Load(f.path, opt)
		f.mu.Lock()
		f.loading = nil
		close(ch)
		if err != nil {
			f.mu.Unlock()
			f.log.Error("loading the model again failed", "model", f.path, "err", err)
			return nil, err
		}
		f.eng, f.prev = eng, eng
		f.log.Info("model loaded again", "model", ModelName(f.path), "ms", time.Since(start).Milliseconds())
	}
	f.refs++
	eng := f.eng
	f.mu.Unlock()
	return eng, nil
}

func (f *firstModel) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refs--
	f.last = time.Now()
	if f.refs == 0 && f.keep == 0 && f.eng != nil {
		f.unloadLocked("keep_alive 0")
	}
}

// Generate implements appliance.Engine.
func (f *firstModel) Generate(ctx context.Context, req engine.Request) (engine.Stats, error) {
	var beat func()
	if req.OnPromptProgress != nil {
		beat = func() { req.OnPromptProgress(0, 0) }
	}
	eng, err := f.acquire(ctx, beat)
	if err != nil {
		return engine.Stats{}, err
	}
	defer f.release()
	return eng.Generate(ctx, req)
}

// ModelID implements appliance.Engine: the first load's, the same file's.
func (f *firstModel) ModelID() []byte { return f.id }

// ConversationPrefix implements appliance.Engine with the engine last
// loaded: the chat template and the tokenizer, which need no weights.
func (f *firstModel) ConversationPrefix(msgs []chat.Message) ([]int32, error) {
	f.mu.Lock()
	eng := f.prev
	f.mu.Unlock()
	return eng.ConversationPrefix(msgs)
}

// Parallel implements appliance.Paralleler: the workers of the first
// load, which every reload keeps.
func (f *firstModel) Parallel() int { return f.parallel }

// Warm implements appliance.Warmer: Ollama's "load the model" request
// loads it again when it was unloaded.
func (f *firstModel) Warm() (int, time.Duration) {
	eng, err := f.acquire(context.Background(), nil)
	if err != nil {
		return 0, 0
	}
	defer f.release()
	return eng.Warm()
}

// CheckSnapshot checks a prompt-cache blob put through the control
// socket (engine.Engine.CheckSnapshot); unloaded, it refuses it.
func (f *firstModel) CheckSnapshot(tokens []int32, blob []byte) error {
	eng, err := f.loaded()
	if err != nil {
		return err
	}
	defer f.release()
	return eng.CheckSnapshot(tokens, blob)
}

// loaded is acquire without a load.
func (f *firstModel) loaded() (*engine.Engine, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.eng == nil {
		return nil, errors.New("the model is unloaded (keep_alive)")
	}
	f.refs++
	return f.eng, nil
}

// KeepAlive implements httpapi.FirstModel.
func (f *firstModel) KeepAlive(d time.Duration) {
	f.mu.Lock()
	f.keep = d
	f.mu.Unlock()
}

// Unload implements httpapi.FirstModel.
func (f *firstModel) Unload() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.eng == nil {
		return false
	}
	f.keep = 0
	if f.refs == 0 {
		f.unloadLocked("keep_alive 0")
	}
	return true
}

// Expires implements httpapi.FirstModel.
func (f *firstModel) Expires() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.eng == nil:
		return time.Time{}, false
	case f.keep < 0:
		return httpapi.NeverExpires, true
	case f.refs > 0:
		return time.Now().Add(f.keep), true
	}
	return f.last.Add(f.keep), true
}

// Close stops the expiry and closes the engine (serve ends).
func (f *firstModel) Close() {
	close(f.stop)
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	if f.eng != nil {
		f.eng.Close()
		f.eng = nil
	}
}
