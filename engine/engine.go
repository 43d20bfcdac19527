// Package engine is geist's public API: load a GGUF model, generate text
// from a prompt or chat messages with streaming and cancellation, and score
// token sequences.
package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/geisten/geist/engine/chat"
	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/grammar"
	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/engine/sample"
	"github.com/geisten/geist/engine/spec"
	"github.com/geisten/geist/engine/tokenizer"
	"github.com/geisten/geist/quant"
)

// Options configure loading.
type Options struct {
	Threads int // worker threads for matrix products (0: the default)
	// Ctx is the context of a request that does not ask for one (0:
	// auto, ChooseContext's: the model's trained context capped by the
	// memory available). A request's NumCtx may go up to the larger of
	// Ctx and the automatic choice; the KV cache grows on demand.
	Ctx int
	// MemInfo is the meminfo file the memory available is read from (""
	// MemInfo, the system's).
	MemInfo string
	Batch   int // tokens per forward pass during prefill (0: 64)
	// LogitRows is the most tokens per pass whose logits are kept (0: 33,
	// enough to verify the longest draft).
	LogitRows int
	// DraftModel, if set, is a smaller GGUF with the same vocabulary that
	// drafts tokens for speculative decoding (SpecDraft, SpecAuto).
	DraftModel string
	// DenseHead makes a Gemma 4 assistant draft with its dense output head
	// even when its file has the sparse centroid head (to measure the
	// difference).
	DenseHead bool
	// DraftVocab, if > 0, makes the model file's MTP block draft only
	// token ids below it (its output head reads that many rows; 0: every
	// token, llama.cpp's arithmetic).
	DraftVocab int
	// Cache, if set, keeps KV states of prompt prefixes across processes.
	Cache PromptCache
	// StablePrefix moves Home Assistant 2025.4-2025.9's clock line
	// ("Current time is HH:MM:SS. Today's date is YYYY-MM-DD." at the end
	// of the system prompt) to the end of the last user message, behind
	// the tools, so that the prompt cache holds the long prefix; the model
	// sees the time there instead ([prompt] stable_prefix).
	StablePrefix bool
	// KVType is the KV cache type: "f16" (default) or "q8_0".
	KVType string
	// SelfSpec is when the skipped-layer draft's blocks are chosen, if no
	// choice was persisted: "auto" (the default; in the background after
	// a request, on its prompt and output), "load" (at load, on text the
	// model generates) or "off" (never: no self-speculation).
	SelfSpec string
	// Logger receives warnings (damaged cache entries); nil discards them.
	Logger *slog.Logger
	// Parallel is the most requests decoded together (continuous
	// batching, batch.go; --parallel, config parallel): 0 or 1 one at a
	// time (Generate must not be called concurrently), -1 automatic
	// (AutoParallel). With more than one, Generate may be called from
	// several goroutines; each answer is bit for bit the one it would be
	// alone, decoded without speculation.
	Parallel int
	// RepackBudget bounds the memory of the repacked weights
	// (RepackBudget's spec: "auto" by default, "all", "none" or a size);
	// what does not fit is read from the mapped file.
	RepackBudget string
	// OnLoadProgress, if set, hears the load's progress: done of total
	// bytes of the weights repacked (the long part of loading a big file;
	// not called when nothing is repacked). It may be called from several
	// goroutines, one at a time.
	OnLoadProgress func(done, total int64)
}

// ErrPromptTooLong is returned when a prompt does not fit the context.
var ErrPromptTooLong = errors.New("prompt too long")

// ErrStop, returned by a Request's OnText, ends the generation there as a
// stop string would (Stats.StopReason "stop", no error): the caller has
// what it wanted (the one tool call it asked for, say).
var ErrStop = errors.New("engine: generation stopped by the caller")

