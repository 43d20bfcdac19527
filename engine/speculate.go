package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/engine/spec"
	"github.com/geisten/geist/engine/tokenizer"
)

// Speculative decoding.
//
// Each decoding step feeds one token t (the last one emitted, not yet in
// the cache) and, when the controller finds it worth its cost, a tree of
// drafted tokens that might follow t: prompt lookup, the n-gram statistics,
// a draft model or the target with blocks skipped propose continuations,
// merged into one trie, and the controller keeps the part whose expected
// accepted tokens per unit of time are highest. One forward pass computes
// every kept node with a tree attention mask (each node sees the cache and
// its own ancestors only, at the position of its depth), so a node's
// logits are bit for bit those of its path computed alone. Then:
//
//	cur := t
//	loop: y := the sampler's token from cur's logits (greedy: the argmax)
//	      emit y
//	      if a child of cur holds y: cur = that child, loop
//	      else: y is the next step's fed token
//
// and the cache keeps the accepted path only (Compact).
//
// The acceptance rule is "the target samples, the tree matches". It is
// exact whatever the drafts: every emitted token is drawn by the target's
// own sampler from the target's own logits for exactly the tokens emitted
// before it, with the same random draws in the same order as plain
// decoding; drafts only decide which rows were computed ahead of time. So
// the output is not just distributed like plain decoding's, it is plain
// decoding's, token for token, for a given seed. For deterministic drafts
// (all of geist's drafters) it is also as efficient as an exact rule can
// be: a child x is accepted with probability p(x), and a node's children
// with Σ p(x) over them, exactly what the multi-draft rule of SpecTr and
// SpecInfer (recursive rejection sampling) gives with point-mass drafts
// when its residuals are done right (each rejected child's mass removed
// and the rest renormalized: sampling without replacement). A draft model
// that sampled its tokens would need that rule to accept more; geist's
// draft greedily.

// SpecMode selects speculative decoding.
type SpecMode string

// Speculative decoding modes.
const (
	SpecAuto   SpecMode = "auto"   // lookup + n-gram cache (+ draft model or skipped-layer draft) under adaptive control
	SpecOff    SpecMode = "off"    // plain decoding
	SpecLookup SpecMode = "lookup" // prompt lookup only
	SpecDraft  SpecMode = "draft"  // the draft model only
	SpecSelf   SpecMode = "self"   // the target with blocks skipped only (self-speculation)
	// Model-native drafters given with the draft model (detected from its
	// architecture): a Gemma 4 assistant, an EAGLE-3 head.
	SpecAssistant SpecMode = "assistant"
	SpecEagle3    SpecMode = "eagle3"
	// SpecMTP drafts with the target file's own next-token prediction
	// block (Qwen3.5's MTP layer): no draft model needed.
	SpecMTP SpecMode = "mtp"
)

// ParseSpecMode checks a mode name.
func ParseSpecMode(s string) (SpecMode, error) {
	switch m := SpecMode(s); m {
	case SpecAuto, SpecOff, SpecLookup, SpecDraft, SpecSelf, SpecAssistant, SpecEagle3, SpecMTP:
		return m, nil
	}
	return "", fmt.Errorf("engine: unknown speculation mode %q (want auto, off, lookup, draft, self, assistant, eagle3 or mtp)", s)
}

// SpecOptions configure speculative decoding for one request.
type SpecOptions struct {
	Mode     SpecMode // "" means SpecAuto
	DraftMax int      // most drafted tokens one pass verifies (0: 8)
	NgramMin int      // shortest suffix prompt lookup matches (0: 1)
	NgramMax int      // longest (0: 4)
	// Chains drafts one continuation per step instead of a token tree
	// (to compare the two).
	Chains bool
	// Drafter, if set, replaces the configured drafters (benchmarks use an
	// oracle drafter).
	Drafter spec.Drafter
	// Fixed disables adaptive control: every step verifies the DraftMax
	// likeliest drafted tokens (for measurements).
	Fixed bool
	// CostSlope, when > 0, makes adaptive control plan with the verification
	// cost c(k) = 1 + CostSlope·(k−1) instead of measured pass times, and
	// with a model drafter's token costing its share of the weight bytes: to
	// see what drafting does where passes cost what they read (a
	// memory-bound board) on a machine or model where they do not.
	CostSlope float64
	// BreakAcceptance is a test-only switch that deliberately breaks the
	// acceptance rule (a node's first child is accepted whatever the
	// target says), so tests can show that their statistics detect a
	// wrong rule.
	BreakAcceptance bool
}

