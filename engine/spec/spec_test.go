package spec

import (
	"slices"
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

func TestControllerSwitchesOffAndOn(t *testing.T) {
	c := NewController(8)
	// Cheap verification: c(k) = 1 + 0.1(k-1).
	for i := 0; i < 5; i++ {
		for k := 1; k <= 9; k++ {
			c.ObservePass(k, 0.01*(1+0.1*float64(k-1)))
		}
	}
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
	for i := 0; i < 5; i++ {
		for k := 1; k <= 9; k++ {
			e.ObservePass(k, 0.01*float64(k))
		}
	}
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

// TestAcceptanceRoundTrip: the acceptance table survives encoding, and
// malformed tables are refused without touching the controller.
func TestAcceptanceRoundTrip(t *testing.T) {
	c := NewController(8)
	for i := 0; i < 40; i++ {
		c.Observe(0, 3, 4, 3)
		c.Observe(1, 1, 2, 0)
	}
	b := c.MarshalAcceptance()
	d := NewController(8)
	if err := d.UnmarshalAcceptance(b); err != nil {
		t.Fatal(err)
	}
	for _, dc := range [][2]int{{0, 3}, {1, 1}, {2, 0}} {
		if got, want := d.Alpha(dc[0], dc[1]), c.Alpha(dc[0], dc[1]); got != want {
			t.Errorf("drafter %d class %d: alpha %v after a round trip, want %v", dc[0], dc[1], got, want)
		}
	}
	bad := [][]byte{nil, []byte("GACC"), b[:len(b)-1], append([]byte("XACC"), b[4:]...)}
	nan := append([]byte(nil), b...)
	for i := 12; i < 20; i++ {
		nan[i] = 0xff // succ = NaN
	}
	bad = append(bad, nan)
	for i, x := range bad {
		e := NewController(8)
		if err := e.UnmarshalAcceptance(x); err == nil {
			t.Errorf("malformed table %d accepted", i)
		}
		if e.Alpha(0, 3) != NewController(8).Alpha(0, 3) {
			t.Errorf("malformed table %d changed the controller", i)
		}
	}
}
