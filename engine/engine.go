// Package engine is geist's public API: load a GGUF model, generate text
// from a prompt or chat messages with streaming and cancellation, and score
// token sequences.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/geisten/geist/engine/chat"
	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/engine/sample"
	"github.com/geisten/geist/engine/tokenizer"
	"github.com/geisten/geist/quant"
)

// Options configure loading.
type Options struct {
	Threads int // worker threads for matrix products (0: the default)
	Ctx     int // context size in tokens (0: the model's, capped at 4096)
	Batch   int // tokens per forward pass during prefill (0: 64)
	// LogitRows is the most tokens per pass whose logits are kept (0: 33,
	// enough to verify the longest draft).
	LogitRows int
	// DraftModel, if set, is a smaller GGUF with the same vocabulary that
	// drafts tokens for speculative decoding (SpecDraft, SpecAuto).
	DraftModel string
	// Cache, if set, keeps KV states of prompt prefixes across processes.
	Cache PromptCache
	// KVType is the KV cache type: "f16" (default) or "q8_0".
	KVType string
	// Logger receives warnings (damaged cache entries); nil discards them.
	Logger *slog.Logger
}

// ErrPromptTooLong is returned when a prompt does not fit the context.
var ErrPromptTooLong = errors.New("engine: prompt too long")

// Engine is a loaded model with its tokenizer, chat template and one
// sequence state. It is not safe for concurrent use: one request at a time.
type Engine struct {
	id       []byte      // model identity for the prompt cache
	snap     snapshotter // background writes to the prompt cache
	closed   bool
	spec     specState
	path     string
	file     *gguf.File
	model    *model.Model
	tok      *tokenizer.Tokenizer
	template *chat.Template
	state    *model.State
	opt      Options
}

// LoadVocab opens a GGUF file and reads only its tokenizer; it works on
// vocab-only files.
func LoadVocab(path string) (*tokenizer.Tokenizer, *gguf.File, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, nil, err
	}
	v, err := tokenizer.VocabFromMetadata(f.Value)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	tok, err := tokenizer.New(v)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return tok, f, nil
}

// Load opens the model at path.
func Load(path string, opt Options) (*Engine, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("engine: model file: %w", err)
	}
	tok, f, err := LoadVocab(path)
	if err != nil {
		return nil, err
	}
	kvType := quant.F16
	switch opt.KVType {
	case "", "f16", "F16":
	case "q8_0", "Q8_0":
		kvType = quant.Q8_0
	default:
		f.Close()
		return nil, fmt.Errorf("engine: KV cache type %q is not supported (want f16 or q8_0)", opt.KVType)
	}
	e := &Engine{path: path, file: f, tok: tok, opt: opt, id: modelID(f.Bytes()[:min(f.DataOffset, int64(len(f.Bytes())))], kvType)}
	if e.model, err = model.Load(f); err != nil {
		f.Close()
		return nil, err
	}
	if e.model.NVocab < tok.NTokens() {
		f.Close()
		return nil, fmt.Errorf("engine: the tokenizer has %d tokens but the model only %d embeddings", tok.NTokens(), e.model.NVocab)
	}
	src, ok := f.String("tokenizer.chat_template")
	if !ok {
		src = chat.ChatML
	}
	if e.template, err = chat.Compile(src); err != nil {
		f.Close()
		return nil, fmt.Errorf("engine: chat template: %w", err)
	}
	if opt.Ctx <= 0 {
		opt.Ctx = min(e.model.CtxTrain, 4096)
	}
	if opt.Threads <= 0 {
		opt.Threads = DefaultThreads()
	}
	if opt.Batch <= 0 {
		opt.Batch = 64
	}
	opt.Batch = min(opt.Batch, opt.Ctx)
	e.opt = opt
	if e.state, err = e.model.NewState(model.StateOptions{Ctx: opt.Ctx, Batch: opt.Batch, Threads: opt.Threads, LogitRows: opt.LogitRows, KVType: kvType}); err != nil {
		f.Close()
		return nil, err
	}
	if err := e.initSpec(); err != nil {
		e.Close()
		return nil, err
	}
	e.loadDraftStats()
	// Parsing the vocabulary and building the tokenizer pass through far
	// more heap than they keep (a 128K-token vocabulary peaks near 100 MB
	// for 27 MB live): hand the rest back to the OS now rather than carry
	// it in the resident set for the life of the appliance.
	debug.FreeOSMemory()
	return e, nil
}

// State exposes the model state for benchmarks. Generate reuses whatever
// prefix of its prompt the state holds (State.Tokens), so a benchmark may
// run passes directly between generations.
func (e *Engine) State() *model.State { return e.state }

// Reset forgets the KV state: the next request prefills from scratch.
func (e *Engine) Reset() { e.state.Truncate(0) }

