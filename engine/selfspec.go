package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/engine/spec"
)

// Self-speculative drafting (Draft & Verify, Zhang et al. 2023): the draft
// is the target model itself with some attention and feed-forward blocks
// skipped. It needs no second model and no training; it reads the
// target's own keys and values for the layers it runs, so drafting costs
// only the blocks it runs and the output head. Which blocks to skip is
// chosen per model by a search on the model's own outputs (searchSkip) and
// persisted with the drafting statistics.

// SkipSet is a choice of blocks to skip, with what the search measured.
type SkipSet struct {
	Skip model.Skip
	// Agreement is the share of positions of the calibration text where
	// the draft's most likely token was the target's.
	Agreement float64
	// Cost is a draft token's modelled cost relative to a target pass:
	// the weight bytes it reads (the blocks it runs and the output head)
	// over those a target pass reads.
	Cost float64
	// Gain is the modelled speed-up of drafting with it (chainGain) under
	// the verification cost the search assumed; below 1 it does not pay.
	Gain float64
	// Evals is how many candidate sets the search measured, Tokens the
	// length of the calibration text.
	Evals, Tokens int
}

// String names the skipped blocks: "attn 3,4 mlp 4".
func (k *SkipSet) String() string {
	list := func(b []bool) string {
		var s []string
		for i, x := range b {
			if x {
				s = append(s, fmt.Sprint(i))
			}
		}
		if len(s) == 0 {
			return "-"
		}
		return strings.Join(s, ",")
	}
	return "attn " + list(k.Skip.Attn) + " mlp " + list(k.Skip.MLP)
}

// Blocks is the number of blocks skipped.
func (k *SkipSet) Blocks() int {
	a, m := k.Skip.Count()
	return a + m
}

// skipMagic heads an encoded SkipSet.
const skipMagic = "GSK1"

// MarshalBinary encodes the set: the layer count, a byte of flags per
// layer (1: attention skipped, 2: feed-forward skipped), the agreement
// and the cost.
func (k *SkipSet) MarshalBinary() ([]byte, error) {
	n := len(k.Skip.Attn)
	b := make([]byte, 0, 8+n+16)
	b = append(b, skipMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	for l := 0; l < n; l++ {
		var f byte
		if k.Skip.Attn[l] {
			f |= 1
		}
		if k.Skip.MLP[l] {
			f |= 2
		}
		b = append(b, f)
	}
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(k.Agreement))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(k.Cost))
	return b, nil
}

// unmarshalSkipSet decodes a set for a model of nLayer layers, refusing
// anything malformed: another magic, layer count or length, unknown flag
// bits, no block skipped, or figures outside [0, 1].
func unmarshalSkipSet(b []byte, nLayer int) (*SkipSet, error) {
	if len(b) < 8 || string(b[:4]) != skipMagic {
		return nil, errors.New("engine: skipped-layer draft: bad header")
	}
	n := int(binary.LittleEndian.Uint32(b[4:]))
	if n != nLayer || len(b) != 8+n+16 {
		return nil, fmt.Errorf("engine: skipped-layer draft: %d layers in %d bytes, the model has %d", n, len(b), nLayer)
	}
	k := &SkipSet{Skip: model.Skip{Attn: make([]bool, n), MLP: make([]bool, n)}}
	for l, f := range b[8 : 8+n] {
		if f > 3 {
			return nil, fmt.Errorf("engine: skipped-layer draft: layer %d has flags %#x", l, f)
		}
		k.Skip.Attn[l], k.Skip.MLP[l] = f&1 != 0, f&2 != 0
	}
	k.Agreement = math.Float64frombits(binary.LittleEndian.Uint64(b[8+n:]))
	k.Cost = math.Float64frombits(binary.LittleEndian.Uint64(b[16+n:]))
	if !(k.Agreement >= 0 && k.Agreement <= 1 && k.Cost > 0 && k.Cost <= 1) {
		return nil, fmt.Errorf("engine: skipped-layer draft: agreement %v, cost %v", k.Agreement, k.Cost)
	}
	if k.Blocks() == 0 {
		return nil, errors.New("engine: skipped-layer draft skips nothing")
	}
	return k, nil
}

// blockBytes returns the weight bytes of every layer's attention and
// feed-forward block and those of the rest of a pass (the output head and
// an embedding row).
func blockBytes(m *model.Model) (attn, mlp []int64, rest int64) {
	attn, mlp = make([]int64, m.NLayer), make([]int64, m.NLayer)
	for l := range m.Layers {
		L := &m.Layers[l]
		attn[l], mlp[l] = L.MixerBytes(), L.FFNBytes()
	}
	rest = int64(len(m.Output.Data)) + int64(m.TokEmbd.RowBytes())
	return attn, mlp, rest
}

