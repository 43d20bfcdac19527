package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/engine/sample"
	"github.com/geisten/geist/engine/spec"
	"github.com/geisten/geist/engine/tokenizer"
)

// prefill brings the KV state to toks, reusing the longest common prefix
// with what the state already holds or, when the prompt cache holds a
// longer one, restoring that. It returns the reused tokens and, of those,
// the ones restored from the prompt cache. (Generation prefills all but
// the last prompt token: that one runs in the first decoding step,
// together with a draft.)
func (e *Engine) prefill(ctx context.Context, toks []int32) (reuse, restored int, err error) {
	return e.prefillWatched(ctx, toks, 0, nil)
}

// prefillWatched is prefill that, for a model with recurrent layers
// (whose state returns exactly only to some positions), also pins a
// checkpoint at position pin (the end of the system prompt, which the
// prompt cache keeps; 0: none), and tells progress (when not nil) the
// tokens the state holds after the restore and after every pass.
func (e *Engine) prefillWatched(ctx context.Context, toks []int32, pin int, progress func(int)) (reuse, restored int, err error) {
	s := e.state
	reuse = spec.CommonPrefix(s.Tokens(), toks)
	s.Truncate(reuse)
	reuse = s.Len() // a recurrent state may rewind to an earlier checkpoint
	t := time.Now()
	var r int
	if d := e.spec.native; d != nil && e.spec.feed && d.Known() < s.Ctx() {
		// A drafter that reads every position's rows (EAGLE-3's
		// features) has them only from passes: positions it lacks are
		// run again, and none are restored from the prompt cache.
		d.Truncate(reuse)
		if k := d.Known(); k < reuse {
			s.Truncate(k)
			reuse = s.Len()
		}
		r = reuse
	} else {
		r = e.restore(toks, reuse)
	}
	e.restoreTook = time.Since(t)
	if r != reuse {
		reuse = r
		restored = r
	}
	if progress != nil {
		progress(reuse)
	}
	for i := reuse; i < len(toks); {
		if err := ctx.Err(); err != nil {
			return reuse, restored, err
		}
		end := min(i+s.MaxBatch(), len(toks))
		if i < pin && pin < end {
			end = pin
		}
		if _, err := s.Forward(toks[i:end], false); err != nil {
			return reuse, restored, err
		}
		if end == pin {
			s.Checkpoint()
		}
		if d := e.spec.native; d != nil && e.spec.feed {
			for j := i; j < end; j++ {
				d.Kept(j-i, j)
			}
		}
		if progress != nil {
			progress(end)
		}
		i = end
	}
	return reuse, restored, nil
}

