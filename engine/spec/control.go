package spec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Limits of the controller's tables.
const (
	MaxDrafters = 8  // drafters a Controller tracks
	MaxClasses  = 16 // confidence classes per drafter
	MaxDraft    = 32 // most tokens one step may verify besides the fed one
)

// Controller decides what drafted tokens to verify. It keeps the measured
// cost of a forward pass over k tokens, c(k) = t(k)/t(1), and the observed
// acceptance of every drafter, confidence class and sibling rank, and
// keeps the part of a drafted tree that maximizes expected tokens per unit
// of time:
//
//	gain = (1 + Σ P(node)) / c(1 + nodes)
//
// where P(node) is the chance that verification reaches the node: the
// product of the acceptance rates along its path. For a chain with rate α
// that is (1 + α + … + α^k)/c(k+1). It drafts only when that beats plain
// decoding. When drafts keep failing the rates fall and drafting stops,
// apart from one-token probes spaced so that they cost at most about
// probeBudget of the time, further apart after every failed probe. It
// allocates nothing.
type Controller struct {
	maxDraft int
	cost     [MaxDraft + 2]float64 // lower-envelope seconds of a pass over k tokens; 0 = not measured
	seen     [MaxDraft + 2]int     // passes measured per size
	draftT   [MaxDrafters]float64  // EMA seconds to draft one token
	acc      [MaxDrafters][MaxClasses][MaxRanks]rate
	first    [MaxDrafters]rate    // acceptance of each drafter's first choices, all classes
	draftR   [MaxDrafters]float64 // a drafted token's modelled cost in passes
	idle     int                  // decisions since the last verified draft
	backoff  int                  // failed probes in a row
	probing  bool                 // the current step verifies a probe
	drafting bool                 // the current step verifies drafts because they pay
	assumed  float64              // when > 0: plan with c(k) = 1 + assumed·(k−1)
	planP    [MaxTree]float64
}

// AssumeCost makes the controller plan with the cost model c(k) = 1 +
// slope·(k−1) instead of the measured pass times (slope <= 0 goes back to
// measurements). It is for studying acceptance as on a board where
// verification is cheaper than on the machine at hand, for instance a tiny
// model whose passes cost in proportion to their tokens.
func (c *Controller) AssumeCost(slope float64) { c.assumed = max(slope, 0) }

// AssumeDraftCost sets the modelled cost of drafter d's tokens, in target
// passes: a model drafter's share of the target's weight bytes, what a
// token costs on a board where passes cost what they read. It is the cost
// under an assumed cost model (AssumeCost), and the least cost assumed
// under measured ones.
func (c *Controller) AssumeDraftCost(d int, passes float64) {
	if d >= 0 && d < MaxDrafters {
		c.draftR[d] = max(passes, 0)
	}
}

// Cost is c(k), the modelled cost of verifying a pass of k tokens relative
// to a pass of one.
func (c *Controller) Cost(k int) float64 { return c.relCost(k) }

// rate is an exponentially weighted Bernoulli estimate with a prior.
type rate struct {
	succ, trials float64
}

const (
	rateDecay  = 0.97 // weight of the past per observation
	priorTrial = 2
	costDown   = 0.5  // weight of a pass faster than the estimate
	costUp     = 0.05 // weight of a slower one: a shared machine adds spikes, never removes work
	minGain    = 1.03 // drafting must promise at least 3% more tokens per second
	// Probes: the first after probeFirst idle steps, then spaced so that
	// a failing probe costs about probeBudget of the time, twice as far
	// apart after each failure, at most probeMax steps.
	probeFirst  = 16
	probeBudget = 0.01
	probeMax    = 1024
)

// priorSucc is the prior's successes in priorTrial trials, by rank: a
// first choice starts at α = 0.6, a runner-up at 0.25, a third at 0.1.
var priorSucc = [MaxRanks]float64{1.2, 0.5, 0.2}

func (r *rate) alpha(rank int) float64 { return (r.succ + priorSucc[rank]) / (r.trials + priorTrial) }

func (r *rate) observe(ok bool) {
	r.succ *= rateDecay
	r.trials *= rateDecay
	r.trials++
	if ok {
		r.succ++
	}
}

// NewController returns a controller that verifies at most maxDraft
// drafted tokens per step.
func NewController(maxDraft int) *Controller {
	return &Controller{maxDraft: min(max(maxDraft, 0), MaxDraft)}
}

