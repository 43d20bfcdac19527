package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/geisten/geist/cmd/internal/httpapi"
	"github.com/geisten/geist/cmd/internal/models"
	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/embed"
	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/model"
)

// embedService answers the HTTP API's embedding endpoints: with the
// model of --embed-model (embed_model), loaded at start, or with a stored
// embedding model the request names, loaded on demand. It is
// self-contained beside the generation engine: at most maxOnDemand
// models loaded on demand stay (the least recently used one goes first),
// each must fit in half the memory available, and one computation runs
// at a time (others wait for it, as long as their client does).
type embedService struct {
	store   *models.Store
	opt     embed.Options
	log     *slog.Logger
	memInfo string

	fixed     *embed.Model // --embed-model, nil when none
	fixedName string
	fixedPath string
	textModel string // the name of the model serve generates with

	run chan struct{} // one computation at a time

	// pool, when set, holds the models loaded on demand, beside the text
	// models, in one memory budget (loaded, below, is then unused).
	pool *modelPool

	mu     sync.Mutex
	loaded []*embedEntry // on demand, most recently used last
}

type embedEntry struct {
	name  string
	m     *embed.Model
	users int
	drop  bool // unload when the last user is done (keep_alive 0)
}

// maxOnDemand bounds the embedding models loaded on demand.
const maxOnDemand = 2

// newEmbedService loads the fixed model (path, may be "") and returns the
// service; nil store: no loading on demand.
func newEmbedService(path, name string, store *models.Store, threads int, log *slog.Logger) (*embedService, error) {
	s := &embedService{store: store, opt: embed.Options{Threads: threads}, log: log, memInfo: cmp.Or(os.Getenv("GEIST_MEMINFO"), engine.MemInfo),
		run: make(chan struct{}, 1)}
	if path != "" {
		m, err := embed.Open(path, s.opt)
		if err != nil {
			return nil, fmt.Errorf("--embed-model: %w", err)
		}
		s.fixed, s.fixedName, s.fixedPath = m, name, path
		log.Info("embedding model loaded", "model", name, "arch", m.Arch(), "dim", m.Dim(), "ctx", m.Ctx(), "pooling", m.Pooling().String())
	}
	return s, nil
}