// skipCost is the modelled cost of a draft token with skip, relative to a
// target pass: the share of the weight bytes it reads.
func skipCost(m *model.Model, skip *model.Skip) float64 {
	attn, mlp, rest := blockBytes(m)
	all, run := rest, rest
	for l := range attn {
		all += attn[l] + mlp[l]
		if !skip.Attn[l] {
			run += attn[l]
		}
		if !skip.MLP[l] {
			run += mlp[l]
		}
	}
	return float64(run) / float64(all)
}

// chainGain is the modelled speed-up of drafting with per-token
// acceptance alpha at a draft cost of r passes per token, verifying k
// tokens at cost c(k+1), at the best k up to maxK.
func chainGain(alpha, r float64, c func(k int) float64, maxK int) float64 {
	best := 0.0
	sum, pw := 1.0, 1.0
	for k := 1; k <= maxK; k++ {
		pw *= alpha
		sum += pw
		best = max(best, sum/(c(k+1)+float64(k)*r))
	}
	return best
}

// skipSearch measures, for a candidate set of skipped blocks, how often a
// one-token draft agrees with the target on a calibration text: the text
// is the model's own output, run through the target once (its keys and
// values fill the cache, its most likely next tokens are the reference),
// and every candidate is one teacher-forced Probe over it.
type skipSearch struct {
	m     *model.Model
	st    *model.State
	toks  []int32
	ref   []int32 // ref[i]: the target's most likely token after toks[:i+1]
	from  int     // first position scored (the first ones have little context)
	evals int
	pause func() // called between passes (a background search waits there)
}

func newSkipSearch(ctx context.Context, m *model.Model, st *model.State, toks []int32, pause func()) (*skipSearch, error) {
	nv := m.NVocab
	if pause == nil {
		pause = func() {}
	}
	ss := &skipSearch{m: m, st: st, toks: toks, ref: make([]int32, len(toks)), from: min(8, len(toks)/4), pause: pause}
	st.Truncate(0)
	rows := st.MaxLogitRows()
	for i := 0; i < len(toks); i += rows {
		pause()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := min(rows, len(toks)-i)
		lg, err := st.Forward(toks[i:i+n], true)
		if err != nil {
			return nil, err
		}
		for j := 0; j < n; j++ {
			ss.ref[i+j] = argmax(lg[j*nv : (j+1)*nv])
		}
	}
	return ss, nil
}

// agreement is the share of scored positions where the draft with skip
// predicts the target's token.
func (ss *skipSearch) agreement(ctx context.Context, skip *model.Skip) (float64, error) {
	st := ss.st
	nv := ss.m.NVocab
	rows := min(st.MaxLogitRows(), st.MaxBatch())
	hits, n := 0, 0
	for i := ss.from; i < len(ss.toks); i += rows {
		ss.pause()
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		k := min(rows, len(ss.toks)-i)
		if err := st.Probe(ss.toks[i:i+k], i, skip); err != nil {
			return 0, err
		}
		lg, err := st.Logits(0, k)
		if err != nil {
			return 0, err
		}
		for j := 0; j < k; j++ {
			if argmax(lg[j*nv:(j+1)*nv]) == ss.ref[i+j] {
				hits++
			}
			n++
		}
	}
	ss.evals++
	if n == 0 {
		return 0, errors.New("engine: calibration text too short")
	}
	return float64(hits) / float64(n), nil
}

