package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/daemon"
	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/sample"
)

// modelFlags are the flags every command that loads a model shares.
type modelFlags struct {
	kvType     string
	path       string
	threads    int
	ctx        int
	draftModel string
	denseHead  bool
	draftVocab int
	selfSpec   string
	repack     string
	cache      engine.PromptCache
	log        *slog.Logger
	onLoad     func(done, total int64) // the load's progress (engine.Options.OnLoadProgress)
}

func (m *modelFlags) register(fs interface {
	StringVar(*string, string, string, string)
	StringVarP(*string, string, string, string, string)
	IntVarP(*int, string, string, int, string)
	IntVar(*int, string, int, string)
}) {
	fs.StringVarP(&m.path, "model", "m", "", "GGUF model file")
	fs.IntVarP(&m.threads, "threads", "t", 0, "threads for matrix products (0: all performance cores)")
	fs.IntVar(&m.ctx, "ctx", 0, "context size in tokens (0: the model's, at most 4096)")
	fs.StringVar(&m.kvType, "kv-type", "f16", "KV cache type: f16 or q8_0 (half the memory, slightly less exact)")
	fs.StringVar(&m.repack, "repack-budget", engine.RepackAuto, cli.RepackHelp)
}

func (m *modelFlags) load() (*engine.Engine, error) {
	if m.path == "" {
		return nil, cli.Usagef("no model given (-m MODEL)")
	}
	if m.threads < 0 {
		return nil, cli.Usagef("--threads %d must not be negative", m.threads)
	}
	if m.ctx < 0 {
		return nil, cli.Usagef("--ctx %d must not be negative", m.ctx)
	}
	return engine.Load(m.path, engine.Options{Threads: m.threads, Ctx: m.ctx, DraftModel: m.draftModel, DenseHead: m.denseHead, DraftVocab: m.draftVocab, SelfSpec: m.selfSpec,
		Cache: m.cache, Logger: m.log, KVType: m.kvType, RepackBudget: m.repack, OnLoadProgress: m.onLoad})
}

