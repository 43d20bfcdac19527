package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/engine/sample"
	"github.com/geisten/geist/engine/spec"
	"github.com/geisten/geist/engine/tokenizer"
)

// SpecMode selects speculative decoding.
type SpecMode string

// Speculative decoding modes.
const (
	SpecAuto   SpecMode = "auto"   // lookup + n-gram cache (+ draft model) under adaptive control
	SpecOff    SpecMode = "off"    // plain decoding
	SpecLookup SpecMode = "lookup" // prompt lookup only
	SpecDraft  SpecMode = "draft"  // the draft model only
)

// ParseSpecMode checks a mode name.
func ParseSpecMode(s string) (SpecMode, error) {
	switch m := SpecMode(s); m {
	case SpecAuto, SpecOff, SpecLookup, SpecDraft:
		return m, nil
	}
	return "", fmt.Errorf("engine: unknown speculation mode %q (want auto, off, lookup or draft)", s)
}

// SpecOptions configure speculative decoding for one request.
type SpecOptions struct {
	Mode     SpecMode // "" means SpecAuto
	DraftMax int      // most tokens drafted per step (0: 8)
	NgramMin int      // shortest suffix prompt lookup matches (0: 1)
	NgramMax int      // longest (0: 4)
	// Drafter, if set, replaces the configured drafters (benchmarks use an
	// oracle drafter).
	Drafter spec.Drafter
	// Fixed disables adaptive control: every step verifies all drafted
	// tokens (for measurements).
	Fixed bool
	// CostSlope, when > 0, makes adaptive control plan with the verification
	// cost c(k) = 1 + CostSlope·(k−1) instead of measured pass times: to see
	// what drafting does where verification is cheap (a memory-bound board)
	// on a machine or model where it is not.
	CostSlope float64
	// BreakAcceptance is a test-only switch that deliberately breaks the
	// speculative sampling rule (accepts every drafted token), so tests can
	// show that their statistics detect a wrong rule.
	BreakAcceptance bool
}

// Drafter indexes in the controller's tables.
const (
	idxLookup = iota
	idxNgram
	idxDraft
	idxCustom
)

// specState is what speculation keeps across requests: the n-gram
// statistics, the controller's measurements and the draft model.
type specState struct {
	ngram *spec.NgramCache
	ctrl  *spec.Controller
	draft *draftModel
	buf   []int32 // the current draft
	batch []int32 // the token to feed and its draft
}

func (e *Engine) initSpec() error {
	e.spec.ngram = spec.NewNgramCache(3, 1<<16)
	e.spec.ctrl = spec.NewController(spec.MaxDraft)
	e.spec.buf = make([]int32, 0, spec.MaxDraft)
	e.spec.batch = make([]int32, 0, spec.MaxDraft+1)
	if e.opt.DraftModel == "" {
		return nil
	}
	d, err := loadDraft(e.opt.DraftModel, e)
	if err != nil {
		return err
	}
	e.spec.draft = d
	return nil
}

// draftModel drafts greedily with a smaller model that shares the target's
// vocabulary. It keeps its own KV cache in step with the history.
type draftModel struct {
	file *gguf.File
	m    *model.Model
	s    *model.State
}

func loadDraft(path string, target *Engine) (*draftModel, error) {
	tok, f, err := LoadVocab(path)
	if err != nil {
		return nil, fmt.Errorf("engine: draft model: %w", err)
	}
	if err := sameVocab(tok, target.tok); err != nil {
		f.Close()
		return nil, fmt.Errorf("engine: draft model %s: %w", path, err)
	}
	m, err := model.Load(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("engine: draft model: %w", err)
	}
	s, err := m.NewState(model.StateOptions{Ctx: target.opt.Ctx, Batch: target.opt.Batch, Threads: target.opt.Threads, KVType: target.state.KVType()})
	if err != nil {
		f.Close()
		return nil, err
	}
	return &draftModel{file: f, m: m, s: s}, nil
}

func sameVocab(a, b *tokenizer.Tokenizer) error {
	if a.NTokens() != b.NTokens() {
		return fmt.Errorf("vocabulary of %d tokens, the target has %d", a.NTokens(), b.NTokens())
	}
	for id := int32(0); id < int32(a.NTokens()); id++ {
		if a.TokenText(id) != b.TokenText(id) {
			return fmt.Errorf("token %d is %q, in the target %q", id, a.TokenText(id), b.TokenText(id))
		}
	}
	return nil
}

func (d *draftModel) close() {
	d.s.Close()
	d.file.Close()
}

// Name implements spec.Drafter.
func (d *draftModel) Name() string { return "draft" }