// ObservePass records that a forward pass over k tokens took seconds. The
// estimate follows the lower envelope of the measurements (it moves down
// fast and up slowly), so that interference from other processes, which
// only ever adds time, does not distort the ratio c(k) = t(k)/t(1).
func (c *Controller) ObservePass(k int, seconds float64) {
	if k < 1 || k >= len(c.cost) || seconds <= 0 {
		return
	}
	old := c.cost[k]
	c.cost[k] = envelope(old, seconds)
	c.seen[k]++
	if k == 1 && old > 0 {
		// One-token passes are measured far more often than any other
		// size (every plain step is one), so when the machine's speed
		// changes (another process's load comes or goes, experts enter
		// the page cache) t(1) follows at once while t(k) of a size
		// verified a few times keeps its old speed, and their ratio
		// c(k) drifts: up, when the machine gets faster, until drafting
		// that pays looks hopeless and is never measured again (a
		// mixture of experts on a shared machine went from c(2) = 1.15
		// to 2.08 in one run this way). The other sizes' times are
		// scaled with t(1): c(k) changes only by measuring k.
		f := c.cost[1] / old
		for j := 2; j < len(c.cost); j++ {
			c.cost[j] *= f
		}
	}
}

// trusted is how many measurements of a size it takes before the
// controller believes them over its optimistic prior: a first pass of a new
// size is often slow (cold caches, page faults), and a size believed too
// expensive would never be tried, so never measured, again.
const trusted = 3

func envelope(est, x float64) float64 {
	switch {
	case est == 0:
		return x
	case x < est:
		return est + costDown*(x-est)
	}
	return est + costUp*(x-est)
}

// ObserveDraftTime records that drafter d took seconds to draft n tokens
// (only drafters that run a model cost anything worth counting).
func (c *Controller) ObserveDraftTime(d, n int, seconds float64) {
	if d < 0 || d >= MaxDrafters || n <= 0 {
		return
	}
	c.draftT[d] = envelope(c.draftT[d], seconds/float64(n))
}

// ObserveEdge records one verified edge: a node of drafter d with class
// and rank whose parent verification reached, and whether the target's
// token was the node's (ok) or not.
func (c *Controller) ObserveEdge(d, class, rank int, ok bool) {
	if d < 0 || d >= MaxDrafters {
		return
	}
	class = min(max(class, 0), MaxClasses-1)
	rank = min(max(rank, 0), MaxRanks-1)
	c.acc[d][class][rank].observe(ok)
	if rank == 0 {
		c.first[d].observe(ok)
	}
}

// Observe records a verified chain of drafted tokens from drafter d
// (first choices of one class): of drafted tokens, the first accepted were
// accepted and the next one, if any, was rejected.
func (c *Controller) Observe(d, class, drafted, accepted int) {
	for i := 0; i < min(accepted+1, drafted); i++ {
		c.ObserveEdge(d, class, 0, i < accepted)
	}
}

// Seed sets drafter d's acceptance of first choices, all classes, to alpha
// as if measured over trials tokens (a self-speculative draft's agreement
// measured by its layer search, say), where nothing was measured yet.
func (c *Controller) Seed(d int, alpha, trials float64) {
	if d < 0 || d >= MaxDrafters || c.first[d].trials > 0 || !(alpha >= 0 && alpha <= 1) {
		return
	}
	c.first[d] = rate{succ: alpha*(trials+priorTrial) - priorSucc[0], trials: trials}
	c.first[d].succ = min(max(c.first[d].succ, 0), trials)
}

// Alpha is the current acceptance estimate of a node of drafter d with
// class and rank, given that verification reaches its parent.
func (c *Controller) Alpha(d, class, rank int) float64 {
	class = min(max(class, 0), MaxClasses-1)
	rank = min(max(rank, 0), MaxRanks-1)
	return c.acc[d][class][rank].alpha(rank)
}

// relCost is c(k): the cost of a pass over k tokens relative to one token.
// Unmeasured sizes are interpolated between measured ones; beyond them a
// prior that grows with k stands in until a measurement replaces it. A
// measured cost never counts for less than 1 + minSlope·(k−1): every
// token adds work (its attention, its row of the output head), and on a
// loaded machine the ratio of two noisy timings can make a bigger pass
// look free, which drafts with hopeless acceptance would then exploit.
func (c *Controller) relCost(k int) float64 {
	if c.assumed > 0 {
		return 1 + c.assumed*float64(k-1)
	}
	return max(c.measuredCost(k), 1+minSlope*float64(k-1))
}

// minSlope is the least measured cost of one more token in a pass.
const minSlope = 0.04