// Engine is a loaded model with its tokenizer, chat template and one
// sequence state. It is not safe for concurrent use: one request at a time.
type Engine struct {
	id []byte // model identity for the prompt cache
	// restoreTook is the last prefill's prompt-cache lookup and restore.
	restoreTook time.Duration
	choice      ContextChoice
	maxCtx      int
	snap        snapshotter // background writes to the prompt cache
	closed      bool
	spec        specState
	selfMode    string                         // Options.SelfSpec checked
	sysKeep     sysPrefix                      // the system prompt's tokens, for the prompt cache
	counts      struct{ renders, encodes int } // for tests: how often prompts were rendered and tokenized
	path        string
	file        *gguf.File
	model       *model.Model
	tok         *tokenizer.Tokenizer
	template    *chat.Template
	state       *model.State
	opt         Options
	gvocab      *grammar.Vocab // built on the first constrained request
	batch       *batcher       // continuous batching (nil: one request at a time)
	setup       sync.Mutex     // batched mode: a request's prompt and grammar
	solo        sync.Mutex     // Parallel > 1 on a model that cannot batch: one request at a time
	cacheMu     sync.Mutex     // batched mode: one prompt-cache restore or snapshot at a time
}

// ErrEmbeddingModel is Load's error for an embedding model (bert,
// nomic-bert, Qwen3-Embedding, EmbeddingGemma): engine/embed runs those.
var ErrEmbeddingModel = errors.New("is an embedding model")

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
		return nil, modelFileError(path, err)
	}
	tok, f, err := LoadVocab(path)
	if err != nil {
		return nil, modelError(path, err)
	}
	if model.IsEmbedding(f) {
		f.Close()
		return nil, fmt.Errorf("model %s %w (%s): it computes embeddings (geist embed, POST /api/embed, /v1/embeddings) and does not generate text", path, ErrEmbeddingModel, f.Arch())
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
	selfMode, err := selfSpecMode(opt.SelfSpec)
	if err != nil {
		f.Close()
		return nil, err
	}
	avail, _ := ReadMemAvailable(cmp.Or(opt.MemInfo, MemInfo))
	budget, err := RepackBudget(opt.RepackBudget, avail)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("engine: %w", err)
	}
	e := &Engine{path: path, file: f, tok: tok, opt: opt, selfMode: selfMode, id: modelID(f.Bytes()[:min(f.DataOffset, int64(len(f.Bytes())))], kvType)}
	if e.model, err = model.LoadWith(f, model.LoadOptions{RepackBudget: budget, Progress: opt.OnLoadProgress}); err != nil {
		f.Close()
		return nil, modelError(path, err)
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
	// The tokens around the model's tool calls and its thinking block
	// show in its answers, so that calls can be parsed and forced
	// (Phi-4-mini's are control tokens) and the thinking split from the
	// content (Gemma 4's thought channel).
	for _, s := range append(e.template.ToolTokens(), e.template.ThinkTokens()...) {
		tok.Preserve(s)
	}
	// The weights left in the file are page cache, which MemAvailable
	// counts as available: they are not taken from the KV cache's share.
	e.choice = ChooseContext(e.model.Config, kvType, int64(len(f.Bytes()))-f.DataOffset-e.model.Repack.InFile, avail)
	alloc := opt.Ctx
	if opt.Ctx <= 0 {
		opt.Ctx = e.choice.Ctx
		alloc = min(opt.Ctx, 4096) // grown on demand
	} else if opt.Ctx != e.choice.Ctx {
		e.choice.Bound = "ctx"
	}
	e.maxCtx = max(opt.Ctx, e.choice.Ctx)
	if opt.Threads <= 0 {
		opt.Threads = DefaultThreads()
	}
	if opt.Batch <= 0 {
		opt.Batch = 64
	}
	opt.Batch = min(opt.Batch, alloc)
	e.opt = opt
	if e.state, err = e.model.NewState(model.StateOptions{Ctx: alloc, MaxCtx: e.maxCtx, Batch: opt.Batch, Threads: opt.Threads, LogitRows: opt.LogitRows, KVType: kvType}); err != nil {
		f.Close()
		return nil, err
	}
	if err := e.initSpec(); err != nil {
		e.Close()
		return nil, err
	}
	if e.opt.Parallel < 0 {
		// Each slot has its own drafter state beside its KV cache.
		ctx := e.opt.Ctx
		if per := e.drafterBytesPerPosition(); per > 0 && e.choice.KVPerTok > 0 {
			ctx += int(int64(ctx) * per / e.choice.KVPerTok)
		}
		e.opt.Parallel = AutoParallel(e.choice, ctx)
	}
	if e.batch, err = e.newBatcher(e.opt.Parallel); err != nil {
		e.Close()
		return nil, err
	}
	e.loadDraftStats()
	if e.selfMode == SelfSpecLoad && e.spec.self == nil {
		if _, err := e.TuneSelfSpec(context.Background(), nil); err != nil {
			e.Close()
			return nil, fmt.Errorf("engine: choosing the skipped-layer draft: %w", err)
		}
	}
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
	if e.batch != nil {
		e.batch.close()
	}
	e.waitSnapshots()
	e.stopTuning()
	e.takeTuned()
	e.saveDraftStats()
	e.state.Close()
	if d := e.spec.draft; d != nil {
		d.close()
	}
	if f := e.spec.nativeFile; f != nil {
		f.Close()
	}
	return e.file.Close()
}

