package spec

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

	"github.com/geisten/geist/engine/model"
)

// Self-speculative drafting (Draft & Verify, Zhang et al. 2023): the draft
// is the target model itself with some attention and feed-forward blocks
// skipped. It needs no second model and no training; it reads the
// target's own keys and values for the layers it runs, so drafting costs
// only the blocks it runs and the output head. Which blocks to skip is
// chosen per model by a search on the model's own outputs (SearchSkip) and
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

// UnmarshalSkipSet decodes a set for a model of nLayer layers, refusing
// anything malformed: another magic, layer count or length, unknown flag
// bits, no block skipped, or figures outside [0, 1].
func UnmarshalSkipSet(b []byte, nLayer int) (*SkipSet, error) {
	if len(b) < 8 || string(b[:4]) != skipMagic {
		return nil, errors.New("spec: skipped-layer draft: bad header")
	}
	n := int(binary.LittleEndian.Uint32(b[4:]))
	if n != nLayer || len(b) != 8+n+16 {
		return nil, fmt.Errorf("spec: skipped-layer draft: %d layers in %d bytes, the model has %d", n, len(b), nLayer)
	}
	k := &SkipSet{Skip: model.Skip{Attn: make([]bool, n), MLP: make([]bool, n)}}
	for l, f := range b[8 : 8+n] {
		if f > 3 {
			return nil, fmt.Errorf("spec: skipped-layer draft: layer %d has flags %#x", l, f)
		}
		k.Skip.Attn[l], k.Skip.MLP[l] = f&1 != 0, f&2 != 0
	}
	k.Agreement = math.Float64frombits(binary.LittleEndian.Uint64(b[8+n:]))
	k.Cost = math.Float64frombits(binary.LittleEndian.Uint64(b[16+n:]))
	if !(k.Agreement >= 0 && k.Agreement <= 1 && k.Cost > 0 && k.Cost <= 1) {
		return nil, fmt.Errorf("spec: skipped-layer draft: agreement %v, cost %v", k.Agreement, k.Cost)
	}
	if k.Blocks() == 0 {
		return nil, errors.New("spec: skipped-layer draft skips nothing")
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

// SkipSearch measures, for a candidate set of skipped blocks, how often a
// one-token draft agrees with the target on a calibration text: the text
// is the model's own output, run through the target once (its keys and
// values fill the cache, its most likely next tokens are the reference),
// and every candidate is one teacher-forced Probe over it.
type SkipSearch struct {
	m     *model.Model
	st    *model.State
	toks  []int32
	ref   []int32 // ref[i]: the target's most likely token after toks[:i+1]
	from  int     // first position scored (the first ones have little context)
	evals int
	pause func() // called between passes (a background search waits there)
}

func NewSkipSearch(ctx context.Context, m *model.Model, st *model.State, toks []int32, pause func()) (*SkipSearch, error) {
	nv := m.NVocab
	if pause == nil {
		pause = func() {}
	}
	ss := &SkipSearch{m: m, st: st, toks: toks, ref: make([]int32, len(toks)), from: min(8, len(toks)/4), pause: pause}
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
			ss.ref[i+j] = Argmax(lg[j*nv : (j+1)*nv])
		}
	}
	return ss, nil
}

// Agreement is the share of scored positions where the draft with skip
// predicts the target's token.
func (ss *SkipSearch) Agreement(ctx context.Context, skip *model.Skip) (float64, error) {
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
			if Argmax(lg[j*nv:(j+1)*nv]) == ss.ref[i+j] {
				hits++
			}
			n++
		}
	}
	ss.evals++
	if n == 0 {
		return 0, errors.New("spec: calibration text too short")
	}
	return float64(hits) / float64(n), nil
}