// Close unloads every model.
func (s *embedService) Close() {
	if s == nil {
		return
	}
	if s.fixed != nil {
		s.fixed.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.loaded {
		e.m.Close()
	}
	s.loaded = nil
}

// parseKeepAliveText reads an embedding request's keep_alive as sent:
// a Go duration or a number of seconds, negative for ever, "" the
// default (httpapi.KeepAliveDefault).
func parseKeepAliveText(ka string) (time.Duration, error) {
	ka = strings.TrimSpace(ka)
	if ka == "" {
		return httpapi.KeepAliveDefault, nil
	}
	d, err := time.ParseDuration(ka)
	if err != nil {
		f, ferr := strconv.ParseFloat(ka, 64)
		if ferr != nil || math.IsNaN(f) || math.IsInf(f, 0) || f > 1e9 {
			return 0, fmt.Errorf("%w: keep_alive %q: want a duration (\"5m\", \"0\", \"-1\") or a number of seconds", httpapi.ErrEmbedInput, ka)
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d < 0 {
		return httpapi.KeepAliveForever, nil
	}
	return d, nil
}

// zeroKeepAlive reports whether keep_alive asks to unload now.
func zeroKeepAlive(ka string) bool {
	ka = strings.TrimSpace(ka)
	if ka == "" {
		return false
	}
	if d, err := time.ParseDuration(ka); err == nil {
		return d == 0
	}
	return strings.Trim(ka, "0.") == "" // "0", "0.0"
}

// Embed implements httpapi.Embedder.
func (s *embedService) Embed(ctx context.Context, r httpapi.EmbedRequest) (httpapi.EmbedResult, error) {
	name := strings.TrimSuffix(strings.TrimSpace(r.Model), ":latest")
	var m *embed.Model
	var load time.Duration
	var entry *embedEntry
	if s.fixed != nil && name != "" && s.store != nil {
		// Another name of the same file (nomic-embed-text for
		// nomic-embed-text:v1.5) is the model loaded at start.
		if p, err := s.store.Path(name); err == nil && sameFile(p, s.fixedPath) {
			name = s.fixedName
		}
	}
	switch {
	case name == "" || s.fixed != nil && strings.EqualFold(name, s.fixedName):
		if s.fixed == nil {
			return httpapi.EmbedResult{}, fmt.Errorf("%w: the request names no model and geist serve has no --embed-model", httpapi.ErrEmbedModelNotFound)
		}
		m, name = s.fixed, s.fixedName
	case s.textModel != "" && strings.EqualFold(name, s.textModel):
		return httpapi.EmbedResult{}, fmt.Errorf("%w: %q is the model geist serve generates text with; name an embedding model (all-minilm, nomic-embed-text, bge-small, qwen3-embedding:0.6b, embeddinggemma)", httpapi.ErrNotEmbeddingModel, name)
	case s.pool != nil:
		keep, err := parseKeepAliveText(r.KeepAlive)
		if err != nil {
			return httpapi.EmbedResult{}, err
		}
		em, ld, release, err := s.pool.acquireEmbed(ctx, name, keep)
		switch {
		case errors.Is(err, httpapi.ErrNotStored):
			return httpapi.EmbedResult{}, fmt.Errorf("%w: %q is not stored (geist pull %s fetches it)", httpapi.ErrEmbedModelNotFound, name, name)
		case errors.Is(err, httpapi.ErrModelBudget):
			return httpapi.EmbedResult{}, fmt.Errorf("%w: %w", httpapi.ErrEmbedBusy, err)
		case err != nil:
			return httpapi.EmbedResult{}, err
		}
		defer release()
		m, load = em, ld
	default:
		var err error
		if entry, load, err = s.acquire(name); err != nil {
			return httpapi.EmbedResult{}, err
		}
		m = entry.m
		defer s.release(entry, zeroKeepAlive(r.KeepAlive))
	}
	select {
	case s.run <- struct{}{}:
	case <-ctx.Done():
		return httpapi.EmbedResult{}, ctx.Err()
	}
	defer func() { <-s.run }()
	inputs := make([]embed.Input, len(r.Inputs))
	for i, in := range r.Inputs {
		inputs[i] = embed.Input{Text: in.Text, Tokens: in.Tokens}
	}
	res, err := m.Embed(ctx, embed.Request{Inputs: inputs, Truncate: r.Truncate, Dimensions: r.Dimensions})
	if errors.Is(err, embed.ErrInput) {
		return httpapi.EmbedResult{}, badEmbedInput{err}
	}
	if err != nil {
		return httpapi.EmbedResult{}, err
	}
	return httpapi.EmbedResult{Model: name, Embeddings: res.Embeddings, Tokens: res.Tokens, LoadDuration: load}, nil
}

// badEmbedInput is embed.ErrInput as the HTTP API's ErrEmbedInput (400),
// its message unchanged.
type badEmbedInput struct{ error }

func (e badEmbedInput) Unwrap() error        { return e.error }
func (e badEmbedInput) Is(target error) bool { return target == httpapi.ErrEmbedInput }

// acquire finds or loads the stored model name and counts a user of it.
func (s *embedService) acquire(name string) (*embedEntry, time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range s.loaded {
		if strings.EqualFold(e.name, name) {
			s.loaded = append(append(s.loaded[:i:i], s.loaded[i+1:]...), e)
			e.users++
			e.drop = false
			return e, 0, nil
		}
	}
	if s.store == nil {
		return nil, 0, fmt.Errorf("%w: %q (geist serve loads only --embed-model %s)", httpapi.ErrEmbedModelNotFound, name, s.fixedName)
	}
	if _, err := models.CheckName(name); err != nil {
		return nil, 0, fmt.Errorf("%w: %v", httpapi.ErrEmbedModelNotFound, err)
	}
	path, err := s.store.Path(name)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %q is not stored (geist pull %s fetches it)", httpapi.ErrEmbedModelNotFound, name, name)
	}
	if err := checkEmbedding(path, name); err != nil {
		return nil, 0, err
	}
	if st, err := os.Stat(path); err == nil {
		if avail, err := engine.ReadMemAvailable(s.memInfo); err == nil && avail > 0 && st.Size() > avail/2 {
			return nil, 0, fmt.Errorf("%w: embedding model %q (%d MiB) does not fit in half the memory available (%d MiB)", httpapi.ErrEmbedBusy, name, st.Size()>>20, avail>>20)
		}
	}
	// Room: unload the least recently used idle model.
	for len(s.loaded) >= maxOnDemand {
		i := -1
		for j, e := range s.loaded {
			if e.users == 0 {
				i = j
				break
			}
		}
		if i < 0 {
			return nil, 0, fmt.Errorf("%w: %d embedding models are in use", httpapi.ErrEmbedBusy, len(s.loaded))
		}
		s.log.Info("embedding model unloaded", "model", s.loaded[i].name)
		s.loaded[i].m.Close()
		s.loaded = append(s.loaded[:i], s.loaded[i+1:]...)
	}
	start := time.Now()
	m, err := embed.Open(path, s.opt)
	if err != nil {
		return nil, 0, err
	}
	load := time.Since(start)
	s.log.Info("embedding model loaded", "model", name, "arch", m.Arch(), "dim", m.Dim(), "ctx", m.Ctx(), "ms", load.Milliseconds())
	e := &embedEntry{name: name, m: m, users: 1}
	s.loaded = append(s.loaded, e)
	return e, load, nil
}

// release counts a user of e out; drop unloads e when it was the last.
func (s *embedService) release(e *embedEntry, drop bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.users--
	e.drop = e.drop || drop
	if e.users > 0 || !e.drop {
		return
	}
	for i, x := range s.loaded {
		if x == e {
			s.loaded = append(s.loaded[:i], s.loaded[i+1:]...)
			e.m.Close()
			s.log.Info("embedding model unloaded", "model", e.name, "reason", "keep_alive 0")
			return
		}
	}
}

// sameFile reports whether paths a and b name one file.
func sameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}

// checkEmbedding refuses a file that is not an embedding model, reading
// only its header.
func checkEmbedding(path, name string) error {
	f, err := gguf.Open(path)
	if err != nil {
		return fmt.Errorf("embedding model %q: %w", name, err)
	}
	defer f.Close()
	if !model.IsEmbedding(f) {
		return fmt.Errorf("%w: %q is a %s model that generates text; name an embedding model (all-minilm, nomic-embed-text, bge-small, qwen3-embedding:0.6b, embeddinggemma)", httpapi.ErrNotEmbeddingModel, name, f.Arch())
	}
	return nil
}

// isEmbeddingFile reports whether the GGUF file at path is an embedding
// model (false when it cannot be read).
func isEmbeddingFile(path string) bool {
	f, err := gguf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return model.IsEmbedding(f)
}

var _ httpapi.Embedder = (*embedService)(nil)

// embedModelName is the name the embedding model of path answers with:
// its stored name, else its file name without .gguf ("" for no path).
func embedModelName(path string, store *models.Store) string {
	if path == "" {
		return ""
	}
	if n, ok := store.NameOf(path); ok {
		return n
	}
	return modelName(path)
}