// DefaultThreads is the number of worker threads used when none is given:
// every CPU the process may run on (the boards geist targets have only
// performance cores).
func DefaultThreads() int { return runtime.GOMAXPROCS(0) }

// Template returns the model's compiled chat template (ChatML when the
// file has none).
func (e *Engine) Template() *chat.Template { return e.template }

// Model returns the loaded model.
func (e *Engine) Model() *model.Model { return e.model }

// Tokenizer returns the model's tokenizer.
func (e *Engine) Tokenizer() *tokenizer.Tokenizer { return e.tok }

// Parallel is the most requests decoded together: Options.Parallel
// (bounded by the pass's rows), 1 without batching.
func (e *Engine) Parallel() int {
	if e.batch != nil {
		return len(e.batch.slots)
	}
	return 1
}

// drafterBytesPerPosition is what a position of a batch slot's model
// drafter state takes: the draft model's KV cache, an MTP block's or an
// EAGLE-3 head's cache.
func (e *Engine) drafterBytesPerPosition() int64 {
	var n int64
	if d := e.spec.draft; d != nil {
		n += KVBytesPerToken(d.m.Config, d.s.KVType())
	}
	if d, ok := e.spec.native.(interface{ BytesPerPosition() int64 }); ok {
		n += d.BytesPerPosition()
	}
	return n
}

// AutoParallel is the automatic number of requests decoded together: up
// to 4, as many as KV caches of ctx positions fit in the memory the
// context choice found (ch.MemoryCap), at least 1 (also when the memory
// is unknown).
func AutoParallel(ch ContextChoice, ctx int) int {
	if ctx <= 0 || ch.MemoryCap <= 0 {
		return 1
	}
	return min(max(ch.MemoryCap/ctx, 1), 4)
}

// Ctx is the context of a request that asks for none, in tokens.
func (e *Engine) Ctx() int { return e.opt.Ctx }

// MaxCtx is the most context a request's NumCtx gets.
func (e *Engine) MaxCtx() int { return e.maxCtx }

// ContextChoice is the automatic context choice and what bounds it.
func (e *Engine) ContextChoice() ContextChoice { return e.choice }

// reqCtx is the context of req: its NumCtx up to MaxCtx, or Ctx.
func (e *Engine) reqCtx(req *Request) int {
	if req.NumCtx > 0 {
		return min(req.NumCtx, e.maxCtx)
	}
	return e.opt.Ctx
}