// Draft implements spec.Drafter: it brings its cache up to the history
// (reusing the common prefix) and continues greedily.
func (d *draftModel) Draft(history []int32, max int, dst []int32) ([]int32, int) {
	dst = dst[:0]
	if max <= 0 || len(history) == 0 {
		return dst, 0
	}
	max = min(max, d.s.Ctx()-len(history))
	if max <= 0 {
		return dst, 0
	}
	lcp := commonPrefix(d.s.Tokens(), history)
	if lcp == len(history) {
		lcp-- // the last token must run again for its logits
	}
	d.s.Truncate(lcp)
	logits, err := d.s.Forward(history[lcp:], false)
	if err != nil {
		d.s.Truncate(0)
		return dst, 0
	}
	for {
		t := sample.Greedy(logits)
		dst = append(dst, t)
		if len(dst) == max {
			return dst, 0
		}
		if logits, err = d.s.Forward([]int32{t}, false); err != nil {
			return dst, 0
		}
	}
}

func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// prefill brings the KV state to toks, reusing the longest common prefix
// with what the state already holds, and returns the number of reused
// tokens. (Generation prefills all but the last prompt token: that one runs
// in the first decoding step, together with a draft.)
func (e *Engine) prefill(ctx context.Context, toks []int32) (int, error) {
	s := e.state
	reuse := commonPrefix(s.Tokens(), toks)
	s.Truncate(reuse)
	reuse = e.restore(toks, reuse)
	for i := reuse; i < len(toks); i += s.MaxBatch() {
		if err := ctx.Err(); err != nil {
			return reuse, err
		}
		if _, err := s.Forward(toks[i:min(i+s.MaxBatch(), len(toks))], false); err != nil {
			return reuse, err
		}
	}
	return reuse, nil
}

// Generate runs req to completion, streaming text through req.OnText. With
// speculation on, drafted tokens are verified in one batched pass and each
// emitted token is exactly what plain decoding emits: the same token under
// greedy decoding, the same distribution when sampling.
func (e *Engine) Generate(ctx context.Context, req Request) (Stats, error) {
	var st Stats
	prompt, msgs, dropped, err := e.prompt(&req)
	st.PromptTokens, st.DroppedTurns = len(prompt), dropped
	if err != nil {
		return st, err
	}
	smp, err := sample.New(req.Sampling, e.model.NVocab)
	if err != nil {
		return st, err
	}
	sp := req.Spec
	if sp.Mode == "" {
		sp.Mode = SpecAuto
	}
	if sp.Mode == SpecDraft && e.spec.draft == nil && sp.Drafter == nil {
		return st, errors.New("engine: speculation mode draft needs a draft model")
	}
	if sp.DraftMax <= 0 {
		sp.DraftMax = 8
	}
	sp.DraftMax = min(sp.DraftMax, spec.MaxDraft, e.state.MaxLogitRows()-1)
	lookup := spec.NewLookup(max(sp.NgramMin, 1), max(sp.NgramMax, sp.NgramMin, 4))

	start := time.Now()
	reused, err := e.prefill(ctx, prompt[:len(prompt)-1])
	if err != nil {
		return st, err
	}
	st.ReusedTokens = reused
	if n := len(prompt) - 1 - reused; n > 0 {
		st.PrefillTokS = float64(n) / time.Since(start).Seconds()
	}

	g := generation{e: e, req: &req, st: &st, smp: smp, sp: &sp, lookup: lookup,
		dec: e.tok.NewDecoder(), stop: sample.NewStopMatcher(req.Stop)}
	g.history = make([]int32, 0, e.opt.Ctx)
	g.history = append(g.history, prompt...)
	g.maxTok = e.opt.Ctx - len(prompt)
	if req.MaxTokens > 0 {
		g.maxTok = min(g.maxTok, req.MaxTokens)
	}
	g.start = start
	err = g.run(ctx, prompt[len(prompt)-1])
	if err == nil {
		err = g.flush()
	}
	if st.GeneratedTokens > 1 {
		st.DecodeTokS = float64(st.GeneratedTokens-1) / time.Since(g.decodeStart).Seconds()
	}
	if st.TargetPasses > 0 {
		st.TokensPerPass = float64(st.TargetPasses+st.Accepted) / float64(st.TargetPasses)
	}
	if len(g.drafters) > 0 {
		st.Drafters = make(map[string]DrafterStats, len(g.drafters))
		for i, d := range g.drafters {
			if d != nil && g.dstats[i].Steps > 0 {
				st.Drafters[d.Name()] = g.dstats[i]
			}
		}
	}
	if sp.Mode != SpecOff && (err == nil || errors.Is(err, context.Canceled)) {
		e.spec.ngram.Observe(g.history)
	}
	if err == nil {
		// Keep the prefixes worth a restore: the system prompt and the
		// whole conversation so far.
		if k := e.keepPrefix(&req, msgs, prompt); k > 0 && k < len(prompt) {
			e.snapshot(k)
		}
		e.snapshot(e.state.Len())
	}
	return st, err
}