// searchSkip chooses the blocks a self-speculative draft skips, to
// maximize the modelled speed-up chainGain(agreement, cost) under the
// verification cost c. It ranks every block by the agreement with it alone
// skipped, tries skipping the least harmful blocks 1, 2, … at a time, and
// then improves the best set by single additions and removals while that
// helps and the evaluation budget lasts. The best set may not pay (Gain <=
// 1): the controller then never drafts with it, but it is still the one
// to measure.
func searchSkip(ctx context.Context, ss *skipSearch, c func(k int) float64, budget int) (*SkipSet, error) {
	m := ss.m
	L := m.NLayer
	nb := 2 * L // block b: attention of layer b/2 (even b) or its feed-forward block (odd b)
	set := func(blocks []bool) *model.Skip {
		k := &model.Skip{Attn: make([]bool, L), MLP: make([]bool, L)}
		for b, on := range blocks {
			if on {
				if b%2 == 0 {
					k.Attn[b/2] = true
				} else {
					k.MLP[b/2] = true
				}
			}
		}
		return k
	}
	type cand struct {
		blocks []bool
		agree  float64
		cost   float64
		gain   float64
	}
	eval := func(blocks []bool) (cand, error) {
		k := set(blocks)
		a, err := ss.agreement(ctx, k)
		if err != nil {
			return cand{}, err
		}
		r := skipCost(m, k)
		return cand{blocks: blocks, agree: a, cost: r, gain: chainGain(a, r, c, 8)}, nil
	}
	// Rank single blocks.
	single := make([]cand, nb)
	for b := 0; b < nb; b++ {
		blocks := make([]bool, nb)
		blocks[b] = true
		var err error
		if single[b], err = eval(blocks); err != nil {
			return nil, err
		}
	}
	order := make([]int, nb)
	for b := range order {
		order[b] = b
	}
	slices.SortStableFunc(order, func(a, b int) int {
		// Least harmful first; per byte saved when equally harmful.
		if single[a].agree != single[b].agree {
			if single[a].agree > single[b].agree {
				return -1
			}
			return 1
		}
		if single[a].cost < single[b].cost {
			return -1
		}
		return 0
	})
	best := single[order[0]]
	// Skip the k least harmful blocks, k = 2 … nb-1.
	for k := 2; k < nb && ss.evals < budget; k++ {
		blocks := make([]bool, nb)
		for _, b := range order[:k] {
			blocks[b] = true
		}
		cd, err := eval(blocks)
		if err != nil {
			return nil, err
		}
		if cd.gain > best.gain {
			best = cd
		}
		if cd.agree < 0.05 {
			break // everything after skips even more
		}
	}
	// Local search: flip one block while that helps.
	for improved := true; improved && ss.evals < budget; {
		improved = false
		for _, b := range order {
			if ss.evals >= budget {
				break
			}
			blocks := slices.Clone(best.blocks)
			blocks[b] = !blocks[b]
			if !slices.Contains(blocks, true) || !slices.Contains(blocks, false) {
				continue
			}
			cd, err := eval(blocks)
			if err != nil {
				return nil, err
			}
			if cd.gain > best.gain*1.001 {
				best, improved = cd, true
			}
		}
	}
	return &SkipSet{Skip: *set(best.blocks), Agreement: best.agree, Cost: best.cost, Gain: best.gain,
		Evals: ss.evals, Tokens: len(ss.toks)}, nil
}

// argmax is the index of the largest logit (the lowest on ties).
func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// top2 returns the two most likely tokens of logits and the probability
// of each under their softmax.
func top2(logits []float32) (a, b int32, pa, pb float64) {
	a, b = -1, -1
	for i, v := range logits {
		switch {
		case a < 0 || v > logits[a]:
			a, b = int32(i), a
		case b < 0 || v > logits[b]:
			b = int32(i)
		}
	}
	if a < 0 {
		return -1, -1, 0, 0
	}
	mx := float64(logits[a])
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - mx)
	}
	pa = 1 / sum
	if b >= 0 {
		pb = math.Exp(float64(logits[b])-mx) / sum
	}
	return a, b, pa, pb
}

// confBounds are the lower bounds of the confidence classes a model
// drafter's tokens fall in by their probability under the draft.
var confBounds = [...]float64{0.2, 0.4, 0.6, 0.8, 0.9, 0.97}

// confClass buckets a draft token's probability under the draft model
// into a confidence class: the controller tracks acceptance per class, so
// it learns how far to trust each.
func confClass(p float64) int {
	c := 0
	for c < len(confBounds) && p >= confBounds[c] {
		c++
	}
	return c
}