func cmdRun(ctx context.Context, e *cli.Env, args []string) error {
	fs := cli.NewFlags(e, "run", "run -m MODEL [flags] PROMPT")
	var mf modelFlags
	mf.register(fs)
	def := sample.DefaultParams()
	temp := fs.Float32("temp", def.Temperature, "temperature (0: greedy)")
	topK := fs.Int("top-k", def.TopK, "top-k sampling (0: off)")
	topP := fs.Float32("top-p", def.TopP, "top-p (nucleus) sampling (1: off)")
	minP := fs.Float32("min-p", def.MinP, "min-p sampling (0: off)")
	rep := fs.Float32("repeat-penalty", def.RepeatPenalty, "repetition penalty (1: off)")
	repN := fs.Int("repeat-last-n", def.RepeatLastN, "tokens the repetition penalty looks back on")
	pres := fs.Float32("presence-penalty", 0, "presence penalty (0: off)")
	seed := fs.Int64("seed", -1, "random seed (-1: random)")
	n := fs.IntP("n-predict", "n", -1, "tokens to generate (-1: until end of text or context)")
	chatMode := fs.Bool("chat", false, "render the model's chat template around the prompt")
	system := fs.String("system", "", "system message (with --chat)")
	stats := fs.Bool("stats", false, "print statistics as one JSON line on stderr at the end")
	stops := fs.StringArray("stop", nil, "stop string (repeatable)")
	var sf specFlags
	sf.register(fs)
	df := dataFlags{sessionHelp: "continue the conversation NAME (implies --chat)"}
	df.register(fs)
	var gf cli.GrammarFlags
	gf.Register(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	so, err := sf.options()
	if err != nil {
		return err
	}
	con, err := gf.Load()
	if err != nil {
		return err
	}
	if fs.NArg() == 0 && *chatMode {
		// geist run --chat without a prompt: the interactive chat.
		mf.draftModel = sf.draftModel
		p := sample.Params{Temperature: *temp, TopK: *topK, TopP: *topP, MinP: *minP, RepeatPenalty: *rep, Seed: uint64(max(*seed, 0))}
		if err := p.Validate(); err != nil {
			return cli.UsageError{Err: err}
		}
		return chatFromRun(ctx, e, mf, df, p, *seed >= 0, *system, *n)
	}
	if fs.NArg() != 1 {
		return cli.Usagef("want exactly one PROMPT argument (- reads stdin; geist chat, or run --chat without one, chats), got %d", fs.NArg())
	}
	prompt := fs.Arg(0)
	if prompt == "-" {
		b, err := io.ReadAll(e.Stdin)
		if err != nil {
			return fmt.Errorf("reading the prompt from stdin: %w", err)
		}
		prompt = string(b)
	}
	if *n < -1 {
		return cli.Usagef("-n %d must be -1 or more", *n)
	}
	if df.session != "" {
		*chatMode = true
	}
	if *system != "" && !*chatMode {
		return cli.Usagef("--system needs --chat")
	}
	if df.cacheSize < 0 {
		return cli.Usagef("--cache-size %d must not be negative", df.cacheSize)
	}
	p := sample.Params{Temperature: *temp, TopK: *topK, TopP: *topP, MinP: *minP,
		RepeatPenalty: *rep, RepeatLastN: *repN, PresencePenalty: *pres}
	if *seed < 0 {
		p.Seed = uint64(time.Now().UnixNano())
	} else {
		p.Seed = uint64(*seed)
	}
	if err := p.Validate(); err != nil {
		return cli.UsageError{Err: errors.New(strings.TrimPrefix(err.Error(), "sample: invalid parameters: "))}
	}
	if math.IsNaN(float64(*temp)) {
		return cli.Usagef("--temp must be a number")
	}
	mf.draftModel, mf.selfSpec, mf.denseHead, mf.draftVocab = sf.draftModel, sf.selfSpec, sf.denseHead, sf.draftVocab
	if so.Mode == engine.SpecSelf && sf.selfSpec == engine.SelfSpecAuto {
		mf.selfSpec = engine.SelfSpecLoad // unless a choice was persisted: the request needs one now
	}
	log := slog.New(slog.NewTextHandler(e.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if mf.path != "" {
		// A wrong path is reported before anything else is opened.
		if err := engine.CheckModelFile(mf.path); err != nil {
			return err
		}
	}
	turn := []appliance.Message{{Role: "user", Content: prompt}}
	conv, closeData, err := df.openRun(&mf, *system, log)
	if err != nil {
		return err
	}
	defer closeData()
	mf.log = log
	ll := newPromptLine(e.Stderr)
	mf.onLoad = ll.loading
	eng, err := mf.load()
	ll.clear()
	if err != nil {
		return err
	}
	defer eng.Close()
	if *n == 0 {
		return nil
	}
	out := bufio.NewWriter(e.Stdout)
	var last byte = '\n' // the last byte written: the output ends with a newline
	pl := newPromptLine(e.Stderr)
	defer pl.clear()
	req := engine.Request{
		OnPromptProgress: pl.update,
		Prompt:           prompt,
		Chat:             *chatMode,
		System:           *system,
		MaxTokens:        max(*n, 0),
		Sampling:         p,
		Stop:             *stops,
		Spec:             so,
		Grammar:          cli.Source(con), // with Parsed: the engine does not parse it again
		OnText: func(b []byte) error {
			if len(b) == 0 {
				return nil
			}
			pl.clear()
			last = b[len(b)-1]
			if _, err := out.Write(b); err != nil {
				return err
			}
			return out.Flush()
		},
	}
	if con != nil {
		req.Parsed = con.Grammar
	}
	ans := appliance.NewAnswerSplit(eng.Template().ThinkMarks())
	var content strings.Builder
	if conv != nil {
		// Leave room for the answer: drop history until the prompt fits
		// in what remains.
		room := *n
		if room <= 0 {
			room = eng.Ctx() / 4
		}
		req.Messages, req.History = conv.Messages(turn, 0)
		req.FitTokens = max(eng.Ctx()-room, 1)
		text := req.OnText
		req.OnText = func(b []byte) error {
			_, co := ans.Text(string(b))
			content.WriteString(co)
			return text(b)
		}
		req.OnToken = ans.Token
	}
	st, err := eng.Generate(ctx, req)
	// Like ollama, end the output with a newline (on a terminal and in a
	// pipe alike) unless the text ended with one, also when interrupted,
	// so that the shell prompt or the next line starts on a line of its own.
	if last != '\n' {
		out.WriteByte('\n')
	}
	out.Flush()
	if conv != nil && err == nil {
		// The conversation keeps the content and its token ids, as the
		// core does: a thinking block is left out.
		_, co := ans.Flush()
		content.WriteString(co)
		a := appliance.Message{Role: "assistant", Content: content.String(), Tokens: ans.ContentTokens()}
		if err := conv.Save(turn, a); err != nil {
			return fmt.Errorf("saving the conversation: %w", err)
		}
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted")
		}
		return err
	}
	if *stats {
		b, _ := json.Marshal(st)
		fmt.Fprintf(e.Stderr, "%s\n", b)
	}
	return nil
}

// openRun opens what a run keeps in the data directory: with --session
// the conversation, the core's (its store, bounds, system message and
// saving: appliance.Conversation, as chat and serve keep it), and the
// prompt cache (into mf). close closes them.
func (df *dataFlags) openRun(mf *modelFlags, system string, log *slog.Logger) (conv *appliance.Conversation, close func(), err error) {
	if df.session == "" {
		if pid, ok := daemon.Running(df.dir); ok && df.cacheSize > 0 {
			// The daemon holds cache.db: ask it (cmd/internal/daemon/cacheshare.go).
			if dc := daemon.DialCache(df.dir, pid, df.cacheSize, log); dc != nil {
				mf.cache = dc
			}
			return nil, func() {}, nil
		}
		cache := df.openCache(log)
		if cache == nil {
			return nil, func() {}, nil
		}
		mf.cache = cache
		return nil, func() { cache.Close() }, nil
	}
	if err := appliance.CheckID("session", df.session); err != nil {
		return nil, nil, cli.UsageError{Err: err}
	}
	store, err := df.openStore(mf.path, log)
	if err != nil {
		return nil, nil, err
	}
	if conv, err = appliance.OpenConversation(store.Sessions, df.session, system, ""); err != nil {
		store.Close()
		return nil, nil, fmt.Errorf("reading the conversation: %w", err)
	}
	mf.cache = store.Cache
	return conv, func() { store.Close() }, nil
}

// specFlags are the speculative decoding flags of run and bench.
type specFlags struct {
	mode               string
	draftModel         string
	denseHead          bool
	draftVocab         int
	draftMax           int
	ngramMin, ngramMax int
	fixed              bool
	chains             bool
	costSlope          float64
	selfSpec           string
}

func (f *specFlags) register(fs interface {
	StringVar(*string, string, string, string)
	IntVar(*int, string, int, string)
	BoolVar(*bool, string, bool, string)
	Float64Var(*float64, string, float64, string)
}) {
	fs.StringVar(&f.mode, "spec", "auto", "speculative decoding: auto, off, lookup, draft, self (the model with blocks skipped), assistant (a Gemma 4 assistant as --draft-model), eagle3 (an EAGLE-3 head as --draft-model) or mtp (the model file's own next-token prediction block, Qwen3.5 MTP files)")
	fs.BoolVar(&f.denseHead, "dense-head", false, "draft with a Gemma 4 assistant's dense output head even when its file has the sparse centroid head")
	fs.IntVar(&f.draftVocab, "draft-vocab", 0, "the MTP drafter (--spec mtp) scores only token ids below N: its output head costs N rows instead of the vocabulary (0: every token)")
	fs.BoolVar(&f.chains, "spec-chains", false, "draft one chain per step instead of a token tree")
	fs.StringVar(&f.selfSpec, "self-spec", "auto", "when to choose the blocks the skipped-layer draft skips, if none was saved: auto (in the background after a request), load, or off")
	fs.StringVar(&f.draftModel, "draft-model", "", "smaller GGUF with the same vocabulary that drafts tokens")
	fs.IntVar(&f.draftMax, "draft-max", 8, "most tokens drafted per step")
	fs.IntVar(&f.ngramMin, "ngram-min", 1, "shortest suffix prompt lookup matches")
	fs.IntVar(&f.ngramMax, "ngram-max", 4, "longest suffix prompt lookup matches")
	fs.BoolVar(&f.fixed, "spec-fixed", false, "verify every drafted token (no adaptive control; for measurements)")
	fs.Float64Var(&f.costSlope, "spec-cost", 0, "plan drafting with the verification cost c(k) = 1 + SLOPE·(k-1) instead of measured times (0: measure; for studying acceptance as on a memory-bound board)")
}

func (f *specFlags) options() (engine.SpecOptions, error) {
	mode, err := engine.ParseSpecMode(f.mode)
	if err != nil {
		return engine.SpecOptions{}, cli.UsageError{Err: err}
	}
	switch {
	case f.costSlope < 0 || f.costSlope > 1:
		return engine.SpecOptions{}, cli.Usagef("--spec-cost %g must be in [0, 1]", f.costSlope)
	case f.draftVocab < 0:
		return engine.SpecOptions{}, cli.Usagef("--draft-vocab %d must not be negative", f.draftVocab)
	case f.draftMax < 1 || f.draftMax > 32:
		return engine.SpecOptions{}, cli.Usagef("--draft-max %d must be in [1, 32]", f.draftMax)
	case f.ngramMin < 1 || f.ngramMax < f.ngramMin || f.ngramMax > 16:
		return engine.SpecOptions{}, cli.Usagef("--ngram-min %d and --ngram-max %d must satisfy 1 <= min <= max <= 16", f.ngramMin, f.ngramMax)
	case (mode == engine.SpecDraft || mode == engine.SpecAssistant || mode == engine.SpecEagle3) && f.draftModel == "":
		return engine.SpecOptions{}, cli.Usagef("--spec %s needs --draft-model FILE", mode)
	case mode == engine.SpecSelf && f.selfSpec == engine.SelfSpecOff:
		return engine.SpecOptions{}, cli.Usagef("--spec self needs the skipped-layer draft (--self-spec auto or load)")
	}
	switch f.selfSpec {
	case engine.SelfSpecAuto, engine.SelfSpecLoad, engine.SelfSpecOff:
	default:
		return engine.SpecOptions{}, cli.Usagef("--self-spec %q: want auto, load or off", f.selfSpec)
	}
	return engine.SpecOptions{Mode: mode, DraftMax: f.draftMax, NgramMin: f.ngramMin, NgramMax: f.ngramMax, Fixed: f.fixed,
		Chains: f.chains, CostSlope: f.costSlope}, nil
}