// Generate runs req to completion, streaming text through req.OnText. With
// speculation on, drafted tokens are verified in one batched pass and each
// emitted token is exactly what plain decoding emits: the same token under
// greedy decoding, the same distribution when sampling.
func (e *Engine) Generate(ctx context.Context, req Request) (Stats, error) {
	if e.batch != nil {
		return e.generateBatched(ctx, req)
	}
	if e.opt.Parallel > 1 {
		e.solo.Lock()
		defer e.solo.Unlock()
	}
	var st Stats
	req.ctx = ctx
	e.snap.active.Store(true)
	defer e.snap.active.Store(false)
	// A background skipped-layer search parks at its next layer from here
	// on: the template, the tokenizer and the grammar run without it.
	e.spec.tune.Busy(true)
	defer e.spec.tune.Busy(false)
	prompt, msgs, dropped, err := e.prompt(&req)
	st.PromptTokens, st.DroppedTurns = len(prompt), dropped
	if err != nil {
		return st, err
	}
	smp, err := sample.New(req.Sampling, e.model.NVocab)
	if err != nil {
		return st, err
	}
	con, err := e.newConstraint(&req, prompt)
	if err != nil {
		return st, err
	}
	e.takeTuned()
	sp, err := e.specOptions(&req)
	if err != nil {
		return st, err
	}
	// The MTP block is fed in every mode: it tolerates no re-run of the
	// target (Known is unbounded: a position it missed leaves a hole that
	// changes its drafts), so a plain request before a drafting one would
	// leave the prompt a hole. A request that cannot draft with it only
	// records the pairs (the target's rows), which the block runs when a
	// later request drafts: plain decoding does not pay for it.
	e.spec.feed = e.spec.native != nil && (sp.Mode == SpecAuto || sp.Mode == e.spec.nativeMode || e.spec.nativeMode == SpecMTP)
	if d, ok := e.spec.native.(*spec.MTPDraft); ok {
		d.State().SetLazy(sp.Mode != SpecAuto && sp.Mode != SpecMTP)
		// The block's catch-up after a plain stretch stops when the
		// request is cancelled (model.MTPCatchUpMax bounds it).
		d.State().SetCancel(ctx.Err)
		defer d.State().SetCancel(nil)
	}
	lookup := spec.NewLookup(max(sp.NgramMin, 1), max(sp.NgramMax, sp.NgramMin, 4))

	start := time.Now()
	pin := 0
	if e.model.RecLayers() > 0 {
		pin = e.keepPrefix(&req, msgs, prompt)
	}
	onPrefill := req.OnPrefill
	if pp := req.OnPromptProgress; pp != nil {
		total, inner := len(prompt), req.OnPrefill
		onPrefill = func(done int) {
			if inner != nil {
				inner(done)
			}
			pp(done, total)
		}
	}
	reused, restored, err := e.prefillWatched(ctx, prompt[:len(prompt)-1], pin, onPrefill)
	if err == nil && req.OnPromptProgress != nil {
		req.OnPromptProgress(len(prompt), len(prompt))
	}
	st.ReusedTokens, st.RestoredTokens = reused, restored
	st.EvaluatedTokens = len(prompt) - reused
	st.RestoreMS = float64(e.restoreTook.Microseconds()) / 1000
	if err != nil {
		return st, err
	}
	if n := len(prompt) - 1 - reused; n > 0 {
		st.PrefillTokS = float64(n) / time.Since(start).Seconds()
	}

	g := generation{e: e, cx: ctx, req: &req, st: &st, smp: smp, con: con, sp: &sp, lookup: lookup,
		dec: e.tok.NewDecoder(), stop: sample.NewStopMatcher(req.Stop), s: e.state, w: &e.spec.specWork}
	g.ctx = e.reqCtx(&req)
	g.history = make([]int32, 0, g.ctx)
	g.history = append(g.history, prompt...)
	g.maxTok = g.ctx - len(prompt)
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
	st.finish(g.drafters[:], g.dstats[:])
	if e.spec.self != nil {
		st.SelfSkip = e.spec.self.Set().String()
	}
	if sp.Mode != SpecOff && (err == nil || errors.Is(err, context.Canceled)) {
		e.spec.ngram.Observe(g.history)
	}
	if err == nil && (sp.Mode == SpecAuto || sp.Mode == SpecSelf) && sp.Drafter == nil {
		e.tuneInBackground(g.history)
	}
	if err == nil {
		// Keep the prefixes worth a restore: the system prompt and the
		// whole conversation so far, or, when the answer thought first,
		// the prompt instead: templates render a past answer without its
		// thinking block, so the next turn parts from this one where the
		// answer began (less the prompt's last token, as in
		// ConversationPrefix: the text after it may merge with it). The
		// whole state would be a prefix of no later prompt, and would
		// take the snapshotter's one pending place from the prompt.
		if k := e.keepPrefix(&req, msgs, prompt); k > 0 && k < len(prompt) {
			e.snapshot(k)
		}
		if e.thoughtFirst(g.history[len(prompt):]) {
			e.snapshot(len(prompt) - 1)
		} else {
			e.snapshot(e.state.Len())
		}
	}
	return st, err
}

