package spec

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestLookupLongestMatchAndMajority(t *testing.T) {
	l := NewLookup(1, 3)
	// "1 2 3" occurred three times: twice followed by 4 5, once by 9.
	h := []int32{1, 2, 3, 4, 5, 0, 1, 2, 3, 9, 7, 1, 2, 3, 4, 5, 8, 1, 2, 3}
	got, class := l.Draft(h, 3, nil)
	if class != 3 || !slices.Equal(got, []int32{4, 5, 8}) {
		t.Errorf("draft %v class %d, want [4 5 8] from the majority continuation, class 3", got, class)
	}
	if got, _ := l.Draft([]int32{5, 6, 7}, 4, nil); len(got) != 0 {
		t.Errorf("no repetition: drafted %v", got)
	}
	buf := make([]int32, 0, 8)
	if a := testing.AllocsPerRun(100, func() { l.Draft(h, 8, buf) }); a != 0 {
		t.Errorf("%v allocations per draft", a)
	}
}

func TestNgramCacheDraftAndPersist(t *testing.T) {
	c := NewNgramCache(3, 1000)
	answer := []int32{10, 11, 12, 13, 14, 15}
	c.Observe(append([]int32{1, 2}, answer...))
	c.Observe(append([]int32{3, 4}, answer...))
	got, _ := c.Draft([]int32{7, 10, 11}, 3, nil)
	if !slices.Equal(got, []int32{12, 13, 14}) {
		t.Errorf("draft %v, want [12 13 14]", got)
	}
	b, err := c.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	d := NewNgramCache(3, 1000)
	if err := d.UnmarshalBinary(b); err != nil || d.Len() != c.Len() {
		t.Fatalf("round trip: %v, %d vs %d contexts", err, d.Len(), c.Len())
	}
	if err := d.UnmarshalBinary(b[:len(b)-3]); err == nil {
		t.Error("truncated statistics accepted")
	}
}

// observeLinearCost times five passes of every size up to 9 at c(k) = 1 +
// slope·(k−1).
func observeLinearCost(c *Controller, slope float64) {
	for i := 0; i < 5; i++ {
		for k := 1; k <= 9; k++ {
			c.ObservePass(k, 0.01*(1+slope*float64(k-1)))
		}
	}
}

func TestControllerSwitchesOffAndOn(t *testing.T) {
	c := NewController(8)
	observeLinearCost(c, 0.1) // cheap verification
	for i := 0; i < 50; i++ {
		c.Observe(0, 1, 8, 0) // every draft fails
	}
	off := 0
	for i := 0; i < 48; i++ {
		if c.Decide(0, 1, 8) == 0 {
			off++
		}
	}
	if off < 45 {
		t.Errorf("drafts keep failing, yet the controller drafted in %d of 48 steps", 48-off)
	}
	for i := 0; i < 50; i++ {
		c.Observe(0, 2, 8, 8) // another class is always right
	}
	if k := c.Decide(0, 2, 8); k < 6 {
		t.Errorf("always-accepted drafts with cheap verification: drafts %d of 8", k)
	}
	// Expensive verification (c(k) = k): drafting never pays.
	e := NewController(8)
	observeLinearCost(e, 1)
	for i := 0; i < 20; i++ {
		e.Observe(0, 1, 4, 2)
	}
	if k := e.Decide(0, 1, 8); k != 0 {
		t.Errorf("linear verification cost: drafted %d", k)
	}
}

func TestControllerDistrustsOneSlowPass(t *testing.T) {
	c := NewController(8)
	for i := 0; i < 5; i++ {
		c.ObservePass(1, 0.01)
	}
	c.ObservePass(3, 0.05) // a cold first pass of size 3
	for i := 0; i < 30; i++ {
		c.Observe(0, 0, 8, 8)
	}
	if k := c.Decide(0, 0, 8); k < 2 {
		t.Errorf("one slow pass of a new size stopped drafting: k = %d", k)
	}
}