// modelDraftTree drafts a chain greedily with a model, one step per
// token, and beside every token the model's second choice as a leaf. step
// feeds tokens and returns the logits after the last; the first step feeds
// first, the later ones one drafted token each, in one (a buffer of one
// token the drafter owns). Drafting stops after depth tokens, or early when
// the draft's own probability of the whole chain so far falls under
// minPath. It returns how many steps it ran.
func modelDraftTree(first, one []int32, depth int, t *spec.Tree, d int, step func([]int32) ([]float32, error)) int {
	type leaf struct {
		parent int
		tok    int32
		class  int
	}
	var alt [spec.MaxTree]leaf
	nalt, parent, steps := 0, -1, 0
	path := 1.0
	feed := first
	for steps < depth {
		logits, err := step(feed)
		steps++
		if err != nil {
			break
		}
		a, b, pa, pb := top2(logits)
		if a < 0 {
			break
		}
		if b >= 0 && pb > minAlt && nalt < len(alt) {
			alt[nalt] = leaf{parent, b, confClass(pb)}
			nalt++
		}
		if parent = t.Add(parent, a, d, confClass(pa)); parent < 0 {
			break
		}
		if path *= pa; path < minPath {
			break
		}
		one[0] = a
		feed = one[:1]
	}
	for _, x := range alt[:nalt] {
		t.Add(x.parent, x.tok, d, x.class)
	}
	return steps
}

// selfDraft drafts with the target's own state, skipping the blocks of
// set: the keys and values of the history are the target's, the draft's
// own go to the slots verification overwrites next.
type selfDraft struct {
	s     *model.State
	set   *SkipSet
	steps int // passes the last DraftTree ran
	one   [1]int32
}

// minPath stops a model drafter's chain once the draft itself rates the
// chain so far less likely than this: the next tokens would mostly be
// wasted work. minAlt is the least probability a second choice needs to
// be proposed beside the first.
const (
	minPath = 0.1
	minAlt  = 0.05
)

// Name implements spec.Drafter.
func (d *selfDraft) Name() string { return "self" }

// step feeds toks through the skipping draft and returns the logits
// after the last.
func (d *selfDraft) step(toks []int32) ([]float32, error) {
	if err := d.s.ForwardTree(toks, nil, &d.set.Skip); err != nil {
		return nil, err
	}
	return d.s.Logits(len(toks)-1, len(toks))
}

// DraftTree implements spec.TreeDrafter. The state must hold the history
// but its last token (which the next pass feeds); it is left so.
func (d *selfDraft) DraftTree(history []int32, depth int, t *spec.Tree, di int) {
	d.steps = 0
	s := d.s
	base := s.Len()
	if len(history) != base+1 {
		return
	}
	d.steps = modelDraftTree(history[base:], d.one[:], min(depth, s.Ctx()-base), t, di, d.step)
	s.Truncate(base)
}

// Draft implements spec.Drafter: the first-choice chain of DraftTree.
func (d *selfDraft) Draft(history []int32, max int, dst []int32) ([]int32, int) {
	return firstChoices(d, history, max, dst)
}

// firstChoices drafts a tree with d and returns its chain of first
// choices (for callers that want a chain).
func firstChoices(d spec.TreeDrafter, history []int32, max int, dst []int32) ([]int32, int) {
	t := spec.NewTree(1)
	d.DraftTree(history, max, t, 0)
	dst = dst[:0]
	for _, n := range t.Nodes {
		dst = append(dst, n.Tok)
	}
	return dst, 0
}

// tuneSkip searches the blocks a self-speculative draft of m skips, on
// toks (the model's own output), with a scratch state of its own and the
// verification cost c; budget bounds the candidate sets measured.
func tuneSkip(ctx context.Context, m *model.Model, toks []int32, threads, budget int, c func(k int) float64, pause func()) (*SkipSet, error) {
	rows := 32
	st, err := m.NewState(model.StateOptions{Ctx: len(toks) + rows + 1, Batch: rows, LogitRows: rows, Threads: threads, FullHistory: true})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	ss, err := newSkipSearch(ctx, m, st, toks, pause)
	if err != nil {
		return nil, err
	}
	return searchSkip(ctx, ss, c, budget)
}

// tuner runs the skipped-layer search, at most one at a time, and hands
// its result to the next request (Generate installs it).
type tuner struct {
	mu      sync.Mutex
	running bool
	cancel  context.CancelFunc
	done    chan struct{} // closed when the running search ends
	found   *SkipSet      // a result not yet installed
	busy    atomic.Bool   // a request runs: a background search waits
}

// SelfSpec modes (Options.SelfSpec).
const (
	SelfSpecAuto = "auto" // search in the background after a request, when idle (the default)
	SelfSpecLoad = "load" // search at load, on text the model generates from nothing
	SelfSpecOff  = "off"  // no skipped-layer draft
)

// selfSpecMode checks Options.SelfSpec.
func selfSpecMode(s string) (string, error) {
	switch s {
	case "", SelfSpecAuto:
		return SelfSpecAuto, nil
	case SelfSpecLoad, SelfSpecOff:
		return s, nil
	}
	return "", fmt.Errorf("engine: self-speculation mode %q (want auto, load or off)", s)
}

