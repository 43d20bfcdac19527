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