// TestControllerCostFollowsSpeed: when the machine gets faster (another
// process's load goes away), the one-token passes measured at every plain
// step follow at once, while a size verified a few times does not: c(k)
// must keep the ratio measured, not grow until drafting stops (a mixture
// of experts on a loaded machine went from c(2) = 1.15 to 2.08).
func TestControllerCostFollowsSpeed(t *testing.T) {
	c := NewController(8)
	for i := 0; i < 5; i++ {
		for k := 1; k <= 4; k++ {
			c.ObservePass(k, 0.02*(1+0.15*float64(k-1)))
		}
	}
	for i := 0; i < 200; i++ {
		c.ObservePass(1, 0.01) // twice as fast now
	}
	for k := 2; k <= 4; k++ {
		if got, want := c.Cost(k), 1+0.15*float64(k-1); math.Abs(got-want) > 1e-9 {
			t.Errorf("c(%d) = %.3f after the machine sped up, measured %.3f", k, got, want)
		}
	}
	for i := 0; i < 200; i++ {
		c.ObservePass(1, 0.03) // and slower again
	}
	if got := c.Cost(3); math.Abs(got-1.3) > 1e-9 {
		t.Errorf("c(3) = %.3f after the machine slowed down, measured 1.3", got)
	}
}

// TestAcceptanceRoundTrip: the acceptance table survives encoding, and
// malformed tables are refused without touching the controller.
func TestAcceptanceRoundTrip(t *testing.T) {
	c := NewController(8)
	for i := 0; i < 40; i++ {
		c.Observe(0, 3, 4, 3)
		c.Observe(1, 1, 2, 0)
		c.ObserveEdge(1, 1, 1, true)
	}
	b := c.MarshalAcceptance()
	d := NewController(8)
	if err := d.UnmarshalAcceptance(b); err != nil {
		t.Fatal(err)
	}
	for _, dc := range [][3]int{{0, 3, 0}, {1, 1, 0}, {1, 1, 1}, {2, 0, 0}} {
		if got, want := d.Alpha(dc[0], dc[1], dc[2]), c.Alpha(dc[0], dc[1], dc[2]); got != want {
			t.Errorf("drafter %d class %d rank %d: alpha %v after a round trip, want %v", dc[0], dc[1], dc[2], got, want)
		}
	}
	bad := [][]byte{nil, []byte("GAC2"), b[:len(b)-1], append([]byte("XAC2"), b[4:]...), append(b, 0)}
	// The first format (no ranks) is refused, not misread.
	old := append([]byte("GACC"), make([]byte, 8+4*16*16)...)
	copy(old[4:], []byte{4, 0, 0, 0, 16, 0, 0, 0})
	bad = append(bad, old)
	nan := append([]byte(nil), b...)
	for i := 16; i < 24; i++ {
		nan[i] = 0xff // succ = NaN
	}
	bad = append(bad, nan)
	for i, x := range bad {
		e := NewController(8)
		if err := e.UnmarshalAcceptance(x); err == nil {
			t.Errorf("malformed table %d accepted", i)
		}
		if e.Alpha(0, 3, 0) != NewController(8).Alpha(0, 3, 0) {
			t.Errorf("malformed table %d changed the controller", i)
		}
	}
}

// treeString renders t as "tok(parent,rank)" in node order.
func treeString(t *Tree) string {
	var b strings.Builder
	for i, n := range t.Nodes {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d(%d,%d)", n.Tok, n.Parent, n.Rank)
	}
	return b.String()
}

