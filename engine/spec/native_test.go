package spec

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestWorthGate: the model drafters' confidence gate drafts every token
// before the controller has measured anything; then a token is worth its
// cost only when its reach by the learned acceptance outweighs what it
// adds to the pass and the drafting, so a low-confidence class stops the
// chain early and a high one lets it run, and a costlier drafter stops
// sooner.
func TestWorthGate(t *testing.T) {
	c := NewController(MaxDraft)
	if !c.Worth(0, 5, 0.001) {
		t.Fatal("an unmeasured controller gated a draft")
	}
	for range 4 {
		c.ObservePass(1, 0.010)
		for k := 2; k <= 8; k++ {
			c.ObservePass(k, 0.010*(1+0.05*float64(k-1)))
		}
	}
	const lo, hi = 0, 5 // confidence classes
	for range 40 {
		c.ObserveEdge(0, lo, 0, false)
		c.ObserveEdge(0, hi, 0, true)
		c.ObserveEdge(1, hi, 0, true)
	}
	depth := func(d, class int) int {
		reach := 1.0
		for k := 0; k < 8; k++ {
			if reach *= c.Alpha(d, class, 0); !c.Worth(d, k, reach) {
				return k
			}
		}
		return 8
	}
	c.AssumeDraftCost(0, 0.05)
	c.AssumeDraftCost(1, 0.9)
	if d := depth(0, lo); d != 0 {
		t.Errorf("rejected class: gate kept %d tokens", d)
	}
	if d := depth(0, hi); d < 6 {
		t.Errorf("accepted class: gate stopped after %d tokens", d)
	}
	if a, b := depth(1, hi), depth(0, hi); a >= b {
		t.Errorf("a drafter costing 0.9 of a pass drafts %d tokens, one costing 0.05 %d", a, b)
	}
}

// TestTopK: the likeliest tokens first, the lower id on ties, −∞ never.
func TestTopK(t *testing.T) {
	inf := float32(math.Inf(-1))
	var top [3]int32
	var p [3]float64
	if !topK([]float32{1, 3, inf, 3, 2}, top[:], p[:]) || top != [3]int32{1, 3, 4} {
		t.Errorf("top %v", top)
	}
	if p[0] != p[1] || !(p[1] > p[2]) || p[0]+p[1]+p[2] >= 1 {
		t.Errorf("probabilities %v", p)
	}
	if !topK([]float32{inf, 5}, top[:], p[:]) || top != [3]int32{1, -1, -1} || p[0] != 1 {
		t.Errorf("one finite logit: %v %v", top, p)
	}
	if topK([]float32{inf, inf}, top[:], p[:]) {
		t.Error("no finite logit: a token was chosen")
	}
}

// TestTopKIn: over a candidate list (a sparse head's tokens, in cluster
// order, or a draft vocabulary) the same tokens as topK over the whole
// row, ties to the lower id, probabilities within rounding.
func TestTopKIn(t *testing.T) {
	inf := float32(math.Inf(-1))
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		l := make([]float32, 1000)
		for i := range l {
			l[i] = inf
		}
		cand := rng.Perm(len(l))[:1+rng.IntN(40)]
		var ids []int32
		for _, i := range cand {
			l[i] = float32(rng.IntN(5)) // many ties
			ids = append(ids, int32(i))
		}
		if trial%3 == 0 {
			ids = append(ids, ids[0]) // a token listed twice
		}
		var a, b [3]int32
		var pa, pb [3]float64
		okA, okB := topK(l, a[:], pa[:]), topKIn(l, ids, b[:], pb[:])
		if okA != okB || a != b {
			t.Fatalf("trial %d: topK %v %v, topKIn %v %v", trial, okA, a, okB, b)
		}
		for j := range pa {
			if trial%3 != 0 && math.Abs(pa[j]-pb[j]) > 1e-12 {
				t.Fatalf("trial %d: probabilities %v, %v", trial, pa, pb)
			}
		}
	}
	var top [3]int32
	var p [3]float64
	if topKIn([]float32{inf, inf}, []int32{1}, top[:], p[:]) {
		t.Error("no finite logit: a token was chosen")
	}
}