// Request is one generation.
type Request struct {
	// ctx is Generate's: the template's render stops at its cancellation.
	ctx      context.Context
	Prompt   string         // raw prompt, read as it is (used when Messages is empty and Chat is not set)
	Messages []chat.Message // chat messages, rendered with the model's template
	Chat     bool           // render Prompt (and System) as a one-turn chat
	System   string         // system message for Chat
	// Tools are tool definitions (JSON objects) for the chat template's
	// tools variable; TemplateVars further template variables
	// (chat.Options.Extra).
	Tools        []json.RawMessage
	TemplateVars map[string]any
	// History is how many of Messages, after a leading system message, are
	// earlier turns of a conversation. While the prompt is longer than
	// FitTokens, Generate leaves out the oldest of them, a whole exchange
	// (up to and including an assistant message) at a time, and reports
	// how many in Stats.DroppedTurns. The system message and the messages
	// after the history are never left out.
	History int
	// FitTokens is the prompt length history is dropped to reach (0:
	// MaxPromptTokens); a caller that wants room for the answer asks for
	// less than the context.
	FitTokens int
	// MaxPromptTokens refuses longer prompts with ErrPromptTooLong (0, or
	// more than the context takes: the context less one token).
	MaxPromptTokens int
	MaxTokens       int // most tokens to generate (0: until the context is full)
	// NumCtx is the context of this request (Ollama's num_ctx; 0: the
	// engine's Ctx), up to MaxCtx.
	NumCtx   int
	Sampling sample.Params
	Stop     []string // stop strings, besides the end-of-generation tokens
	// OnText receives the generated text as it streams (the slice is reused:
	// copy what you keep). Returning an error stops generation with it;
	// ErrStop stops it as a stop string does, without an error.
	OnText func(text []byte) error
	// OnToken, if set, receives every generated token id.
	OnToken func(id int32)
	// OnPrefill, if set, is called after every prefill pass (and after a
	// prompt-cache restore) with the prompt tokens the state holds so
	// far: a watchdog counts it as progress, as it counts OnToken (the
	// prefill of a long prompt on a slow board takes minutes).
	OnPrefill func(done int)
	// OnPromptProgress, if set, is told what OnPrefill is told and the
	// prompt's length: done of total prompt tokens are in the state (the
	// first call's done were reused from the cache), then total of total
	// when the prefill ends (the last prompt token goes with the first
	// decoding step).
	OnPromptProgress func(done, total int)
	// Spec configures speculative decoding (the zero value: SpecAuto with
	// the defaults).
	Spec SpecOptions
	// Grammar, if set, is a GBNF grammar (see package grammar) every
	// generated token must keep the output in; end-of-generation comes
	// only where it may end. With GrammarTrigger set the grammar applies
	// only after the output's first occurrence of that text (a lazy
	// grammar: a tool call's opening); where a lazy grammar may end, a
	// token it does not allow ends it and free text follows, until the
	// trigger starts it again (text after a tool call, then another).
	Grammar        string
	GrammarTrigger string
	// Parsed, if set, is the grammar already parsed (engine/constraint's
	// Compiled.Grammar, made on the request's goroutine before it was
	// queued): it is bound to the vocabulary as it is, and Grammar is
	// only its text (for logs and tests), not parsed again.
	Parsed *grammar.Grammar
	// GrammarAfterThink lets a thinking model think first: on a model
	// with a <think> token, the answer may open with a thinking block
	// (or the prompt opened one), and the grammar applies after its
	// </think> (a lazy one waits for its trigger from there). Before
	// <think> or the grammar's text the answer may hold a little blank
	// space the grammar does not allow, 8 bytes at most (openingBlank).
	GrammarAfterThink bool
}

// Stats describe one generation.
type Stats struct {
	PromptTokens    int     `json:"prompt_tokens"`
	GeneratedTokens int     `json:"generated_tokens"`
	TTFTms          float64 `json:"ttft_ms"`
	PrefillTokS     float64 `json:"prefill_tok_s"`
	DecodeTokS      float64 `json:"decode_tok_s"`
	StopReason      string  `json:"stop_reason"`             // "eos", "stop", "length", "context"
	ReusedTokens    int     `json:"reused_tokens"`           // prompt tokens whose KV state was reused (held in memory or restored)
	RestoredTokens  int     `json:"restored_tokens"`         // of ReusedTokens, those restored from the prompt cache
	EvaluatedTokens int     `json:"evaluated_tokens"`        // prompt tokens the model evaluated: PromptTokens - ReusedTokens
	RestoreMS       float64 `json:"restore_ms,omitempty"`    // the time the prompt-cache lookup and restore took
	DroppedTurns    int     `json:"dropped_turns,omitempty"` // oldest turns left out to fit the context

	// Speculative decoding: forward passes of the target model while
	// decoding, those that verified drafted tokens (tree passes), drafted
	// tokens verified (tree nodes) and accepted, tokens per pass, the mean
	// tree size and accepted depth of the tree passes, the deepest
	// accepted path, each drafter's counts, and the blocks the
	// skipped-layer draft skips.
	TargetPasses      int                     `json:"target_passes"`
	TreePasses        int                     `json:"tree_passes"`
	Drafted           int                     `json:"drafted"`
	Accepted          int                     `json:"accepted"`
	TokensPerPass     float64                 `json:"tokens_per_pass"`
	MeanTreeSize      float64                 `json:"mean_tree_size"`
	MeanAcceptedDepth float64                 `json:"mean_accepted_depth"`
	MaxAcceptedDepth  int                     `json:"max_accepted_depth"`
	Drafters          map[string]DrafterStats `json:"drafters,omitempty"`
	SelfSkip          string                  `json:"self_skip,omitempty"`

	passSec float64 // seconds of the target's decoding passes
}

