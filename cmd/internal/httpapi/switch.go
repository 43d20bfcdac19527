package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Several models in one serve: the model serve was started with answers
// here; a request naming another stored model is handed to that model's
// own Server (its own core, engine and description), which the
// ModelSwitch loads on demand, on the requesting goroutine: a request
// for a loaded model never waits on the load of another. A model loaded
// so stays for its keep_alive after its last request (Ollama's: a
// duration, -1 for ever, 0 to unload now) or until the memory budget
// needs its room for another.

// ModelSwitch is what Config.Models gives the HTTP API: the stored models
// and the ones loaded beside the one serve started with. Nil: that one
// model only.
type ModelSwitch interface {
	// Route returns the handler answering for the stored model name (a
	// client's name: tag or not), loading the model when it is not
	// loaded, and release, to be called when the request is answered
	// (a model is never unloaded while a request uses it). keepAlive is
	// the request's (KeepAliveDefault: none given). It returns an error
	// wrapping ErrNotStored when no such model is stored, ErrModelBudget
	// when the memory budget has no room for it now.
	Route(ctx context.Context, name string, keepAlive time.Duration) (h http.Handler, release func(), err error)
	// Unload unloads the model name now (keep_alive 0), after the
	// requests using it; false when it is not loaded.
	Unload(name string) bool
	// Stored lists every stored model (/api/tags, /v1/models).
	Stored() ([]Model, error)
	// Running lists the models loaded beside the first (/api/ps).
	Running() []RunningModel
}

// FirstModel is what Config.First gives the HTTP API: the keep_alive of
// the model serve started with (Config.Model), which a request that needs
// it loads again once it was unloaded.
type FirstModel interface {
	// KeepAlive sets how long it stays loaded after its last request
	// (KeepAliveForever: for ever; 0: unloaded when the requests using
	// it are answered).
	KeepAlive(d time.Duration)
	// Unload unloads it now, or when the requests using it are
	// answered; false when it is not loaded.
	Unload() bool
	// Expires is when it will be unloaded (NeverExpires: kept); false
	// when it is not loaded.
	Expires() (time.Time, bool)
}

// RunningModel is a model loaded on demand and when it will be unloaded
// (NeverExpires: kept; while a request uses it, the keep_alive after now).
type RunningModel struct {
	Model     Model
	ExpiresAt time.Time
}

// KeepAliveDefault is the keep_alive of a request that gives none.
const KeepAliveDefault time.Duration = math.MinInt64

// KeepAliveForever is keep_alive -1 (or any negative duration).
const KeepAliveForever time.Duration = -1

var (
	// ErrNotStored is wrapped by Route's error for a model not stored.
	ErrNotStored = errors.New("no such model")
	// ErrModelBudget is wrapped by Route's error when the memory budget
	// has no room for the model while the loaded ones are in use.
	ErrModelBudget = errors.New("no room for the model")
	// ErrNotGenerative is wrapped by Route's error for an embedding
	// model, which does not generate text (400).
	ErrNotGenerative = errors.New("model does not generate text")
)

// NeverExpires is the expires_at of a model kept loaded.
var NeverExpires = neverExpires

// parseKeepAlive reads Ollama's keep_alive: a number of seconds, a Go
// duration string ("5m", "1h30m", "0"), negative for ever; absent or null
// is KeepAliveDefault.
func parseKeepAlive(raw json.RawMessage) (time.Duration, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return KeepAliveDefault, nil
	}
	var secs float64
	if json.Unmarshal(raw, &secs) == nil {
		if secs < 0 {
			return KeepAliveForever, nil
		}
		return time.Duration(secs * float64(time.Second)), nil
	}
	var str string
	if err := json.Unmarshal(raw, &str); err != nil {
		return 0, badf("keep_alive must be a duration (\"5m\") or a number of seconds, not %s", raw)
	}
	str = strings.TrimSpace(str)
	if f, err := strconv.ParseFloat(str, 64); err == nil {
		if f < 0 {
			return KeepAliveForever, nil
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(str)
	if err != nil {
		return 0, badf("keep_alive %q: want a duration (\"5m\", \"1h\", \"0\", \"-1\") or a number of seconds", str)
	}
	if d < 0 {
		return KeepAliveForever, nil
	}
	return d, nil
}

// switched wraps a generation handler (Ollama's chat and generate,
// OpenAI's chat and completions): a request naming a stored model other
// than the one serve started with goes to that model's handler.
func (s *Server) switched(h http.HandlerFunc, ollama bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Models == nil || r.Body == nil {
			h(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			h(w, r) // the handler reports the body's error (too large, cut)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var peek struct {
			Model     string          `json:"model"`
			KeepAlive json.RawMessage `json:"keep_alive"`
			Messages  json.RawMessage `json:"messages"`
			Prompt    json.RawMessage `json:"prompt"`
		}
		if json.Unmarshal(body, &peek) != nil || s.isLoaded(peek.Model) {
			h(w, r)
			return
		}
		ka, err := parseKeepAlive(peek.KeepAlive)
		if err != nil {
			s.refuseAs(w, err, errorWriterFor(ollama))
			return
		}
		empty := func(raw json.RawMessage) bool {
			t := strings.TrimSpace(string(raw))
			return t == "" || t == "null" || t == "[]" || t == `""`
		}
		if ollama && ka == 0 && empty(peek.Messages) && empty(peek.Prompt) {
			// Ollama's unload request: keep_alive 0 and nothing to answer.
			s.cfg.Models.Unload(peek.Model)
			now := time.Now().UTC()
			if strings.HasSuffix(r.URL.Path, "/chat") {
				writeJSON(w, http.StatusOK, chatResponse{Model: peek.Model, CreatedAt: now, Message: ollamaMessage{Role: "assistant"}, Done: true, DoneReason: "unload"})
			} else {
				writeJSON(w, http.StatusOK, generateResponse{Model: peek.Model, CreatedAt: now, Done: true, DoneReason: "unload"})
			}
			return
		}
		mh, release, err := s.cfg.Models.Route(r.Context(), peek.Model, ka)
		switch {
		case errors.Is(err, ErrNotStored):
			h(w, r) // the handler's 404, naming what is served
			return
		case errors.Is(err, ErrNotGenerative):
			errorWriterFor(ollama)(w, http.StatusBadRequest, err.Error())
			return
		case errors.Is(err, ErrModelBudget):
			w.Header().Set("Retry-After", "5")
			errorWriterFor(ollama)(w, http.StatusServiceUnavailable, err.Error())
			return
		case err != nil:
			if r.Context().Err() != nil {
				return // the client left during the load
			}
			errorWriterFor(ollama)(w, http.StatusInternalServerError, fmt.Sprintf("loading model %q failed: %v", peek.Model, err))
			return
		}
		defer release()
		mh.ServeHTTP(w, r)
	}
}

func errorWriterFor(ollama bool) errorWriter {
	if ollama {
		return writeError
	}
	return writeOpenAIError
}

// storedModels lists the model serve started with, then every other
// stored one (Ollama's /api/tags lists all it has).
func (s *Server) storedModels() []Model {
	out := []Model{s.cfg.Model}
	if s.cfg.Models == nil {
		return out
	}
	stored, err := s.cfg.Models.Stored()
	if err != nil {
		s.log.Warn("listing the stored models failed", "err", err)
	}
	for _, m := range stored {
		if !strings.EqualFold(canonicalName(m.Name), canonicalName(s.cfg.Model.Name)) {
			out = append(out, m)
		}
	}
	return out
}