func (e *Engine) log() *slog.Logger {
	if e.opt.Logger != nil {
		return e.opt.Logger
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Close stops the engine's workers and releases the model file.
func (e *Engine) Close() error {
	if e.closed {
		return nil
	}
	e.closed = true
	e.waitSnapshots()
	e.saveDraftStats()
	e.state.Close()
	if d := e.spec.draft; d != nil {
		d.close()
	}
	return e.file.Close()
}

// DefaultThreads is the number of worker threads used when none is given:
// every CPU the process may run on (the boards geist targets have only
// performance cores).
func DefaultThreads() int { return runtime.GOMAXPROCS(0) }

// Model returns the loaded model.
func (e *Engine) Model() *model.Model { return e.model }

// Tokenizer returns the model's tokenizer.
func (e *Engine) Tokenizer() *tokenizer.Tokenizer { return e.tok }

// File returns the model's GGUF file.
func (e *Engine) File() *gguf.File { return e.file }

// Ctx is the context size in tokens.
func (e *Engine) Ctx() int { return e.opt.Ctx }

// Request is one generation.
type Request struct {
	Prompt    string         // raw prompt (used when Messages is empty)
	Messages  []chat.Message // chat messages, rendered with the model's template
	Chat      bool           // render Prompt (and System) as a one-turn chat
	System    string         // system message for Chat
	MaxTokens int            // most tokens to generate (0: until the context is full)
	Sampling  sample.Params
	Stop      []string // stop strings, besides the end-of-generation tokens
	// OnText receives the generated text as it streams (the slice is reused:
	// copy what you keep). Returning an error stops generation with it.
	OnText func(text []byte) error
	// OnToken, if set, receives every generated token id.
	OnToken func(id int32)
	// Spec configures speculative decoding (the zero value: SpecAuto with
	// the defaults).
	Spec SpecOptions
}

// Stats describe one generation.
type Stats struct {
	PromptTokens    int     `json:"prompt_tokens"`
	GeneratedTokens int     `json:"generated_tokens"`
	TTFTms          float64 `json:"ttft_ms"`
	PrefillTokS     float64 `json:"prefill_tok_s"`
	DecodeTokS      float64 `json:"decode_tok_s"`
	StopReason      string  `json:"stop_reason"`             // "eos", "stop", "length", "context"
	ReusedTokens    int     `json:"reused_tokens"`           // prompt tokens whose KV state was reused
	DroppedTurns    int     `json:"dropped_turns,omitempty"` // oldest turns left out to fit the context

	// Speculative decoding: forward passes of the target model while
	// decoding, tokens drafted and accepted, and tokens per pass.
	TargetPasses  int                     `json:"target_passes"`
	Drafted       int                     `json:"drafted"`
	Accepted      int                     `json:"accepted"`
	TokensPerPass float64                 `json:"tokens_per_pass"`
	Drafters      map[string]DrafterStats `json:"drafters,omitempty"`
}

// DrafterStats count one drafter's proposals.
type DrafterStats struct {
	Drafted  int `json:"drafted"`
	Accepted int `json:"accepted"`
	Steps    int `json:"steps"`
}

// RenderPrompt returns the text the model reads for req: the chat template
// applied to the messages, or the raw prompt.
func (e *Engine) RenderPrompt(req *Request) (string, error) {
	msgs := req.Messages
	if len(msgs) == 0 && req.Chat {
		if req.System != "" {
			msgs = append(msgs, chat.Message{Role: "system", Content: req.System})
		}
		msgs = append(msgs, chat.Message{Role: "user", Content: req.Prompt})
	}
	if len(msgs) == 0 {
		return req.Prompt, nil
	}
	return e.renderMessages(msgs, true)
}

func (e *Engine) renderMessages(msgs []chat.Message, addGen bool) (string, error) {
	opt := chat.Options{AddGenerationPrompt: addGen}
	if id := e.tok.BOS(); id >= 0 {
		opt.BOS = e.tok.TokenText(id)
	}
	if id := e.tok.EOS(); id >= 0 {
		opt.EOS = e.tok.TokenText(id)
	}
	return e.template.Render(msgs, opt)
}

// Tokens tokenizes the prompt of req as generation reads it: special-token
// text parsed, BOS as the vocab says.
func (e *Engine) Tokens(req *Request) ([]int32, error) {
	text, err := e.RenderPrompt(req)
	if err != nil {
		return nil, err
	}
	return e.tok.Encode(text, true, true), nil
}

// TokenLogprob is one candidate next token with its natural log-probability.
type TokenLogprob struct {
	ID      int32   `json:"id"`
	Logprob float64 `json:"logprob"`
}

// Score reads tokens teacher-forced and returns, for every position i, the
// top most likely next tokens after tokens[0..i], most likely first.
func (e *Engine) Score(ctx context.Context, tokens []int32, top int) ([][]TokenLogprob, error) {
	if len(tokens) == 0 {
		return nil, errors.New("engine: no tokens to score")
	}
	if len(tokens) > e.opt.Ctx {
		return nil, fmt.Errorf("%w: %d tokens do not fit the context of %d", ErrPromptTooLong, len(tokens), e.opt.Ctx)
	}
	nv := e.model.NVocab
	if top <= 0 || top > nv {
		return nil, fmt.Errorf("engine: top %d must be in [1, %d]", top, nv)
	}
	s := e.state
	s.Truncate(0)
	out := make([][]TokenLogprob, 0, len(tokens))
	lp := make([]float32, nv)
	for i := 0; i < len(tokens); i += s.MaxLogitRows() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		chunk := tokens[i:min(i+s.MaxLogitRows(), len(tokens))]
		logits, err := s.Forward(chunk, true)
		if err != nil {
			return nil, err
		}
		for j := range chunk {
			sample.LogSoftmax(lp, logits[j*nv:(j+1)*nv])
			out = append(out, topLogprobs(lp, top))
		}
	}
	return out, nil
}

// topLogprobs returns the n largest entries of lp, largest first (ties: lower id first).
func topLogprobs(lp []float32, n int) []TokenLogprob {
	best := make([]TokenLogprob, 0, n+1)
	for id, v := range lp {
		if len(best) == n && float64(v) <= best[n-1].Logprob {
			continue
		}
		k := len(best)
		best = append(best, TokenLogprob{})
		for k > 0 && best[k-1].Logprob < float64(v) {
			best[k] = best[k-1]
			k--
		}
		best[k] = TokenLogprob{ID: int32(id), Logprob: float64(v)}
		if len(best) > n {
			best = best[:n]
		}
	}
	return best
}