// DrafterStats count one drafter's proposals: nodes verified, nodes
// accepted, their ratio, and the passes that verified any of them.
type DrafterStats struct {
	Drafted    int     `json:"drafted"`
	Accepted   int     `json:"accepted"`
	Acceptance float64 `json:"acceptance"`
	Steps      int     `json:"steps"`
	// For a drafter that runs a model: the mean milliseconds of one of
	// its draft passes, that as a share of a target pass (cost per
	// draft), and the tokens each target pass that verified its drafts
	// emitted.
	DraftMS       float64 `json:"draft_ms,omitempty"`
	CostPerDraft  float64 `json:"cost_per_draft,omitempty"`
	TokensPerPass float64 `json:"tokens_per_pass,omitempty"`

	draftSec  float64 // seconds spent drafting
	draftRuns int     // draft passes run
}

// finish computes the derived figures of speculative decoding, naming
// every drafter that had tokens verified.
func (st *Stats) finish(drafters []spec.Drafter, ds []DrafterStats) {
	if st.TargetPasses > 0 {
		st.TokensPerPass = float64(st.TargetPasses+st.Accepted) / float64(st.TargetPasses)
	}
	if st.TreePasses > 0 {
		st.MeanTreeSize = float64(st.Drafted) / float64(st.TreePasses)
		st.MeanAcceptedDepth = float64(st.Accepted) / float64(st.TreePasses)
	}
	for i, d := range drafters {
		if d == nil || ds[i].Steps == 0 {
			continue
		}
		if st.Drafters == nil {
			st.Drafters = make(map[string]DrafterStats, len(drafters))
		}
		s := ds[i]
		s.Acceptance = float64(s.Accepted) / float64(s.Drafted)
		s.TokensPerPass = float64(s.Steps+s.Accepted) / float64(s.Steps)
		if s.draftRuns > 0 {
			s.DraftMS = 1000 * s.draftSec / float64(s.draftRuns)
			if st.passSec > 0 {
				s.CostPerDraft = s.draftSec / float64(s.draftRuns) / (st.passSec / float64(st.TargetPasses))
			}
		}
		st.Drafters[d.Name()] = s
	}
}

// messages returns the chat messages of req, or nil for a raw prompt.
func (req *Request) messages() []chat.Message {
	if len(req.Messages) > 0 || !req.Chat {
		return req.Messages
	}
	var msgs []chat.Message
	if req.System != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: req.System})
	}
	return append(msgs, chat.Message{Role: "user", Content: req.Prompt})
}

func (e *Engine) renderMessages(req *Request, msgs []chat.Message, addGen bool) (string, error) {
	if e.opt.StablePrefix {
		msgs = stablePrefix(msgs)
	}
	opt := chat.Options{AddGenerationPrompt: addGen, Tools: req.Tools, Extra: req.TemplateVars, Context: req.ctx}
	if id := e.tok.BOS(); id >= 0 {
		opt.BOS = e.tok.TokenText(id)
	}
	if id := e.tok.EOS(); id >= 0 {
		opt.EOS = e.tok.TokenText(id)
	}
	e.counts.renders++
	return e.template.Render(msgs, opt)
}

// encode tokenizes text as generation reads it: special-token text
// parsed, BOS as the vocab says.
func (e *Engine) encode(text string) []int32 {
	e.counts.encodes++
	return e.tok.Encode(text, true, true)
}

// Tokens tokenizes the prompt of req as generation reads it (the whole
// prompt: no history is left out).
func (e *Engine) Tokens(req *Request) ([]int32, error) {
	msgs := req.messages()
	if len(msgs) == 0 {
		return e.encode(req.Prompt), nil
	}
	text, err := e.renderMessages(req, msgs, true)
	if err != nil {
		return nil, err
	}
	return e.encode(text), nil
}

