package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/engine/sample"
	"github.com/geisten/geist/engine/spec"
)

// Continuous batching (Options.Parallel > 1): Generate may be called from
// several goroutines at once. Each call takes a slot (a KV cache of its
// own: the engine's state or a model.NewSlot of it) and runs its own
// prompt, sampler, grammar and stop strings, but its forward passes go to
// one runner, which joins the rows every running sequence submitted into
// one model.ForwardBatch pass: a decoding step reads the weights once for
// all of them. A new request's prompt is prefilled in chunks, one per
// pass beside the others' decoding rows, so running answers keep
// streaming. Every kernel is batch-invariant, so each answer is bit for bit
// the one it would be alone. Speculation composes: a sequence's step
// submits its fed token and drafted tree (its own controller and tree,
// specWork; every drafter, the model drafters each with a state of the
// slot's own: batchdraft.go), the pass returns every row's logits into
// the slot's buffer, and the sequence keeps its accepted path (Compact)
// before its next step.
//
// A sequence that does not submit its next rows in time (a slow client's
// OnText, a costly grammar mask) does not hold the others: the runner
// waits for the running sequences at most a grace (a quarter of the last
// pass, 0.5-20 ms) and runs the pass with the rows it has; the late one
// joins the next pass. Its answer does not change: only its rows' timing.
//
// The prompt cache works as alone: a request's slot restores a longer
// prefix from it (one restore at a time, the others' passes going on),
// and stores its prefixes at the end. The n-gram statistics learn from
// batched answers; the skipped-layer search does not.
//
// Models with recurrent layers (lfm2, granitehybrid, qwen35) batch too:
// each slot holds its own recurrent state, and what a sequence does to it
// between its passes (rewind, Compact's replay, checkpoints, snapshots)
// holds the workers from the runner (batcher.hold).
//
// Memory: Parallel KV caches, each growing on demand up to MaxCtx (the
// engine's state is the first; a slot adds its cache and its workers'
// attention scratch, no row buffers), and with a model drafter each slot's
// own drafter state: a draft-model KV cache, an MTP or EAGLE-3 cache, an
// assistant's step buffers, and MaxBatch rows of hidden states (and
// EAGLE-3 features) it reads between passes.

// maxParallel is the most sequences decoded together.
const maxParallel = 16

// batcher runs the batched passes of an engine.
type batcher struct {
	e     *Engine
	slots []*slot
	chunk int // prompt tokens one pass takes from a prefilling sequence

	mu      sync.Mutex
	free    chan *slot // slots no generation holds
	pending []*slot    // slots with rows for the next pass
	live    int        // slots held (their generations submit rows)
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	grace   time.Duration
	timer   *time.Timer

	seqs []model.Seq // the pass being run
	in   []*slot

	// work is held by the runner over a pass and, for a recurrent model
	// (rec), by a sequence over what it does to its own state between
	// its passes (a rewind, Compact, a checkpoint, a snapshot or a
	// restore): a recurrent rewind replays steps on the workers the
	// passes use.
	work sync.Mutex
	rec  bool

	draftMu sync.Mutex // the draft model's workspace: one slot's draft pass at a time

	// The runner's counts (read when it is idle): passes, those with
	// several sequences, those with a prompt chunk beside decoding rows,
	// the most rows of one pass.
	passes, multi, mixed, most int
}

// slot is one sequence's state and its rendezvous with the runner.
type slot struct {
	s       *model.State
	toks    []int32 // the rows submitted
	par     []int32 // their tree (nil: a chain)
	want    bool    // their last row's logits
	all     bool    // every row's logits
	prefill bool    // a prompt chunk: the runner may take its first part only (took)
	took    int     // the rows the pass took
	waited  bool    // left out of the last pass: first in the next
	logits  []float32
	err     error
	ready   chan struct{} // the pass with its rows ran
	one     [1]int32
	w       specWork // the sequence's speculation: its own controller and tree
	slotDrafters
}