// searchBudget bounds the candidate sets one search measures.
func searchBudget(nLayer int) int { return min(6*nLayer, 200) }

// costModel returns the controller's current c(k) for k up to
// spec.MaxDraft+1, frozen (the search may run on another goroutine).
func (e *Engine) costModel() func(int) float64 {
	var c [spec.MaxDraft + 2]float64
	for k := 1; k < len(c); k++ {
		c[k] = e.spec.ctrl.Cost(k)
	}
	return func(k int) float64 { return c[min(max(k, 1), len(c)-1)] }
}

// TuneSelfSpec chooses the blocks the skipped-layer draft skips, by a
// search on toks, the model's own output (nil: text the model generates
// from nothing), and installs the choice. It blocks; the engine must not
// be generating meanwhile.
func (e *Engine) TuneSelfSpec(ctx context.Context, toks []int32) (*SkipSet, error) {
	if len(toks) == 0 {
		var err error
		if toks, err = e.ownText(ctx, calibrationTokens); err != nil {
			return nil, err
		}
	}
	set, err := tuneSkip(ctx, e.model, toks, e.opt.Threads, searchBudget(e.model.NLayer), e.costModel(), nil)
	if err != nil {
		return nil, err
	}
	e.installSelf(set)
	return set, nil
}

// calibrationTokens is how much of its own output the search reads.
const calibrationTokens = 160

// ownText is the model's greedy continuation of its BOS token (or of
// nothing), n tokens long, from a fresh cache.
func (e *Engine) ownText(ctx context.Context, n int) ([]int32, error) {
	s := e.state
	defer s.Truncate(0)
	s.Truncate(0)
	toks := make([]int32, 0, n)
	first := e.tok.BOS()
	if first < 0 {
		first = 0
	}
	toks = append(toks, first)
	for len(toks) < min(n, s.Ctx()) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		lg, err := s.Forward(toks[len(toks)-1:], false)
		if err != nil {
			return nil, err
		}
		toks = append(toks, argmax(lg))
	}
	return toks, nil
}

// installSelf makes set the skipped-layer draft and seeds the
// controller with the agreement the search measured.
func (e *Engine) installSelf(set *SkipSet) {
	if set == nil {
		return
	}
	e.spec.self = &selfDraft{s: e.state, set: set}
	e.spec.ctrl.AssumeDraftCost(idxSelf, set.Cost)
	e.spec.ctrl.Seed(idxSelf, set.Agreement, 20)
}

// takeTuned installs a background search's result, if one came in.
func (e *Engine) takeTuned() {
	t := &e.spec.tune
	t.mu.Lock()
	found := t.found
	t.found = nil
	t.mu.Unlock()
	e.installSelf(found)
}

// tuneInBackground starts a search on history (the request's prompt and
// output) when the engine has no skipped-layer draft and none is being
// searched. It runs while no request does.
func (e *Engine) tuneInBackground(history []int32) {
	t := &e.spec.tune
	if e.selfMode != SelfSpecAuto || e.spec.self != nil || len(history) < minCalibration {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running || t.found != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.running, t.cancel, t.done = true, cancel, make(chan struct{})
	toks := slices.Clone(history[max(0, len(history)-2*calibrationTokens):])
	costs, threads, m := e.costModel(), e.opt.Threads, e.model
	pause := func() {
		for t.busy.Load() && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
	}
	go func() {
		defer close(t.done)
		set, err := tuneSkip(ctx, m, toks, threads, searchBudget(m.NLayer), costs, pause)
		t.mu.Lock()
		defer t.mu.Unlock()
		t.running = false
		if err == nil {
			t.found = set
		}
	}()
}

// minCalibration is the least text a background search starts on.
const minCalibration = 64

// stopTuning cancels a background search and waits for it to end.
func (e *Engine) stopTuning() {
	t := &e.spec.tune
	t.mu.Lock()
	cancel, done := t.cancel, t.done
	t.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// WaitTuned waits for a background skipped-layer search to end and
// installs its result; it returns the engine's skipped-layer draft (nil:
// none).
func (e *Engine) WaitTuned() *SkipSet {
	t := &e.spec.tune
	t.mu.Lock()
	done := t.done
	t.mu.Unlock()
	if done != nil {
		<-done
	}
	e.takeTuned()
	if e.spec.self == nil {
		return nil
	}
	return e.spec.self.set
}
