package spec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Limits of the controller's tables.
const (
	MaxDrafters = 4  // drafters a Controller tracks
	MaxClasses  = 16 // confidence classes per drafter
	MaxDraft    = 32 // most tokens one step may draft
)

// Controller decides how many drafted tokens to verify. It keeps the
// measured cost of a forward pass over k tokens, c(k) = t(k)/t(1), and the
// observed per-token acceptance rate of every drafter and draft class, and
// picks the k that maximizes expected tokens per unit of time:
//
//	gain(k) = (1 + α + α² + … + α^k) / c(k+1)
//
// drafting only when that beats plain decoding. When drafts keep failing
// the rate falls and drafting stops, apart from rare one-token probes that
// let it come back when the text starts repeating. It allocates nothing.
type Controller struct {
	maxDraft int
	cost     [MaxDraft + 2]float64 // lower-envelope seconds of a pass over k tokens; 0 = not measured
	seen     [MaxDraft + 2]int     // passes measured per size
	draftT   [MaxDrafters]float64  // EMA seconds to draft one token
	acc      [MaxDrafters][MaxClasses]rate
	steps    int     // decisions taken
	idle     int     // decisions since the last draft
	assumed  float64 // when > 0: plan with c(k) = 1 + assumed·(k−1)
}

// AssumeCost makes the controller plan with the cost model c(k) = 1 +
// slope·(k−1) instead of the measured pass times (slope <= 0 goes back to
// measurements). It is for studying acceptance as on a board where
// verification is cheaper than on the machine at hand, for instance a tiny
// model whose passes cost in proportion to their tokens.
func (c *Controller) AssumeCost(slope float64) { c.assumed = max(slope, 0) }

// rate is an exponentially weighted Bernoulli estimate with a prior.
type rate struct {
	succ, trials float64
}

const (
	rateDecay  = 0.97 // weight of the past per observation
	priorSucc  = 1.2  // prior: 1.2 successes in 2 trials (α ≈ 0.6)
	priorTrial = 2
	costDown   = 0.5  // weight of a pass faster than the estimate
	costUp     = 0.05 // weight of a slower one: a shared machine adds spikes, never removes work
	minGain    = 1.03 // drafting must promise at least 3% more tokens per second
	probeEvery = 24   // a one-token probe after this many idle decisions
)

func (r *rate) alpha() float64 { return (r.succ + priorSucc) / (r.trials + priorTrial) }

// NewController returns a controller that drafts at most maxDraft tokens.
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
	c.cost[k] = envelope(c.cost[k], seconds)
	c.seen[k]++
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

// Observe records that of drafted tokens from drafter d, class class, the
// first accepted were accepted (the next one, if any, was rejected).
func (c *Controller) Observe(d, class, drafted, accepted int) {
	if d < 0 || d >= MaxDrafters || drafted <= 0 {
		return
	}
	class = min(max(class, 0), MaxClasses-1)
	r := &c.acc[d][class]
	trials := min(accepted+1, drafted)
	for i := 0; i < trials; i++ {
		r.succ *= rateDecay
		r.trials *= rateDecay
		r.trials++
		if i < accepted {
			r.succ++
		}
	}
}

// Alpha is the current acceptance estimate of drafter d, class class.
func (c *Controller) Alpha(d, class int) float64 {
	class = min(max(class, 0), MaxClasses-1)
	return c.acc[d][class].alpha()
}

// relCost is c(k): the cost of a pass over k tokens relative to one token.
// Unmeasured sizes are interpolated between measured ones; beyond them a
// prior that grows with k stands in until a measurement replaces it.
func (c *Controller) relCost(k int) float64 {
	if c.assumed > 0 {
		return 1 + c.assumed*float64(k-1)
	}
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

// Decide returns how many of the available drafted tokens of drafter d,
// class class, to verify: 0 means decode one token plainly.
func (c *Controller) Decide(d, class, available int) int {
	c.steps++
	available = min(available, c.maxDraft)
	if available <= 0 || d < 0 || d >= MaxDrafters {
		c.idle++
		return 0
	}
	alpha := c.Alpha(d, class)
	t1 := c.cost[1]
	best, bestGain := 0, minGain
	sum, pw := 1.0, 1.0
	for k := 1; k <= available; k++ {
		pw *= alpha
		sum += pw
		cost := c.relCost(k + 1)
		if t1 > 0 && c.draftT[d] > 0 && c.assumed == 0 {
			cost += float64(k) * c.draftT[d] / t1
		}
		if g := sum / cost; g > bestGain {
			best, bestGain = k, g
		}
	}
	if best == 0 && c.idle >= probeEvery {
		best = 1
	}
	if best == 0 {
		c.idle++
	} else {
		c.idle = 0
	}
	return best
}

// acceptMagic heads the encoded acceptance table.
const acceptMagic = "GACC"

// MarshalAcceptance encodes the acceptance estimates of every drafter and
// class (not the pass costs, which belong to the machine and its load at
// the time), so that a restarted engine drafts as well as it did before
// from its first step.
func (c *Controller) MarshalAcceptance() []byte {
	b := make([]byte, 0, 12+MaxDrafters*MaxClasses*16)
	b = append(b, acceptMagic...)
	b = binary.LittleEndian.AppendUint32(b, MaxDrafters)
	b = binary.LittleEndian.AppendUint32(b, MaxClasses)
	for d := range c.acc {
		for k := range c.acc[d] {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c.acc[d][k].succ))
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(c.acc[d][k].trials))
		}
	}
	return b
}

// UnmarshalAcceptance restores estimates encoded by MarshalAcceptance. It
// rejects (and leaves the controller unchanged on) anything malformed:
// another table shape, a wrong length, or counts that are not finite
// numbers with 0 <= successes <= trials.
func (c *Controller) UnmarshalAcceptance(b []byte) error {
	if len(b) < 12 || string(b[:4]) != acceptMagic {
		return errors.New("spec: acceptance table: bad header")
	}
	nd, nc := binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:])
	if nd != MaxDrafters || nc != MaxClasses || len(b) != 12+MaxDrafters*MaxClasses*16 {
		return fmt.Errorf("spec: acceptance table: %d×%d in %d bytes", nd, nc, len(b))
	}
	var acc [MaxDrafters][MaxClasses]rate
	p := b[12:]
	for d := range acc {
		for k := range acc[d] {
			s := math.Float64frombits(binary.LittleEndian.Uint64(p))
			t := math.Float64frombits(binary.LittleEndian.Uint64(p[8:]))
			p = p[16:]
			if !(s >= 0 && t >= s && t < 1e9) {
				return fmt.Errorf("spec: acceptance table: drafter %d class %d: %v of %v", d, k, s, t)
			}
			acc[d][k] = rate{s, t}
		}
	}
	c.acc = acc
	return nil
}