// newBatcher makes n slots (the engine's state first) and starts the
// runner; nil for one sequence (every family batches).
func (e *Engine) newBatcher(n int) (*batcher, error) {
	if n <= 1 {
		return nil, nil
	}
	n = min(n, maxParallel, e.state.MaxLogitRows(), e.state.MaxBatch())
	b := &batcher{e: e, free: make(chan *slot, n), kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		grace: time.Millisecond, timer: time.NewTimer(time.Hour), rec: e.model.RecLayers() > 0 || e.model.ConvLayers() > 0}
	b.timer.Stop()
	b.chunk = max(1, e.state.MaxBatch()-(n-1))
	nv := e.model.NVocab
	for i := range n {
		s := e.state
		if i > 0 {
			var err error
			if s, err = e.state.NewSlot(model.StateOptions{Ctx: e.state.Allocated(), MaxCtx: e.maxCtx, KVType: e.state.KVType()}); err != nil {
				b.closeSlots()
				return nil, fmt.Errorf("engine: batch slot %d: %w", i, err)
			}
		}
		sl := &slot{s: s, logits: make([]float32, nv), ready: make(chan struct{}, 1), w: newSpecWork()}
		b.slots = append(b.slots, sl)
		if err := b.initDrafters(sl, i); err != nil {
			b.closeSlots()
			return nil, fmt.Errorf("engine: batch slot %d: %w", i, err)
		}
		b.free <- sl
	}
	b.pending = make([]*slot, 0, n)
	b.seqs = make([]model.Seq, 0, n)
	b.in = make([]*slot, 0, n)
	go b.run()
	return b, nil
}

// close stops the runner and frees the slots (not the engine's state).
func (b *batcher) close() {
	close(b.stop)
	<-b.done
	b.closeSlots()
}

// closeSlots frees the slots' states and drafters (not the engine's).
func (b *batcher) closeSlots() {
	for _, sl := range b.slots {
		sl.closeDrafters()
		if sl.s != b.e.state {
			sl.s.Close()
		}
	}
}