// Drafter indexes in the controller's tables (persisted: append only).
const (
	idxLookup = iota
	idxNgram
	idxDraft
	idxCustom
	idxSelf
	idxGrammar
	idxNative // the model-native drafter (assistant, eagle3, mtp)
	nDrafters
)

// specState is what speculation keeps across requests: the n-gram
// statistics, the controller's measurements, the model drafters and the
// buffers of a step.
type specState struct {
	specWork // the solo path's (a batched sequence has its slot's)
	ngram    *spec.NgramCache
	draft    *draftModel
	self     *spec.SelfDraft // nil until a skipped-layer draft is chosen
	tune     spec.Tuner      // the skipped-layer search

	// native is the model-native drafter given as the draft model (nil:
	// none), nativeMode the mode that names it.
	native     spec.NativeDrafter
	nativeMode SpecMode
	nativeFile *gguf.File
	// nativeFor makes another native drafter like native over a batch
	// slot's state s; workers reports that its drafting runs on the
	// engine's workers (held from the batch's passes meanwhile).
	nativeFor  func(s *model.State) (d spec.NativeDrafter, workers bool, err error)
	nativeCost float64 // its assumed cost per drafted token, a share of the target's
	draftCost  float64 // the draft model's
	// feed is whether the running request may draft with native (auto,
	// its mode): only then do the passes hand it their rows. An EAGLE-3
	// head runs its encoder and decoder layer on every kept position, a
	// cost plain decoding does not pay; a later request that drafts with
	// it has the positions it missed run again (prefillWatched).
	feed bool
}

// specWork is what one sequence's speculative steps work with: the
// controller (its measurements and acceptance statistics), the drafted
// tree and a step's buffers. The engine has one for its requests alone;
// each batch slot has its own.
type specWork struct {
	ctrl  *spec.Controller
	tree  *spec.Tree
	buf   []int32 // [MaxDraft] a chain drafter's draft
	batch []int32 // [1+MaxDraft] the fed token, then the kept nodes
	par   []int32 // [1+MaxDraft] batch index of each one's parent (-1: the cache)
	path  []int32 // [1+MaxDraft] batch indices of the accepted path
	head  headCost
}

func newSpecWork() specWork {
	return specWork{
		ctrl:  spec.NewController(spec.MaxDraft),
		tree:  spec.NewTree(treeWidth),
		buf:   make([]int32, 0, spec.MaxDraft),
		batch: make([]int32, 0, spec.MaxDraft+1),
		par:   make([]int32, 0, spec.MaxDraft+1),
		path:  make([]int32, 0, spec.MaxDraft+1),
	}
}

// treeWidth is the most children a node of a drafted tree gets.
const treeWidth = 3

func (e *Engine) initSpec() error {
	sp := &e.spec
	sp.ngram = spec.NewNgramCache(3, 1<<16)
	sp.specWork = newSpecWork()
	if e.opt.DraftModel == "" {
		return e.loadMTP()
	}
	if ok, err := e.loadNative(e.opt.DraftModel); ok || err != nil {
		return err
	}
	if err := e.loadMTP(); err != nil {
		return err
	}
	d, err := loadDraft(e.opt.DraftModel, e)
	if err != nil {
		return err
	}
	sp.draft = d
	sp.draftCost = float64(d.m.DecodeBytes()) / float64(e.model.DecodeBytes())
	sp.ctrl.AssumeDraftCost(idxDraft, sp.draftCost)
	return nil
}