// generation is the state of one Generate call.
type generation struct {
	e      *Engine
	cx     context.Context // Generate's: cancellation reaches the grammar's per-token work
	ctx    int             // the request's context (reqCtx)
	req    *Request
	st     *Stats
	smp    *sample.Sampler
	con    *constraint // nil: unconstrained
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

	s  *model.State // the sequence's state: the engine's, or a batch slot's
	sl *slot        // batched: the slot (nil: alone)
	w  *specWork    // the speculative steps' controller and buffers

	drafters [nDrafters]spec.Drafter
	dstats   [nDrafters]DrafterStats
	streak   bool // the last step accepted all the drafts it could
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
	opening := g.con != nil && g.con.phase == phOpening && !g.con.lazy
	g.accept(id)
	if g.e.tok.IsEOG(id) {
		st.StopReason, g.done = "eos", true
		return nil
	}
	if g.req.OnToken != nil {
		g.req.OnToken(id)
	}
	out, stopped := g.stop.Feed(g.dec.Add(id))
	if opening {
		out = g.con.hold(out)
	}
	if err := g.text(out); errors.Is(err, ErrStop) {
		stopped = true
	} else if err != nil {
		return err
	}
	if stopped {
		st.StopReason, g.done, g.stopped = "stop", true, true
		return nil
	}
	if st.GeneratedTokens >= g.maxTok {
		st.StopReason, g.done = "length", true
		if len(g.history) >= g.ctx {
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
	err := g.text(out)
	if err == nil {
		err = g.text(g.stop.Flush())
	}
	if errors.Is(err, ErrStop) {
		return nil // generation had ended already: its reason stands
	}
	return err
}

// run decodes until an end condition. Each step feeds one token (first
// the last prompt token, then the latest emitted one), with a drafted tree
// when the controller wants one, through one forward pass and emits the
// accepted tokens and the next one; the first step can already verify a
// draft.
func (g *generation) run(ctx context.Context, t int32) error {
	st := g.st
	ctrl := g.work().ctrl
	ctrl.AssumeCost(g.sp.CostSlope)
	defer ctrl.AssumeCost(0)
	if g.maxTok <= 0 {
		st.StopReason = "context"
		return nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Room for drafts: the output budget, the context and the pass.
		room := min(g.sp.DraftMax, g.maxTok-st.GeneratedTokens-1, g.ctx-len(g.history)-1)
		next, err := g.step(t, g.draftTree(room))
		if g.sl != nil && errors.Is(err, model.ErrContextFull) {
			st.StopReason = "context"
			return nil
		}
		if err != nil || g.done {
			return err
		}
		t = next
		if err := g.emit(t); err != nil || g.done {
			return err
		}
	}
}

// specOptions checks a request's speculation options against what the
// engine has and fills in their defaults.
func (e *Engine) specOptions(req *Request) (SpecOptions, error) {
	sp := req.Spec
	if sp.Mode == "" {
		sp.Mode = SpecAuto
	}
	if sp.Mode == SpecDraft && e.spec.draft == nil && sp.Drafter == nil {
		return sp, errors.New("engine: speculation mode draft needs a draft model")
	}
	if (sp.Mode == SpecAssistant || sp.Mode == SpecEagle3) && sp.Mode != e.spec.nativeMode && sp.Drafter == nil {
		return sp, fmt.Errorf("engine: speculation mode %s needs a draft model of that kind (--draft-model: a gemma4-assistant file for assistant, an eagle3 file for eagle3)", sp.Mode)
	}
	if sp.Mode == SpecMTP && e.spec.nativeMode != SpecMTP && sp.Drafter == nil {
		return sp, errors.New("engine: speculation mode mtp needs a model whose file has a next-token prediction block (nextn_predict_layers; Qwen3.5 \"-MTP\" files), without a model-native --draft-model")
	}
	if sp.Mode == SpecSelf && e.spec.self == nil && sp.Drafter == nil {
		return sp, errors.New("engine: speculation mode self needs a skipped-layer draft (none was chosen for this model yet)")
	}
	if sp.DraftMax <= 0 {
		sp.DraftMax = 8
	}
	sp.DraftMax = min(sp.DraftMax, spec.MaxDraft, e.state.MaxLogitRows()-1, e.state.MaxBatch()-1)
	return sp, nil
}

// state is the sequence's model state: a batch slot's, or the engine's.
func (g *generation) state() *model.State {
	if g.s == nil {
		return g.e.state
	}
	return g.s
}

// work is the sequence's speculation controller and buffers: its batch
// slot's, or the engine's.
func (g *generation) work() *specWork {
	if g.w == nil {
		return &g.e.spec.specWork
	}
	return g.w
}