// acquire takes the free slot whose cache shares the longest prefix with
// prompt, waiting for one while ctx lasts.
func (b *batcher) acquire(ctx context.Context, prompt []int32) (*slot, error) {
	var sl *slot
	select {
	case sl = <-b.free:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// Among the free slots, the best prefix.
	best := spec.CommonPrefix(sl.s.Tokens(), prompt)
	for range len(b.free) {
		var o *slot
		select {
		case o = <-b.free:
		default:
		}
		if o == nil {
			break
		}
		if p := spec.CommonPrefix(o.s.Tokens(), prompt); p > best {
			sl, o, best = o, sl, p
		}
		b.free <- o
	}
	b.mu.Lock()
	if b.live++; b.live == 1 {
		b.e.snap.active.Store(true) // snapshot writes wait while requests run
	}
	b.mu.Unlock()
	return sl, nil
}

func (b *batcher) release(sl *slot) {
	b.mu.Lock()
	if b.live--; b.live == 0 {
		b.e.snap.active.Store(false)
	}
	b.mu.Unlock()
	b.poke() // the others need not wait for it
	b.free <- sl
}

// hold takes the workers from the runner for a recurrent sequence's own
// work on its state (nothing for other models); let gives them back.
func (b *batcher) hold() {
	if b.rec {
		b.work.Lock()
	}
}

func (b *batcher) let() {
	if b.rec {
		b.work.Unlock()
	}
}

func (b *batcher) poke() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// pass runs toks (at most chunk of them) in the next batched pass and
// returns their last row's logits when want (the slot's buffer). Without
// want they are a prompt chunk, of which the pass may take only the first
// sl.took.
func (b *batcher) pass(sl *slot, toks []int32, want bool) ([]float32, error) {
	return b.submit(sl, toks, nil, want, false, !want)
}

// step runs a decoding step's rows in the next batched pass: the fed token
// and, with all, the drafted tree after it (parents as ForwardTree's),
// returning every row's logits (the slot's buffer, rows×NVocab).
func (b *batcher) step(sl *slot, toks, parents []int32, all bool) ([]float32, error) {
	if !all {
		parents = nil
	}
	return b.submit(sl, toks, parents, true, all, false)
}

func (b *batcher) submit(sl *slot, toks, parents []int32, want, all, prefill bool) ([]float32, error) {
	sl.toks, sl.par, sl.want, sl.all, sl.prefill, sl.err = toks, parents, want, all, prefill, nil
	sl.took = 0
	b.mu.Lock()
	b.pending = append(b.pending, sl)
	b.mu.Unlock()
	b.poke()
	<-sl.ready
	return sl.logits, sl.err
}

// run is the runner: it waits for rows, for the running sequences to
// submit theirs (a grace at most), runs the pass and answers each slot.
func (b *batcher) run() {
	defer close(b.done)
	var since time.Time // when the oldest pending rows came
	for {
		b.mu.Lock()
		n, live := len(b.pending), b.live
		b.mu.Unlock()
		if n == 0 {
			since = time.Time{}
			select {
			case <-b.kick:
				continue
			case <-b.stop:
				return
			}
		}
		now := time.Now()
		if since.IsZero() {
			since = now
		}
		if wait := b.grace - now.Sub(since); n < live && wait > 0 {
			b.timer.Reset(wait)
			select {
			case <-b.kick:
			case <-b.timer.C:
			case <-b.stop:
				return
			}
			b.timer.Stop()
			select { // a fire racing the stop
			case <-b.timer.C:
			default:
			}
			continue
		}
		b.runPass()
		since = time.Time{}
	}
}

// runPass runs one pass over the pending rows: those left out of the last
// pass first, then decoding steps, then prompt chunks (a chunk cut to the
// room left, a row at least), while they fit.
func (b *batcher) runPass() {
	most := b.e.state.MaxBatch()
	b.mu.Lock()
	b.seqs, b.in = b.seqs[:0], b.in[:0]
	rows := 0
	for round := range 4 {
		for _, sl := range b.pending {
			if sl.took > 0 || sl.waited != (round < 2) || sl.prefill != (round%2 == 1) {
				continue
			}
			k := len(sl.toks)
			if rows+k > most {
				if !sl.prefill || rows == most {
					continue
				}
				k = most - rows
			}
			sl.took = k
			rows += k
			b.seqs = append(b.seqs, model.Seq{S: sl.s, Tokens: sl.toks[:k], Parents: sl.par, Logits: sl.want && k == len(sl.toks), All: sl.all, Out: sl.logits})
			b.in = append(b.in, sl)
		}
	}
	// The rest wait for the next pass, first in it.
	kept := b.pending[:0]
	for _, sl := range b.pending {
		if sl.waited = sl.took == 0; sl.waited {
			kept = append(kept, sl)
		}
	}
	clear(b.pending[len(kept):])
	b.pending = kept
	b.mu.Unlock()
	b.passes++
	if len(b.seqs) > 1 {
		b.multi++
		if !b.in[0].prefill && b.in[len(b.in)-1].prefill {
			b.mixed++ // a prompt chunk beside decoding rows (those come first)
		}
	}
	b.most = max(b.most, rows)
	t0 := time.Now()
	b.work.Lock()
	_, err := b.e.state.ForwardBatch(b.seqs)
	if err != nil && len(b.seqs) > 1 {
		// One sequence's rows were refused (the pass checks them all
		// before it changes any state): each runs alone, so that only
		// it fails.
		for i := range b.in {
			_, b.in[i].err = b.e.state.ForwardBatch(b.seqs[i : i+1])
		}
		b.work.Unlock()
		for _, sl := range b.in {
			sl.ready <- struct{}{}
		}
		return
	}
	b.work.Unlock()
	b.grace = min(max(time.Since(t0)/4, 500*time.Microsecond), 20*time.Millisecond)
	for _, sl := range b.in {
		sl.err = err
		sl.ready <- struct{}{}
	}
}

// generateBatched is Generate in batched mode: the request's setup under
// the engine's setup lock, then its prefill and decoding as rows of the
// batched passes, in the slot whose cache shares most of its prompt.
func (e *Engine) generateBatched(ctx context.Context, req Request) (Stats, error) {
	var st Stats
	req.ctx = ctx
	b := e.batch
	e.setup.Lock()
	prompt, msgs, dropped, err := e.prompt(&req)
	st.PromptTokens, st.DroppedTurns = len(prompt), dropped
	var smp *sample.Sampler
	var con *constraint
	if err == nil {
		smp, err = sample.New(req.Sampling, e.model.NVocab)
	}
	if err == nil {
		con, err = e.newConstraint(&req, prompt)
	}
	var sp SpecOptions
	if err == nil {
		sp, err = e.specOptions(&req)
	}
	pin := 0
	if err == nil && e.model.RecLayers() > 0 {
		pin = e.keepPrefix(&req, msgs, prompt) // a checkpoint there, as Generate pins it
	}
	e.setup.Unlock()
	if err != nil {
		return st, err
	}
	start := time.Now()
	sl, err := b.acquire(ctx, prompt)
	if err != nil {
		return st, err
	}
	defer b.release(sl)
	s := sl.s
	// The slot's native drafter is fed as the engine's is alone (see
	// Generate): the MTP block in every mode (lazily when the request
	// does not draft with it), the others when the request may draft
	// with them.
	sl.feed = sl.native != nil && (sp.Mode == SpecAuto || sp.Mode == e.spec.nativeMode || e.spec.nativeMode == SpecMTP)
	if d, ok := sl.native.(*spec.MTPDraft); ok {
		d.State().SetLazy(sp.Mode != SpecAuto && sp.Mode != SpecMTP)
		d.State().SetCancel(ctx.Err)
		defer d.State().SetCancel(nil)
	}
	reuse := spec.CommonPrefix(s.Tokens(), prompt[:len(prompt)-1])
	b.hold()
	s.Truncate(reuse)
	b.let()
	reuse = s.Len() // a recurrent state may rewind to an earlier checkpoint
	rows := false   // the drafter needs every position's rows: nothing is restored
	if d := sl.native; d != nil && sl.feed && d.Known() < s.Ctx() {
		// An EAGLE-3 head has the features of the positions it was fed
		// only: those it lacks run again, as in prefillWatched.
		rows = true
		d.Truncate(reuse)
		if k := d.Known(); k < reuse {
			b.hold()
			s.Truncate(k)
			b.let()
			reuse = s.Len()
		}
	}
	if e.opt.Cache != nil && !rows {
		// A longer prefix from the prompt cache (one restore at a time:
		// the others' passes go on meanwhile).
		t := time.Now()
		e.cacheMu.Lock()
		b.hold()
		if r := e.restoreInto(s, prompt[:len(prompt)-1], reuse); r != reuse {
			reuse, st.RestoredTokens = r, r
		}
		b.let()
		e.cacheMu.Unlock()
		st.RestoreMS = float64(time.Since(t).Microseconds()) / 1000
	}
	st.ReusedTokens, st.EvaluatedTokens = reuse, len(prompt)-reuse
	if req.OnPrefill != nil {
		req.OnPrefill(reuse)
	}
	for i := reuse; i < len(prompt)-1; {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		end := min(i+b.chunk, len(prompt)-1)
		if i < pin && pin < end {
			end = pin
		}
		if _, err := b.pass(sl, prompt[i:end], false); err != nil {
			return st, err
		}
		end = i + sl.took // the pass may have taken the chunk's first part
		if d := sl.native; d != nil && sl.feed {
			for j := i; j < end; j++ {
				d.Kept(j-i, j)
			}
		}
		if end == pin {
			b.hold()
			s.Checkpoint()
			b.let()
		}
		if req.OnPrefill != nil {
			req.OnPrefill(end)
		}
		i = end
	}
	if n := len(prompt) - 1 - reuse; n > 0 {
		st.PrefillTokS = float64(n) / time.Since(start).Seconds()
	}
	if nv := e.model.NVocab; len(sl.logits) < (1+sp.DraftMax)*nv {
		sl.logits = make([]float32, (1+sp.DraftMax)*nv) // once per slot and draft size
	}
	lookup := spec.NewLookup(max(sp.NgramMin, 1), max(sp.NgramMax, sp.NgramMin, 4))
	g := generation{e: e, cx: ctx, req: &req, st: &st, smp: smp, con: con, sp: &sp, lookup: lookup,
		dec: e.tok.NewDecoder(), stop: sample.NewStopMatcher(req.Stop), s: s, sl: sl, w: &sl.w}
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
	if sp.Mode != SpecOff && (err == nil || errors.Is(err, context.Canceled)) {
		e.spec.ngram.Observe(g.history) // under the cache's lock: the others' drafts read it
	}
	if err == nil && e.opt.Cache != nil {
		// The prefixes worth a restore, as Generate keeps them.
		e.setup.Lock()
		k := e.keepPrefix(&req, msgs, prompt)
		e.setup.Unlock()
		e.cacheMu.Lock()
		b.hold()
		if k > 0 && k < len(prompt) {
			e.snapshotOf(s, k)
		}
		if e.thoughtFirst(g.history[len(prompt):]) {
			e.snapshotOf(s, len(prompt)-1)
		} else {
			e.snapshotOf(s, s.Len())
		}
		b.let()
		e.cacheMu.Unlock()
	}
	return st, err
}
