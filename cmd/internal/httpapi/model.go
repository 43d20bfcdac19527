package httpapi

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/geisten/geist/engine/chat"
)

// Model describes a model: the loaded one (Config.Model) or a stored one
// (ModelStore).
type Model struct {
	// Name is the stored name, without an Ollama tag; clients see
	// NAME:latest and may name it with or without the tag.
	Name       string
	Size       int64
	Digest     string // SHA-256 of the file (hex), "" when unknown
	ModifiedAt time.Time
	// Family is the architecture (general.architecture: llama, qwen2, ...);
	// ParameterSize the rounded parameter count (494M, 1.2B);
	// Quantization llama.cpp's file type name (Q4_0, Q4_K_M, ...).
	Family, ParameterSize, Quantization string
	// ContextLength is the context geist runs the model with (the loaded
	// model) or was trained with (a stored one); EmbeddingLength its width.
	ContextLength, EmbeddingLength int
	// Template is the chat template (Jinja, from the GGUF file); System the
	// default system message; Parameters the default generation settings,
	// one "name value" per line as Ollama's Modelfile writes them; License
	// the file's general.license.
	Template, System, Parameters, License string
	// Info is the GGUF metadata without the vocabulary's arrays (Ollama's
	// model_info); VerboseInfo, if set, returns it with them.
	Info        map[string]any
	VerboseInfo func() map[string]any
	// Capabilities are Ollama's: "completion", "tools" when the chat
	// template renders tools, "thinking" when it has a thinking switch.
	Capabilities []string
	// LoadDuration is how long loading it took (the loaded model).
	LoadDuration time.Duration
	// ToolFormat is how the model writes tool calls (its template's
	// syntax; chat.ToolsAny reads both).
	ToolFormat chat.ToolFormat

	// For /api/generate's context (token ids of a conversation so far),
	// the loaded model's tokenizer and template: Tokenize reads text as
	// generation does (special tokens parsed; bos adds BOS as the vocabulary
	// says), Detokenize renders ids back to text, RenderPrompt renders a
	// one-turn chat (system may be "") with the generation prompt. Nil:
	// context is refused.
	Tokenize     func(text string, bos bool) []int
	Detokenize   func(ids []int) string
	RenderPrompt func(system, prompt string) (string, error)
}

// tagged is the model's name as Ollama clients list it.
func (m *Model) tagged() string {
	if strings.Contains(m.Name, ":") {
		return m.Name // a tagged name already (qwen3:1.7b, from geist's catalog)
	}
	return m.Name + ":latest"
}

// ModelStore is the model directory behind /api/show (of models not
// loaded) and /api/pull. cmd/geist adapts cmd/internal/models to it.
type ModelStore interface {
	// Get describes the stored model name (a name as a client gave it,
	// tag and all); ok is false when no such model is stored.
	Get(name string) (m Model, ok bool, err error)
	// Pull fetches src (what the client gave as the model: a Hugging Face
	// reference hf:OWNER/REPO/FILE.gguf, or an https URL of a GGUF file)
	// into the store, reporting progress. It fails early, before any
	// progress, on a source it cannot parse (wrap ErrBadSource).
	Pull(ctx context.Context, src string, progress func(PullProgress)) error
}

// PullProgress is one of Ollama's pull progress objects.
type PullProgress struct {
	Status    string `json:"status"`
	Digest    string `json:"digest,omitempty"`
	Total     int64  `json:"total,omitempty"`
	Completed int64  `json:"completed,omitempty"`
}

// ErrBadSource is wrapped by a ModelStore's Pull error for a model
// reference it cannot fetch (HTTP 400 rather than 500).
var ErrBadSource = errors.New("not a model geist can pull")

// ErrRefusedSource is matched by a ModelStore's Pull error for a source
// it may not fetch from (a private address: HTTP 403 rather than 500);
// RefusedSource makes one.
var ErrRefusedSource = errors.New("source refused")

// RefusedSource is err (its message) matching ErrRefusedSource.
func RefusedSource(err error) error { return refusedSource{err} }

type refusedSource struct{ error }

func (r refusedSource) Unwrap() error        { return r.error }
func (r refusedSource) Is(target error) bool { return target == ErrRefusedSource }

// canonicalName reduces a client's model name to the stored form: no
// ":latest" tag, no ".gguf", no surrounding spaces.
func canonicalName(name string) string {
	n := strings.TrimSpace(name)
	n = strings.TrimSuffix(n, ":latest")
	return strings.TrimSuffix(n, ".gguf")
}

// isLoaded reports whether a request naming name means the loaded model:
// its name (with or without the tag, any case) or none at all.
func (s *Server) isLoaded(name string) bool {
	n := canonicalName(name)
	return n == "" || strings.EqualFold(n, s.cfg.Model.Name)
}
