package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/geisten/geist/cmd/internal/httpapi"
	"github.com/geisten/geist/cmd/internal/models"
	"github.com/geisten/geist/engine/embed"
	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/model"
)

// embedService answers the HTTP API's embedding endpoints: with the
// model of --embed-model (embed_model), loaded at start, or with a stored
// embedding model the request names, which the model pool loads on demand
// (at most maxOnDemand at once, in the pool's memory budget and
// least-recently-used order beside the text models, keep_alive honoured).
// One computation runs at a time (others wait for it, as long as their
// client does).
type embedService struct {
	store *models.Store
	opt   embed.Options
	log   *slog.Logger

	fixed     *embed.Model // --embed-model, nil when none
	fixedName string
	fixedPath string
	textModel string // the name of the model serve generates with

	run chan struct{} // one computation at a time

	// pool, when set, loads the stored models requests name, beside the
	// text models, in one memory budget (nil: --embed-model only).
	pool *modelPool
}

// maxOnDemand bounds the embedding models loaded on demand.
const maxOnDemand = 2

// newEmbedService loads the fixed model (path, may be "") and returns the
// service; a nil pool (set later): no loading on demand.
func newEmbedService(path, name string, store *models.Store, threads int, log *slog.Logger) (*embedService, error) {
	s := &embedService{store: store, opt: embed.Options{Threads: threads}, log: log,
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

// Embed implements httpapi.Embedder.
func (s *embedService) Embed(ctx context.Context, r httpapi.EmbedRequest) (httpapi.EmbedResult, error) {
	name := strings.TrimSuffix(strings.TrimSpace(r.Model), ":latest")
	var m *embed.Model
	var load time.Duration
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
		return httpapi.EmbedResult{}, fmt.Errorf("%w: %q (geist serve loads only --embed-model %s)", httpapi.ErrEmbedModelNotFound, name, s.fixedName)
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

// IsEmbeddingFile reports whether the GGUF file at path is an embedding
// model (false when it cannot be read).
func IsEmbeddingFile(path string) bool {
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
	return ModelName(path)
}
