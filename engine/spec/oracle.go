package spec

import "math/rand/v2"

// Oracle is a test drafter for measuring the machinery: it proposes the
// target's own continuation, taken from a plain greedy run (Ref: prompt and
// generated tokens), with each proposed token wrong with probability
// 1 − Alpha. Random-weight models cannot produce realistic acceptance; the
// oracle dials it in.
type Oracle struct {
	Ref    []int32
	Alpha  float64
	NVocab int
	rng    *rand.Rand
}

// NewOracle returns an oracle drafter over ref with acceptance alpha.
func NewOracle(ref []int32, alpha float64, nVocab int, seed uint64) *Oracle {
	return &Oracle{Ref: ref, Alpha: alpha, NVocab: nVocab, rng: rand.New(rand.NewPCG(seed, 7))}
}

// Name implements Drafter.
func (o *Oracle) Name() string { return "oracle" }

// Draft implements Drafter.
func (o *Oracle) Draft(history []int32, max int, dst []int32) ([]int32, int) {
	dst = dst[:0]
	for i := len(history); i < len(o.Ref) && len(dst) < max; i++ {
		t := o.Ref[i]
		if o.rng.Float64() >= o.Alpha {
			t = (t + 1 + int32(o.rng.IntN(o.NVocab-1))) % int32(o.NVocab)
		}
		dst = append(dst, t)
	}
	return dst, 0
}

// CostedOracle is an Oracle that pays a real drafter's price: before each
// draft it runs Inner over the same history to the same depth (its tokens
// discarded), so a benchmark measures the speedup of the oracle's
// acceptance with the drafter's own cost per drafted token.
type CostedOracle struct {
	*Oracle
	Inner   TreeDrafter
	scratch *Tree
	steps   int
}

// NewCostedOracle wraps o with the cost of inner.
func NewCostedOracle(o *Oracle, inner TreeDrafter) *CostedOracle {
	return &CostedOracle{Oracle: o, Inner: inner, scratch: NewTree(1)}
}

// Draft implements Drafter.
func (c *CostedOracle) Draft(history []int32, max int, dst []int32) ([]int32, int) {
	c.scratch.Reset()
	c.scratch.Width = 1
	c.Inner.DraftTree(history, max, c.scratch, -1)
	c.steps = c.scratch.Len()
	return c.Oracle.Draft(history, max, dst)
}