// generation is the state of one Generate call.
type generation struct {
	e      *Engine
	req    *Request
	st     *Stats
	smp    *sample.Sampler
	sp     *SpecOptions
	lookup *spec.Lookup
	dec    *tokenizer.Decoder
	stop   *sample.StopMatcher

	history     []int32
	maxTok      int
	start       time.Time
	decodeStart time.Time
	done        bool // an end condition was reached
	stopped     bool // by a stop string (no flush)

	drafters  [4]spec.Drafter
	dstats    [4]DrafterStats
	lastClass int
	streak    bool // the last verified draft was accepted whole
}

// emit appends an accepted or sampled token to the output and reports
// whether generation is over.
func (g *generation) emit(id int32) error {
	st := g.st
	st.GeneratedTokens++
	if st.GeneratedTokens == 1 {
		g.decodeStart = time.Now()
		st.TTFTms = float64(g.decodeStart.Sub(g.start).Microseconds()) / 1000
	}
	g.history = append(g.history, id)
	if g.e.tok.IsEOG(id) {
		st.StopReason, g.done = "eos", true
		return nil
	}
	if g.req.OnToken != nil {
		g.req.OnToken(id)
	}
	out, stopped := g.stop.Feed(g.dec.Add(id))
	if err := g.text(out); err != nil {
		return err
	}
	if stopped {
		st.StopReason, g.done, g.stopped = "stop", true, true
		return nil
	}
	if st.GeneratedTokens >= g.maxTok {
		st.StopReason, g.done = "length", true
		if len(g.history) >= g.e.opt.Ctx {
			st.StopReason = "context"
		}
	}
	return nil
}

func (g *generation) text(b []byte) error {
	if len(b) == 0 || g.req.OnText == nil {
		return nil
	}
	return g.req.OnText(b)
}

func (g *generation) flush() error {
	if g.stopped {
		return nil
	}
	out, _ := g.stop.Feed(g.dec.Flush())
	if err := g.text(out); err != nil {
		return err
	}
	return g.text(g.stop.Flush())
}

// draft asks the drafters the mode allows, in order of cost, and returns
// the draft the controller wants verified (possibly empty).
func (g *generation) draft(room int) ([]int32, int) {
	sp, sps := g.sp, &g.e.spec
	ctrl := sps.ctrl
	if sp.Mode == SpecOff || room <= 0 {
		return nil, -1
	}
	if sp.Drafter != nil {
		g.drafters[idxCustom] = sp.Drafter
		return g.try(idxCustom, sp.Drafter, room)
	}
	if sp.Mode == SpecAuto || sp.Mode == SpecLookup {
		g.drafters[idxLookup] = g.lookup
		if d, i := g.try(idxLookup, g.lookup, room); len(d) > 0 {
			return d, i
		}
	}
	if sp.Mode == SpecAuto {
		g.drafters[idxNgram] = sps.ngram
		if d, i := g.try(idxNgram, sps.ngram, room); len(d) > 0 {
			return d, i
		}
	}
	if (sp.Mode == SpecAuto || sp.Mode == SpecDraft) && sps.draft != nil {
		g.drafters[idxDraft] = sps.draft
		// A model drafter costs a pass per token: ask the controller first
		// with what the draft's acceptance promises.
		k := room
		if !sp.Fixed {
			k = ctrl.Decide(idxDraft, 0, room)
		}
		if k == 0 {
			return nil, -1
		}
		t0 := time.Now()
		d, _ := sps.draft.Draft(g.history, k, sps.buf)
		g.dstats[idxDraft].Steps++
		g.lastClass = 0
		ctrl.ObserveDraftTime(idxDraft, len(d), time.Since(t0).Seconds())
		return d, idxDraft
	}
	return nil, -1
}

// try drafts with d and trims the draft to what the controller accepts.
func (g *generation) try(idx int, d spec.Drafter, room int) ([]int32, int) {
	draft, class := d.Draft(g.history, room, g.e.spec.buf)
	if len(draft) == 0 {
		return nil, -1
	}
	class = g.classOf(class)
	k := len(draft)
	if !g.sp.Fixed {
		k = g.e.spec.ctrl.Decide(idx, class, k)
	}
	g.dstats[idx].Steps++
	g.lastClass = class
	return draft[:k], idx
}

// classOf folds a drafter's confidence class with whether the previous
// step's draft was accepted whole: inside a copied passage the next draft
// is far more likely to hold than the same match length elsewhere, and the
// controller should draft longer there and shorter outside.
func (g *generation) classOf(class int) int {
	class = min(max(class, 0), spec.MaxClasses/2-1)
	if g.streak {
		class += spec.MaxClasses / 2
	}
	return class
}