// draftModel is the draft model (spec.ModelDraft drafts with its state)
// and the file it was loaded from.
type draftModel struct {
	*spec.ModelDraft
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
	s, err := m.NewState(model.StateOptions{Ctx: target.state.Allocated(), MaxCtx: target.maxCtx, Batch: target.opt.Batch, Threads: target.opt.Threads, KVType: target.state.KVType()})
	if err != nil {
		f.Close()
		return nil, err
	}
	return &draftModel{ModelDraft: spec.NewModelDraft(s), file: f, m: m, s: s}, nil
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

// draftTree asks the drafters the request allows for continuations of the
// history, at most room deep, merges them into one tree and lets the
// controller keep what is worth verifying. It returns the number of kept
// nodes (0: decode plainly).
func (g *generation) draftTree(room int) int {
	sp, sps := g.sp, &g.e.spec
	tr := g.work().tree
	tr.Reset()
	tr.Width = treeWidth
	if sp.Chains {
		tr.Width = 1
	}
	if sp.Mode == SpecOff || room <= 0 {
		return 0
	}
	switch {
	case sp.Drafter != nil:
		g.propose(idxCustom, sp.Drafter, room)
	default:
		if g.con != nil && g.con.phase == phActive {
			g.propose(idxGrammar, grammarDrafter{g}, room)
		}
		if sp.Mode == SpecAuto || sp.Mode == SpecLookup {
			g.propose(idxLookup, g.lookup, room)
		}
		if sp.Mode == SpecAuto {
			g.propose(idxNgram, sps.ngram, room)
		}
		if tr.Len() == 0 {
			g.proposeModel(room)
		}
	}
	g.prune()
	// Inside a copied passage the next draft holds far more often than
	// the same match elsewhere: classes count twice, inside and out.
	for i := range tr.Nodes {
		nd := &tr.Nodes[i]
		nd.Class = uint8(min(int(nd.Class), spec.MaxClasses/2-1))
		if g.streak {
			nd.Class += spec.MaxClasses / 2
		}
	}
	return g.work().ctrl.Plan(tr, room, sp.Fixed)
}

// propose adds drafter d's continuations to the tree as drafter idx.
func (g *generation) propose(idx int, d spec.Drafter, room int) {
	g.drafters[idx] = d
	tr := g.work().tree
	if td, ok := d.(spec.TreeDrafter); ok {
		td.DraftTree(g.history, room, tr, idx)
		return
	}
	draft, class := d.Draft(g.history, room, g.work().buf)
	tr.AddChain(-1, draft, idx, class)
}

// proposeModel drafts with the draft model or, without one, the
// skipped-layer draft, when the controller expects it to pay for the
// passes it costs.
func (g *generation) proposeModel(room int) {
	sp, sps, w := g.sp, &g.e.spec, g.work()
	// The drafters: the engine's, or a batched sequence's slot's own
	// (its state's native drafter, a slot of the draft model's state, a
	// skipped-layer draft over its state).
	var native spec.NativeDrafter
	var draft, self spec.ModelDrafter
	workers := false // drafting runs on the target's workers (batched: held from the passes)
	switch sl := g.sl; {
	case sl != nil:
		if sl.native != nil {
			native = sl.native
		}
		if sl.draft != nil {
			draft = sl.draft
		}
		if s := sl.selfDraft(sps.self); s != nil {
			self = s
		}
	default:
		if sps.native != nil {
			native = sps.native
		}
		if sps.draft != nil {
			draft = sps.draft
		}
		if sps.self != nil {
			self = sps.self
		}
	}
	var d spec.ModelDrafter
	var idx int
	switch {
	case (sp.Mode == SpecAuto || sp.Mode == sps.nativeMode) && native != nil:
		if sp.Fixed && g.st.GeneratedTokens == 0 {
			// Fixed drafting follows llama.cpp's schedule, which drafts
			// from the first generated token on (its prompt pass
			// verifies nothing), so that the counts compare.
			return
		}
		d, idx = native, idxNative
		native.SetGate(nil, idxNative)
		if !sp.Fixed {
			native.SetGate(w.ctrl, idxNative)
		}
		workers = g.sl != nil && g.sl.nativeWorkers
	case (sp.Mode == SpecAuto || sp.Mode == SpecDraft) && draft != nil:
		d, idx = draft, idxDraft
	case (sp.Mode == SpecAuto || sp.Mode == SpecSelf) && self != nil:
		d, idx = self, idxSelf
		workers = g.sl != nil
	default:
		return
	}
	g.drafters[idx] = d
	k := room
	if !sp.Fixed {
		k = w.ctrl.Decide(idx, -1, room)
	}
	if k == 0 {
		return
	}
	t0 := time.Now()
	if workers {
		if p, ok := d.(interface{ Prepare([]int32) }); ok {
			p.Prepare(g.history) // the MTP block's catch-up: not on the workers
		}
		g.e.batch.work.Lock()
	}
	d.DraftTree(g.history, k, w.tree, idx)
	if workers {
		g.e.batch.work.Unlock()
	}
	dt := time.Since(t0).Seconds()
	w.ctrl.ObserveDraftTime(idx, d.Passes(), dt)
	g.dstats[idx].draftSec += dt
	g.dstats[idx].draftRuns += d.Passes()
}

// headFirst is how many rows of a verification pass get their logits
// first. The output head streams its whole weight matrix for every call,
// and for a row or two that read is the cost (on a memory-bound board, and
// for llama32-1b's 210 MB Q6_K head on the x86 development machine too),
// while each further row adds compute: the rest of the rows are computed
// only when the walk leaves the first ones. When the walk is likely
// enough to leave them, a second call would stream the matrix twice: then
// all rows are computed at once (headCost.all decides; headAllAt is the
// planned chance above which it does so before it has measured the head).
const (
	headFirst = 2
	headAllAt = 0.5
)

// headCost estimates the time of one output-head call over k ≥ 2 rows as
// h2 + slope·(k−2), from the verification passes' own calls, so that the
// choice between the first rows alone and all rows at once follows what
// the head costs here. Where the head is most of the model (Gemma 3's
// 262k-row head is 63% of gemma3-270m's weights and, measured, 72% of a
// one-token pass at 1 thread) its rows are nearly free beside its read
// (9 rows 1.2-1.4× the time of 2, while the rest of the model takes 3.3×),
// so a second read costs far more than the rows it saves and all rows are
// computed once already at a chance of 0.1-0.35; a fixed threshold of 0.5
// read the 178 MB head twice in those passes. (The head's byte share
// alone does not decide it: with cost proportional to bytes it cancels
// out of the comparison; what decides is how flat the head's own cost is
// in its rows, which is measured.)
type headCost struct {
	h2, slope float64 // seconds for 2 rows; seconds per further row
	n2, ns    int     // calls observed for each
}

// headWarm is how many calls of each kind headCost needs before it
// decides.
const headWarm = 3

// observe records a head call over rows rows that took sec seconds
// (moving averages, weight 1/8 once warm).
func (h *headCost) observe(rows int, sec float64) {
	ewma := func(v *float64, n *int, x float64) {
		*n++
		*v += (x - *v) / float64(min(*n, 8))
	}
	switch {
	case rows <= headFirst:
		ewma(&h.h2, &h.n2, sec)
	case h.n2 > 0:
		ewma(&h.slope, &h.ns, max(0, (sec-h.h2)/float64(rows-headFirst)))
	}
}

// all reports whether a verification pass over n rows should compute
// every row's logits in one call: when that is expected to cost less than
// rows 0-1 first and, with chance p (the walk leaves them), the n-2
// others in a second call: h(n) < h(2) + p·h(n-2), a call of fewer than
// 2 rows costing about what 2 do (the read dominates).
func (h *headCost) all(n int, p float64) bool {
	if n <= headFirst {
		return false
	}
	if h.n2 < headWarm || h.ns < headWarm {
		return p > headAllAt
	}
	hk := func(k int) float64 { return h.h2 + h.slope*float64(max(k, headFirst)-headFirst) }
	return hk(n) < h.h2+p*hk(n-headFirst)
}

// beyondFirst is the planned chance that the walk over a tree of m kept
// nodes needs rows past the first headFirst (batch rows 0 and 1: the fed
// token and its likeliest child): that it reaches a node at batch row 2 or
// later whose parent is row 0 or 1.
func beyondFirst(tr *spec.Tree, m int) float64 {
	p := 0.0
	for _, nd := range tr.Nodes[1:m] {
		if nd.Parent <= 0 {
			p += nd.P
		}
	}
	return p
}

// step runs one decoding step: it feeds t with the m kept nodes of the
// drafted tree, emits the accepted tokens and returns the next token to
// feed (already sampled, not yet emitted).
func (g *generation) step(t int32, m int) (int32, error) {
	e, st, w := g.e, g.st, g.work()
	s, tr, ctrl := g.state(), w.tree, w.ctrl
	batch := append(w.batch[:0], t)
	par := append(w.par[:0], -1)
	for _, nd := range tr.Nodes[:m] {
		batch = append(batch, nd.Tok)
		par = append(par, int32(nd.Parent)+1)
	}
	n := len(batch)
	// end(i) is the end of batch node i's subtree.
	end := func(i int) int {
		if i == 0 {
			return n
		}
		return 1 + tr.End(i-1)
	}
	base := s.Len()
	t0 := time.Now()
	var rows []float32
	var err error
	lo, hi := 0, 0
	switch {
	case g.sl != nil:
		// A batched sequence: its rows go into the runner's next pass,
		// with every row's logits (the head runs once per pass for all
		// the sequences' rows).
		rows, err = e.batch.step(g.sl, batch, par, m > 0)
		hi = n
	case m == 0:
		rows, err = s.Forward(batch, false)
		hi = 1
	default:
		err = s.ForwardTree(batch, par, nil)
	}
	pass := time.Since(t0)
	if err != nil {
		return -1, err
	}
	first := headFirst
	if m > 0 && w.head.all(n, beyondFirst(tr, m)) {
		first = n
	}
	st.TargetPasses++
	if m > 0 {
		st.TreePasses++
		st.Drafted += m
		var used [nDrafters]bool
		for _, nd := range tr.Nodes[:m] {
			g.dstats[nd.Drafter].Drafted++
			used[nd.Drafter] = true
		}
		for d, u := range used {
			if u {
				g.dstats[d].Steps++
			}
		}
	}
	nv := e.model.NVocab
	path := append(w.path[:0], 0)
	cur, accepted := 0, 0
	next := int32(-1)
	for {
		if cur >= hi {
			// Rows past the first ones: all the rest at once.
			lo, hi = cur, n
			if cur == 0 {
				hi = min(n, first)
			}
			t1 := time.Now()
			if rows, err = s.Logits(lo, hi); err != nil {
				g.truncate(base)
				return -1, err
			}
			dt := time.Since(t1)
			pass += dt
			if m > 0 {
				w.head.observe(hi-lo, dt.Seconds())
			}
		}
		y, err := g.sample(rows[(cur-lo)*nv : (cur-lo+1)*nv])
		if err != nil {
			g.truncate(base)
			return -1, err
		}
		child := -1
		for c := cur + 1; c < end(cur); c++ {
			if par[c] != int32(cur) {
				continue
			}
			nd := &tr.Nodes[c-1]
			ok := child < 0 && (batch[c] == y || g.sp.BreakAcceptance)
			if ok {
				child, y = c, batch[c]
			}
			ctrl.ObserveEdge(int(nd.Drafter), int(nd.Class), int(nd.Rank), ok)
		}
		if child < 0 {
			next = y
			break
		}
		path = append(path, int32(child))
		cur = child
		accepted++
		g.dstats[tr.Nodes[child-1].Drafter].Accepted++
		if err := g.emit(y); err != nil || g.done {
			g.settle(base, path, m, n, pass)
			return -1, err
		}
	}
	if err := g.settle(base, path, m, n, pass); err != nil {
		return -1, err
	}
	g.streak = m > 0 && end(cur) == cur+1 // the walk ended at a leaf: all it could accept
	return next, nil
}

// settle records a step's outcome and keeps the fed token and the
// accepted path in the KV cache.
func (g *generation) settle(base int, path []int32, m, n int, pass time.Duration) error {
	sps := &g.e.spec
	accepted := len(path) - 1
	g.work().ctrl.ObservePass(n, pass.Seconds())
	g.st.passSec += pass.Seconds()
	if m > 0 {
		g.work().ctrl.Settle(accepted)
		g.st.Accepted += accepted
		g.st.MaxAcceptedDepth = max(g.st.MaxAcceptedDepth, accepted)
	}
	if g.sl != nil {
		g.e.batch.hold()
		defer g.e.batch.let()
	}
	if err := g.state().Compact(base, path); err != nil {
		return errors.Join(errors.New("engine: keeping the accepted path"), err)
	}
	switch {
	case g.sl != nil:
		if d := g.sl.native; d != nil && g.sl.feed {
			for i, j := range path {
				d.Kept(int(j), base+i) // the rows the slot's state kept of the pass (KeepRows)
			}
		}
	case sps.native != nil && sps.feed:
		for i, j := range path {
			sps.native.Kept(int(j), base+i)
		}
	}
	return nil
}

// truncate rewinds the sequence's state to n (a failed step's start).
func (g *generation) truncate(n int) {
	if g.sl != nil {
		g.e.batch.hold()
		defer g.e.batch.let()
	}
	g.state().Truncate(n)
}