// prompt renders and tokenizes the prompt of req once, and again only
// when history must be left out to fit: then as often as exchanges are
// dropped. It returns the tokens, the messages rendered (nil for a raw
// prompt) and how many history messages were left out.
func (e *Engine) prompt(req *Request) (toks []int32, msgs []chat.Message, dropped int, err error) {
	limit := e.reqCtx(req) - 1
	if req.MaxPromptTokens > 0 {
		limit = min(limit, req.MaxPromptTokens)
	}
	fit := limit
	if req.FitTokens > 0 {
		fit = min(fit, req.FitTokens)
	}
	msgs = req.messages()
	if len(msgs) == 0 {
		toks = e.encode(req.Prompt)
	} else {
		sys := 0
		if msgs[0].Role == "system" {
			sys = 1
		}
		history := min(max(req.History, 0), len(msgs)-sys)
		for {
			kept := msgs
			if dropped > 0 {
				kept = append(append(make([]chat.Message, 0, len(msgs)-dropped), msgs[:sys]...), msgs[sys+dropped:]...)
			}
			text, err := e.renderMessages(req, kept, true)
			if err != nil {
				return nil, nil, dropped, err
			}
			toks = e.encode(text)
			if len(toks) <= fit || dropped == history {
				msgs = kept
				break
			}
			// Leave out the oldest exchange: messages up to and including
			// the next assistant message.
			dropped++
			for dropped < history && msgs[sys+dropped-1].Role != "assistant" {
				dropped++
			}
		}
	}
	if len(toks) == 0 {
		return nil, nil, dropped, errors.New("engine: empty prompt")
	}
	if len(toks) > limit {
		return toks, nil, dropped, e.tooLong(req, len(toks), limit)
	}
	return toks, msgs, dropped, nil
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
	if len(tokens) > e.maxCtx {
		return nil, fmt.Errorf("%w: %d tokens do not fit the context of %d (--ctx raises it)", ErrPromptTooLong, len(tokens), e.maxCtx)
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

// tooLong says how many tokens a prompt has, how many fit, and what
// raises the limit: the request's num_ctx while it is below the cap,
// --ctx / ctx in the config beyond it.
func (e *Engine) tooLong(req *Request, n, limit int) error {
	if req.MaxPromptTokens > 0 && limit == req.MaxPromptTokens && limit < e.reqCtx(req)-1 {
		return fmt.Errorf("%w: %d prompt tokens, at most %d fit (the request's limit on prompt tokens)", ErrPromptTooLong, n, limit)
	}
	if ctx := e.reqCtx(req); ctx < e.maxCtx {
		return fmt.Errorf("%w: %d prompt tokens, at most %d fit in a context of %d: send a larger num_ctx (up to %d), or raise the default with --ctx or ctx in the config", ErrPromptTooLong, n, limit, ctx, e.maxCtx)
	}
	return fmt.Errorf("%w: %d prompt tokens, at most %d fit in a context of %d: raise it with --ctx or ctx in the config (ctx = \"auto\" takes what the model and the memory allow: %d)", ErrPromptTooLong, n, limit, e.maxCtx, max(e.choice.Ctx, e.choice.MemoryCap))
}

// CheckModelFile reports, in Load's words, a model file that cannot be
// opened (commands check it before they open anything else).
func CheckModelFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return modelFileError(path, err)
	}
	return f.Close()
}

// modelError names the model file and says what is wrong with it in the
// user's words: without the package prefixes of the layers below (the
// error still wraps theirs).
func modelError(path string, err error) error {
	msg := err.Error()
	for {
		trimmed := msg
		for _, p := range []string{"gguf: ", "model: ", "tokenizer: ", "quant: "} {
			trimmed = strings.TrimPrefix(trimmed, p)
		}
		if trimmed == msg {
			break
		}
		msg = trimmed
	}
	return &wordedError{msg: "model " + path + ": " + msg, err: err}
}

// wordedError is err with a message of its own.
type wordedError struct {
	msg string
	err error
}

func (w *wordedError) Error() string { return w.msg }
func (w *wordedError) Unwrap() error { return w.err }

// modelFileError names a model file that cannot be opened in the user's
// words.
func modelFileError(path string, err error) error {
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("model %s: no such file (geist models list shows the models pulled; -m takes a name or a path)", path)
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("model %s: permission denied", path)
	}
	return fmt.Errorf("model %s: %v", path, err)
}