// SearchSkip chooses the blocks a self-speculative draft skips, to
// maximize the modelled speed-up chainGain(agreement, cost) under the
// verification cost c. It ranks every block by the agreement with it alone
// skipped, tries skipping the least harmful blocks 1, 2, … at a time, and
// then improves the best set by single additions and removals while that
// helps and the evaluation budget lasts. The best set may not pay (Gain <=
// 1): the controller then never drafts with it, but it is still the one
// to measure.
func SearchSkip(ctx context.Context, ss *SkipSearch, c func(k int) float64, budget int) (*SkipSet, error) {
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
		a, err := ss.Agreement(ctx, k)
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

// SelfDraft drafts with the target's own state, skipping the blocks of
// set: the keys and values of the history are the target's, the draft's
// own go to the slots verification overwrites next.
type SelfDraft struct {
	s     SkipState
	set   *SkipSet
	steps int // passes the last DraftTree ran
	one   [1]int32
}

// SkipState is what the skipped-layer draft drafts with: the target's own
// state (engine/model's State).
type SkipState interface {
	// ForwardTree feeds tokens (a chain when parents is nil) with the
	// blocks of skip skipped; Logits then returns rows lo to hi.
	ForwardTree(tokens, parents []int32, skip *model.Skip) error
	Logits(lo, hi int) ([]float32, error)
	Len() int       // the tokens the cache holds
	Ctx() int       // the most it can hold
	Truncate(n int) // forget all but the first n
}

// NewSelfDraft drafts with the target's state s, skipping the blocks of
// set.
func NewSelfDraft(s SkipState, set *SkipSet) *SelfDraft { return &SelfDraft{s: s, set: set} }

// Set is the blocks the draft skips.
func (d *SelfDraft) Set() *SkipSet { return d.set }

// Passes implements ModelDrafter.
func (d *SelfDraft) Passes() int { return d.steps }

// Name implements Drafter.
func (d *SelfDraft) Name() string { return "self" }

// step feeds toks through the skipping draft and returns the logits
// after the last.
func (d *SelfDraft) step(toks []int32) ([]float32, error) {
	if err := d.s.ForwardTree(toks, nil, &d.set.Skip); err != nil {
		return nil, err
	}
	return d.s.Logits(len(toks)-1, len(toks))
}

// DraftTree implements TreeDrafter. The state must hold the history
// but its last token (which the next pass feeds); it is left so.
func (d *SelfDraft) DraftTree(history []int32, depth int, t *Tree, di int) {
	d.steps = 0
	s := d.s
	base := s.Len()
	if len(history) != base+1 {
		return
	}
	d.steps = modelDraftTree(history[base:], d.one[:], min(depth, s.Ctx()-base), t, di, d.step)
	s.Truncate(base)
}

// Draft implements Drafter: the first-choice chain of DraftTree.
func (d *SelfDraft) Draft(history []int32, max int, dst []int32) ([]int32, int) {
	return firstChoices(d, history, max, dst)
}

// TuneSkip searches the blocks a self-speculative draft of m skips, on
// toks (the model's own output), with a scratch state of its own and the
// verification cost c; budget bounds the candidate sets measured. pause
// (when not nil) is called between passes and between the layers of a
// pass.
func TuneSkip(ctx context.Context, m *model.Model, toks []int32, threads, budget int, c func(k int) float64, pause func()) (*SkipSet, error) {
	if m.RecLayers() > 0 {
		return nil, errors.New("spec: the skipped-layer search scores drafts by probes, which a model with recurrent (DeltaNet) layers does not support; its state is not kept per position")
	}
	rows := 32
	st, err := m.NewState(model.StateOptions{Ctx: len(toks) + rows + 1, Batch: rows, LogitRows: rows, Threads: threads, FullHistory: true, Yield: pause})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	ss, err := NewSkipSearch(ctx, m, st, toks, pause)
	if err != nil {
		return nil, err
	}
	return SearchSkip(ctx, ss, c, budget)
}

// Tuner runs the skipped-layer search in the background, at most one at
// a time, while no request runs, and keeps its result for the next
// request to install. A request's arrival (Busy(true)) parks the search
// at its next layer boundary, so the request shares the processors with
// at most one layer of the search's current pass, not the rest of it.
type Tuner struct {
	mu      sync.Mutex
	running bool
	cancel  context.CancelFunc
	done    chan struct{} // closed when the running search ends
	found   *SkipSet      // a result not yet taken
	// resume is non-nil while a request runs: a search parks on it, and
	// Busy(false) closes it.
	resume atomic.Pointer[chan struct{}]
	busyMu sync.Mutex // orders Busy's calls
	// yielded, when set (tests), is called at every point where a search
	// may park, before it looks at resume; parked when it parks.
	yielded, parked func()
}

// Busy tells a background search whether a request runs: from
// Busy(true) on it does not start another layer until Busy(false).
func (t *Tuner) Busy(b bool) {
	t.busyMu.Lock()
	defer t.busyMu.Unlock()
	if cur := t.resume.Load(); b && cur == nil {
		ch := make(chan struct{})
		t.resume.Store(&ch)
	} else if !b && cur != nil {
		t.resume.Store(nil)
		close(*cur)
	}
}

// wait parks the calling search while a request runs (until ctx ends).
func (t *Tuner) wait(ctx context.Context) {
	if t.yielded != nil {
		t.yielded()
	}
	for {
		ch := t.resume.Load()
		if ch == nil {
			return
		}
		if t.parked != nil {
			t.parked()
		}
		select {
		case <-*ch:
		case <-ctx.Done():
			return
		}
	}
}

// Start searches the blocks m's skipped-layer draft skips on a copy of
// toks, in the background, with threads threads and the verification
// cost c (frozen: the search runs on another goroutine); a search already
// running or a result not yet taken keeps it from starting.
func (t *Tuner) Start(m *model.Model, toks []int32, threads int, c func(k int) float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running || t.found != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.running, t.cancel, t.done = true, cancel, make(chan struct{})
	toks = slices.Clone(toks)
	go func() {
		defer close(t.done)
		set, err := TuneSkip(ctx, m, toks, threads, SearchBudget(m.NLayer), c, func() { t.wait(ctx) })
		t.mu.Lock()
		defer t.mu.Unlock()
		t.running = false
		if err == nil {
			t.found = set
		}
	}()
}

// Take returns a search's result not yet taken (nil: none).
func (t *Tuner) Take() *SkipSet {
	t.mu.Lock()
	defer t.mu.Unlock()
	found := t.found
	t.found = nil
	return found
}

// Stop cancels a running search and waits for it to end.
func (t *Tuner) Stop() {
	t.mu.Lock()
	cancel, done := t.cancel, t.done
	t.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// Wait waits for a running search to end.
func (t *Tuner) Wait() {
	t.mu.Lock()
	done := t.done
	t.mu.Unlock()
	if done != nil {
		<-done
	}
}

// SearchBudget bounds the candidate sets one search of a model of nLayer
// layers measures.
func SearchBudget(nLayer int) int { return min(6*nLayer, 200) }