func TestTreeAdd(t *testing.T) {
	tr := NewTree(2)
	if n := tr.AddChain(-1, []int32{4, 5, 6}, 0, 3); n != 3 {
		t.Fatalf("chain of 3: %d added", n)
	}
	tr.AddChain(-1, []int32{4, 5, 7}, 1, 2) // merges 4 5, branches 7
	tr.AddChain(-1, []int32{4, 5, 8}, 1, 2) // a third child of 5: over Width
	tr.Add(-1, 9, 1, 1)
	if got, want := treeString(tr), "4(-1,0) 5(0,0) 6(1,0) 7(1,1) 9(-1,1)"; got != want {
		t.Errorf("tree %s, want %s", got, want)
	}
	if tr.Nodes[3].Drafter != 1 || tr.Nodes[1].Drafter != 0 {
		t.Error("merged nodes must keep their first proposer")
	}
	if d := tr.Depth(3); d != 3 {
		t.Errorf("depth of node 3: %d", d)
	}
	chain := NewTree(1)
	chain.AddChain(-1, []int32{1, 2}, 0, 0)
	if chain.Add(-1, 3, 1, 0) >= 0 || chain.Add(0, 4, 0, 0) >= 0 {
		t.Error("a chain (width 1) took a second child")
	}
	for !tr.Full() {
		tr.Add(tr.Len()-1, int32(100+tr.Len()), 0, 0)
	}
	if tr.Add(-1, 1000, 0, 0) >= 0 || tr.Len() != MaxTree {
		t.Error("a full tree grew")
	}
}

func TestLookupTree(t *testing.T) {
	l := NewLookup(1, 3)
	h := []int32{1, 2, 3, 4, 5, 0, 1, 2, 3, 9, 7, 1, 2, 3, 4, 5, 8, 1, 2, 3}
	tr := NewTree(3)
	l.DraftTree(h, 3, tr, 0)
	// The majority chain 4 5 8, then the other matches' continuations:
	// 9 7 1 as a second root, 0 as the second child of 5.
	if got, want := treeString(tr), "4(-1,0) 5(0,0) 8(1,0) 9(-1,1) 7(3,0) 1(4,0) 0(1,1)"; got != want {
		t.Errorf("tree %s, want %s", got, want)
	}
	// Shorter matches add roots the longer ones lack: "3" alone was also
	// followed by 6 once.
	h2 := append([]int32{3, 6}, h...)
	tr.Reset()
	l.DraftTree(h2, 2, tr, 0)
	if i := tr.Child(-1, 6); i < 0 || tr.Nodes[i].Class != 1 {
		t.Errorf("no root 6 of class 1 from the one-token match: %s", treeString(tr))
	}
	chain := NewTree(1)
	l.DraftTree(h, 3, chain, 0)
	if got, want := treeString(chain), "4(-1,0) 5(0,0) 8(1,0)"; got != want {
		t.Errorf("chain %s, want %s", got, want)
	}
	if a := testing.AllocsPerRun(100, func() { tr.Reset(); l.DraftTree(h, 8, tr, 0) }); a != 0 {
		t.Errorf("%v allocations per tree draft", a)
	}
}

func TestNgramTree(t *testing.T) {
	c := NewNgramCache(2, 1000)
	for i := 0; i < 3; i++ {
		c.Observe([]int32{1, 10, 11, 12})
	}
	for i := 0; i < 2; i++ {
		c.Observe([]int32{2, 10, 13, 14})
	}
	tr := NewTree(2)
	c.DraftTree([]int32{5, 10}, 3, tr, 1)
	// After 10: 11 (3 times), and the runner-up 13 (twice), continued.
	if got, want := treeString(tr), "11(-1,0) 12(0,0) 13(-1,1) 14(2,0)"; got != want {
		t.Errorf("tree %s, want %s", got, want)
	}
	if a := testing.AllocsPerRun(100, func() { tr.Reset(); c.DraftTree([]int32{5, 10}, 3, tr, 1) }); a != 0 {
		t.Errorf("%v allocations per tree draft", a)
	}
}