func (c *Controller) measuredCost(k int) float64 {
	t1 := c.cost[1]
	prior := 1 + 0.15*float64(k-1)
	if t1 == 0 {
		return prior
	}
	if c.seen[k] >= trusted {
		return c.cost[k] / t1
	}
	if c.cost[k] != 0 {
		return min(c.cost[k]/t1, prior)
	}
	lo, hi := 1, 0
	for j := k - 1; j >= 1; j-- {
		if c.seen[j] >= trusted || j == 1 {
			lo = j
			break
		}
	}
	for j := k + 1; j < len(c.cost); j++ {
		if c.seen[j] >= trusted {
			hi = j
			break
		}
	}
	clo := c.cost[lo] / t1
	if hi == 0 {
		// Extrapolate with the slope seen so far, at least a small one.
		slope := 0.15
		if lo > 1 {
			slope = max((clo-1)/float64(lo-1), 0.02)
		}
		return clo + slope*float64(k-lo)
	}
	chi := c.cost[hi] / t1
	return clo + (chi-clo)*float64(k-lo)/float64(hi-lo)
}

// Decide returns how many tokens a chain drafter d (class class; -1: all
// its classes) should draft, of the available ones, counting its drafting
// time: 0 means decode one token plainly. It is for drafters that pay per drafted token (a
// model); a step that drafts with it is planned with Plan afterwards.
func (c *Controller) Decide(d, class, available int) int {
	available = min(available, c.maxDraft)
	if available <= 0 || d < 0 || d >= MaxDrafters {
		return 0
	}
	if !c.measured() {
		return 0
	}
	alpha := c.first[d].alpha(0)
	if class >= 0 {
		alpha = c.Alpha(d, class, 0)
	}
	r := c.draftCost(d)
	best, bestGain := 0, minGain
	sum, pw := 1.0, 1.0
	for k := 1; k <= available; k++ {
		pw *= alpha
		sum += pw
		if g := sum / (c.relCost(k+1) + float64(k)*r); g > bestGain {
			best, bestGain = k, g
		}
	}
	if best == 0 && c.probeDue(r) {
		best = 1
	}
	return best
}

// Worth reports whether drafter d should draft one more token after k
// drafted ones, when verification reaches it with probability reach (the
// product of the learned acceptance of the chain's confidence classes):
// when the token it adds, reach, outweighs what it adds to the step's
// cost, a pass one token longer and the drafting itself, c(k+2) − c(k+1)
// + r. This is the confidence gate of a model drafter: it stops a chain
// once the draft's confidence (by class) no longer pays, with a threshold
// that follows the measured costs and acceptance. Before the controller
// has measured anything every token is worth drafting.
func (c *Controller) Worth(d, k int, reach float64) bool {
	if d < 0 || d >= MaxDrafters || !c.measured() {
		return true
	}
	return reach > c.relCost(k+2)-c.relCost(k+1)+c.draftCost(d)
}

// draftCost is what drafting one token with drafter d costs, in passes of
// one token: the modelled cost (its share of the weight bytes) with an
// assumed cost model, else the measured one but never less than the
// modelled one (timing on a loaded machine is noisy, and a drafter that
// reads most of the model's weights costs most of a pass).
func (c *Controller) draftCost(d int) float64 {
	if c.assumed > 0 || c.cost[1] == 0 {
		return c.draftR[d]
	}
	return max(c.draftT[d]/c.cost[1], c.draftR[d])
}

// measured reports whether the controller knows enough to plan: the time
// of a one-token pass, measured twice (a drafting step's cost is relative
// to it), or an assumed cost model.
func (c *Controller) measured() bool { return c.assumed > 0 || c.seen[1] >= 2 }

// Plan estimates for every node of t the chance that verification reaches
// it, keeps the nodes (at most budget, and at most MaxDraft) whose
// verification promises the most tokens per unit of time, lays them out
// depth first (see Tree) and returns how many it kept: 0 means decode one
// token plainly. With fixed it keeps the budget's likeliest nodes whatever
// they cost. Every step calls Plan once, then Settle.
func (c *Controller) Plan(t *Tree, budget int, fixed bool) int {
	c.probing, c.drafting = false, false
	budget = min(budget, c.maxDraft, t.Len())
	if !fixed && !c.measured() {
		budget = 0
	}
	if budget <= 0 {
		t.Reset()
		c.idle++
		return 0
	}
	P := c.planP[:t.Len()]
	for i := range t.Nodes {
		nd := &t.Nodes[i]
		P[i] = c.Alpha(int(nd.Drafter), int(nd.Class), int(nd.Rank))
		if nd.Parent >= 0 {
			P[i] *= P[nd.Parent]
		}
		nd.P = P[i]
	}
	// Order the nodes by P, likeliest first, earlier nodes first on ties:
	// a parent (never less likely than its child) precedes its children,
	// so every prefix of the order is a tree. Insertion sort: n <= 64.
	ord := t.order[:t.Len()]
	for i := range ord {
		j := i
		for ; j > 0 && P[ord[j-1]] < P[i]; j-- {
			ord[j] = ord[j-1]
		}
		ord[j] = int16(i)
	}
	best, bestGain := 0, minGain
	if fixed {
		best = budget
	} else {
		sum := 1.0
		for m := 1; m <= budget; m++ {
			sum += P[ord[m-1]]
			if g := sum / c.relCost(m+1); g > bestGain {
				best, bestGain = m, g
			}
		}
		c.drafting = best > 0
		if best == 0 && c.probeDue(0) {
			best, c.probing = 1, true
		}
	}
	if best == 0 {
		t.Reset()
		c.idle++
		return 0
	}
	c.idle = 0
	t.keep(best)
	return best
}

