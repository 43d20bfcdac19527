package engine

import "testing"

// TestHeadCost: before it has measured the head, a verification pass
// computes all rows at once above a planned chance of headAllAt; once
// measured, where the head's rows are nearly free beside its read (the
// gemma3-270m figures: 6.5 ms for 2 rows, 0.45 ms per further row) all
// rows are computed once from a chance of about 0.36 for 9 rows, and
// where each row costs about what the read does, not even at 0.9.
func TestHeadCost(t *testing.T) {
	var h headCost
	if h.all(9, 0.4) || !h.all(9, 0.6) || h.all(2, 1) {
		t.Fatal("before any measurement the threshold is not headAllAt")
	}
	for range 8 {
		h.observe(2, 6.5e-3)
		h.observe(7, 6.5e-3+5*0.45e-3)
	}
	if !h.all(9, 0.4) || h.all(9, 0.3) {
		t.Errorf("flat head (h2 %.2g s, slope %.2g s/row): threshold not near 0.36", h.h2, h.slope)
	}
	var s headCost
	for range 8 {
		s.observe(2, 2e-3)
		s.observe(7, 2e-3+5*1e-3)
	}
	if s.all(9, 0.9) {
		t.Errorf("steep head (h2 %.2g s, slope %.2g s/row): all rows at a chance of 0.9", s.h2, s.slope)
	}
}