// run decodes until an end condition. Each step feeds one token (first the
// last prompt token, then the latest emitted one) plus a draft through one
// forward pass and accepts the longest verified run; the first step can
// already verify a draft.
func (g *generation) run(ctx context.Context, t int32) error {
	e, st := g.e, g.st
	s := e.state
	ctrl := e.spec.ctrl
	ctrl.AssumeCost(g.sp.CostSlope)
	defer ctrl.AssumeCost(0)
	if g.maxTok <= 0 {
		st.StopReason = "context"
		return nil
	}
	nv := e.model.NVocab
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Room for drafts: the output budget, the context and the batch.
		room := min(g.sp.DraftMax, g.maxTok-st.GeneratedTokens-1, e.opt.Ctx-len(g.history)-1)
		draft, di := g.draft(room)
		batch := append(e.spec.batch[:0], t)
		batch = append(batch, draft...)
		base := s.Len()
		t0 := time.Now()
		// Without a draft the pass returns the one row it needs; with one,
		// the output head runs lazily over the rows the walk reaches.
		var rows []float32
		var err error
		if len(draft) == 0 {
			rows, err = s.Forward(batch, false)
		} else {
			err = s.ForwardRows(batch)
		}
		if err != nil {
			return err
		}
		pass := time.Since(t0)
		st.TargetPasses++
		st.Drafted += len(draft)
		if di >= 0 {
			g.dstats[di].Drafted += len(draft)
		}
		// Walk the rows: row i predicts the token after batch[i]. rows
		// holds rows [lo, hi) of the batch.
		accepted := 0
		var next int32 = -1
		lo, hi := 0, len(rows)/nv
		for i := 0; i <= len(draft); i++ {
			if i >= hi {
				n := len(batch) - i
				if i == 0 {
					n = min(n, headFirst)
				}
				t1 := time.Now()
				if rows, err = s.Logits(i, i+n); err != nil {
					s.Truncate(base)
					return err
				}
				pass += time.Since(t1)
				lo, hi = i, i+n
			}
			row := rows[(i-lo)*nv : (i-lo+1)*nv]
			if i == len(draft) {
				next = g.smp.Sample(row, g.history)
				break
			}
			x := draft[i]
			ok, dist := g.accept(row, x)
			if ok {
				accepted++
				if err := g.emit(x); err != nil || g.done {
					ctrl.ObservePass(len(batch), pass.Seconds())
					g.settle(base, 1+accepted, di, len(draft), accepted)
					return err
				}
				continue
			}
			next = g.reject(dist, x)
			break
		}
		ctrl.ObservePass(len(batch), pass.Seconds())
		g.settle(base, 1+accepted, di, len(draft), accepted)
		t = next
		if err := g.emit(t); err != nil || g.done {
			return err
		}
	}
}

// headFirst is how many rows of a verification pass get their logits
// first. The output head streams its whole weight matrix for every call,
// and for a row or two that read is the cost (on a memory-bound board, and
// for llama32-1b's 210 MB Q6_K head on the x86 development machine too),
// while each further row adds compute: the rest of the rows are computed
// only when the first drafts are accepted.
const headFirst = 2

// settle records a step's outcome and drops the rejected rows from the KV
// cache: it keeps the fed token and the accepted drafts.
func (g *generation) settle(base, keep, di, drafted, accepted int) {
	e := g.e
	e.state.Truncate(base + keep)
	g.st.Accepted += accepted
	g.streak = drafted > 0 && accepted == drafted
	if di >= 0 && drafted > 0 {
		g.dstats[di].Accepted += accepted
		e.spec.ctrl.Observe(di, g.lastClass, drafted, accepted)
	}
}

// accept applies the speculative sampling rule for a deterministic drafter:
// the drafted token x is accepted with probability p(x) under the final
// distribution plain sampling would draw from. It returns that distribution
// too, for reject (valid until the sampler's next call).
func (g *generation) accept(row []float32, x int32) (bool, []sample.Candidate) {
	dist := g.smp.Distribution(row, g.history)
	if g.sp.BreakAcceptance {
		return true, dist
	}
	var p float32
	for _, c := range dist {
		if c.ID == x {
			p = c.P
			break
		}
	}
	switch {
	case p <= 0:
		return false, dist
	case p >= 1:
		return true, dist
	}
	return g.smp.Uniform() < float64(p), dist
}

// reject draws the replacement for a rejected draft token x from accept's
// distribution with x removed and the rest renormalized.
func (g *generation) reject(dist []sample.Candidate, x int32) int32 {
	if id := g.smp.DrawExcluding(dist, x); id >= 0 {
		return id
	}
	return g.smp.Draw(dist)
}