// probeDue reports whether it is time to verify a one-token probe
// although drafting does not pay now: the text may have begun to repeat,
// and only a verified draft shows it. A probe costs c(2)−1 passes and r
// for drafting its token, so probes come no more often than that cost
// over probeBudget, and twice as far apart after every probe until
// drafting pays again.
func (c *Controller) probeDue(r float64) bool {
	gap := max(probeFirst, int((c.relCost(2)-1+r)/probeBudget))
	gap = min(gap<<min(c.backoff, 10), probeMax)
	return c.idle >= gap
}

// Settle closes a step that verified drafted tokens (accepted of them
// were accepted). A probe backs the next one off, accepted or not (its
// outcome updates the acceptance, which decides whether drafting pays);
// a step that drafted because it paid ends the back-off.
func (c *Controller) Settle(accepted int) {
	switch {
	case c.drafting:
		c.backoff = 0
	case c.probing:
		c.backoff++
	}
	c.probing, c.drafting = false, false
}

// acceptMagic heads the encoded acceptance table.
const acceptMagic = "GAC2"

// acceptSize is the length of an encoded acceptance table.
const acceptSize = 16 + MaxDrafters*(MaxClasses*MaxRanks+1)*16

// MarshalAcceptance encodes the acceptance estimates of every drafter,
// class and rank (not the pass costs, which belong to the machine and its
// load at the time), so that a restarted engine drafts as well as it did
// before from its first step.
func (c *Controller) MarshalAcceptance() []byte {
	b := make([]byte, 0, acceptSize)
	b = append(b, acceptMagic...)
	b = binary.LittleEndian.AppendUint32(b, MaxDrafters)
	b = binary.LittleEndian.AppendUint32(b, MaxClasses)
	b = binary.LittleEndian.AppendUint32(b, MaxRanks)
	put := func(r rate) {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(r.succ))
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(r.trials))
	}
	for d := range c.acc {
		for k := range c.acc[d] {
			for r := range c.acc[d][k] {
				put(c.acc[d][k][r])
			}
		}
		put(c.first[d])
	}
	return b
}

// UnmarshalAcceptance restores estimates encoded by MarshalAcceptance. It
// rejects (and leaves the controller unchanged on) anything malformed:
// another table shape or version, a wrong length, or counts that are not
// finite numbers with 0 <= successes <= trials.
func (c *Controller) UnmarshalAcceptance(b []byte) error {
	if len(b) < 16 || string(b[:4]) != acceptMagic {
		return errors.New("spec: acceptance table: bad header")
	}
	nd, nc, nr := binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:])
	if nd != MaxDrafters || nc != MaxClasses || nr != MaxRanks || len(b) != acceptSize {
		return fmt.Errorf("spec: acceptance table: %d×%d×%d in %d bytes", nd, nc, nr, len(b))
	}
	var acc [MaxDrafters][MaxClasses][MaxRanks]rate
	var first [MaxDrafters]rate
	p := b[16:]
	get := func(d int) (rate, error) {
		s := math.Float64frombits(binary.LittleEndian.Uint64(p))
		t := math.Float64frombits(binary.LittleEndian.Uint64(p[8:]))
		p = p[16:]
		if !(s >= 0 && t >= s && t < 1e9) {
			return rate{}, fmt.Errorf("spec: acceptance table: drafter %d: %v successes of %v", d, s, t)
		}
		return rate{s, t}, nil
	}
	var err error
	for d := range acc {
		for k := range acc[d] {
			for r := range acc[d][k] {
				if acc[d][k][r], err = get(d); err != nil {
					return err
				}
			}
		}
		if first[d], err = get(d); err != nil {
			return err
		}
	}
	c.acc, c.first = acc, first
	return nil
}