// TestPlanKeepsLikelyNodesDepthFirst: Plan keeps the nodes worth their
// cost, likeliest first, as a tree laid out depth first with contiguous
// subtrees.
func TestPlanKeepsLikelyNodesDepthFirst(t *testing.T) {
	c := NewController(16)
	c.AssumeCost(0.05)
	for i := 0; i < 200; i++ {
		c.ObserveEdge(0, 1, 0, i%10 != 0) // first choices: 0.9
		c.ObserveEdge(0, 1, 1, i%2 == 0)  // runners-up: 0.5
		c.ObserveEdge(1, 1, 0, false)     // drafter 1 is never right
	}
	tr := NewTree(3)
	tr.AddChain(-1, []int32{1, 2, 3, 4}, 0, 1)
	tr.Add(-1, 5, 0, 1) // runner-up root
	tr.Add(0, 6, 0, 1)  // runner-up after 1
	tr.Add(-1, 7, 1, 1) // drafter 1: dropped
	tr.AddChain(4, []int32{8, 9}, 0, 1)
	m := c.Plan(tr, 16, false)
	if m != 8 || tr.Len() != 8 {
		t.Fatalf("kept %d nodes (tree %d): %s", m, tr.Len(), treeString(tr))
	}
	if got, want := treeString(tr), "1(-1,0) 2(0,0) 3(1,0) 4(2,0) 6(0,1) 5(-1,1) 8(5,0) 9(6,0)"; got != want {
		t.Errorf("layout %s, want %s", got, want)
	}
	for i := range tr.Nodes {
		for j := i + 1; j < tr.Len(); j++ {
			inside := j < tr.End(i)
			anc := false
			for p := int(tr.Nodes[j].Parent); p >= 0; p = int(tr.Nodes[p].Parent) {
				anc = anc || p == i
			}
			if inside != anc {
				t.Errorf("node %d: End %d, but node %d descends from it: %v", i, tr.End(i), j, anc)
			}
		}
	}
	// A budget keeps the likeliest nodes only.
	tr.Reset()
	tr.AddChain(-1, []int32{1, 2, 3, 4}, 0, 1)
	tr.Add(-1, 5, 0, 1)
	if m := c.Plan(tr, 2, false); m != 2 || treeString(tr) != "1(-1,0) 2(0,0)" {
		t.Errorf("budget 2: %d, %s", m, treeString(tr))
	}
	if a := testing.AllocsPerRun(100, func() {
		tr.Reset()
		tr.AddChain(-1, []int32{1, 2, 3, 4}, 0, 1)
		tr.Add(-1, 5, 0, 1)
		c.Plan(tr, 8, false)
	}); a != 0 {
		t.Errorf("%v allocations per plan", a)
	}
}

// TestProbesBackOff: when nothing is accepted, the controller verifies a
// one-token probe now and then, further apart after every failure.
func TestProbesBackOff(t *testing.T) {
	c := NewController(8)
	observeLinearCost(c, 0.2)
	for i := 0; i < 100; i++ {
		c.ObserveEdge(0, 0, 0, false)
	}
	tr := NewTree(1)
	probes := 0
	for step := 0; step < 2000; step++ {
		tr.Reset()
		tr.AddChain(-1, []int32{1, 2, 3}, 0, 0)
		m := c.Plan(tr, 8, false)
		if m > 1 {
			t.Fatalf("step %d: verified %d tokens at α≈0", step, m)
		}
		if m == 1 {
			probes++
			c.ObserveEdge(0, 0, 0, false)
		}
		c.Settle(0)
	}
	// c(2)−1 = 0.2: probes at least 20 steps apart, then doubling.
	if probes < 3 || probes > 7 {
		t.Errorf("%d probes in 2000 failing steps", probes)
	}
	// Once drafts hold again, drafting comes back.
	for i := 0; i < 60; i++ {
		c.ObserveEdge(0, 0, 0, true)
	}
	tr.Reset()
	tr.AddChain(-1, []int32{1, 2, 3}, 0, 0)
	if m := c.Plan(tr, 8, false); m < 2 {
		t.Errorf("after 60 accepted tokens the controller verifies %d", m)
	}
}
