package spec

import (
	"math/rand/v2"
	"time"
)

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

// Forced measures a model drafter at a dialled acceptance: each draft runs
// the drafter's own steps as speculation would (its cost is paid in full)
// and then proposes, in place of the drafter's tokens, as many of the
// oracle's as the drafter drafted, as one chain. Random-weight drafters
// agree with their targets on nothing; this gives their speed-up at the
// oracle's acceptance.
type Forced struct {
	D ModelDrafter
	O *Oracle
	// Steps and Time sum the drafter's steps and the time they took, by
	// Clock when set (a thread's CPU time, say), else the wall clock.
	Steps   int
	Time    time.Duration
	Clock   func() time.Duration
	scratch *Tree
	buf     []int32
}

// NewForced forces o's acceptance onto d's drafts.
func NewForced(d ModelDrafter, o *Oracle) *Forced {
	return &Forced{D: d, O: o, scratch: NewTree(1), buf: make([]int32, 0, MaxDraft)}
}

// Name implements Drafter.
func (f *Forced) Name() string { return f.D.Name() }

// DraftTree implements TreeDrafter.
func (f *Forced) DraftTree(history []int32, depth int, t *Tree, d int) {
	f.scratch.Reset()
	f.scratch.Width = t.Width
	if f.Clock != nil {
		c0 := f.Clock()
		f.D.DraftTree(history, depth, f.scratch, d)
		f.Time += f.Clock() - c0
	} else {
		t0 := time.Now()
		f.D.DraftTree(history, depth, f.scratch, d)
		f.Time += time.Since(t0)
	}
	n := f.D.Passes()
	f.Steps += n
	draft, class := f.O.Draft(history, min(n, cap(f.buf)), f.buf)
	t.AddChain(-1, draft, d, class)
}

// Draft implements Drafter.
func (f *Forced) Draft(history []int32, max int, dst []int32) ([]int32, int) {
	return firstChoices(f, history, max, dst)
}
