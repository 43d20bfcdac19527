package model

import (
	"errors"
	"math"
	"testing"

	"github.com/geisten/geist/engine/zoo"
)

// TestMTPStateGrowsRewindsAndRestarts: Qwen3.5's MTP block gives the same
// draft logits bit for bit from a cache grown from 2 positions as from a
// full one, after draft steps rewound and run again, and after the target
// is truncated and fed again (from its hidden states kept for every
// position); a position fed past the last one (restored rows) restarts
// the cache there, and drafting goes on.
func TestMTPStateGrowsRewindsAndRestarts(t *testing.T) {
	m := openModel(t, zoo.Path(t, "new2", "models", "tiny-qwen35-mtp-Q4_0.gguf"))
	mt, err := LoadMTP(m)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.NewState(StateOptions{Ctx: 64, Batch: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hist := []int32{1, 450, 2143, 701, 29, 3001, 77, 1500, 9, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22}
	small, big := mt.NewState(2, 64, nil), mt.NewState(64, 64, s.HeadProduct)
	h := make([]float32, m.NEmbd)
	draft := func(st *MTPState, N int) []float32 {
		t.Helper()
		if !st.Synced(hist[:N+1], N) {
			t.Fatalf("position %d: the cache is not synced (fed %d, %d pairs)", N, st.Fed(), st.Len())
		}
		a, err := st.Step(hist[N], st.H(N-1), N)
		if err != nil {
			t.Fatal(err)
		}
		top := argmax(a)
		a, err = st.Step(int32(top), st.Out(), N+1) // a second draft step
		if err != nil {
			t.Fatal(err)
		}
		out := append([]float32(nil), a...)
		st.Rewind(N + 1)
		return out
	}
	same := func(what string, a, b []float32) {
		t.Helper()
		for j := range a {
			if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
				t.Fatalf("%s: logit %d is %v, want %v", what, j, a[j], b[j])
			}
		}
	}
	var want []float32
	N := len(hist) - 1
	for i, tok := range hist[:N] {
		if _, err := s.Forward([]int32{tok}, false); err != nil {
			t.Fatal(err)
		}
		s.HiddenNormed(0, h)
		for _, st := range []*MTPState{small, big} {
			if err := st.Feed(h, tok, i); err != nil {
				t.Fatal(err)
			}
		}
		if i == 0 {
			continue
		}
		a := draft(small, i+1)
		b := draft(big, i+1)
		same("a grown cache against a full one, the pool's head against one thread's", a, b)
		same("the same draft again after a rewind", draft(big, i+1), b)
		want = b
	}
	// Truncate the target and the block by five positions, feed them
	// again: the last draft is the same.
	s.Truncate(N - 5) // a recurrent state may go back further, to a checkpoint
	for i := s.Len(); i < N; i++ {
		if _, err := s.Forward(hist[i:i+1], false); err != nil {
			t.Fatal(err)
		}
		s.HiddenNormed(0, h)
		if err := small.Feed(h, hist[i], i); err != nil {
			t.Fatal(err)
		}
	}
	same("after truncating and feeding again", draft(small, N), want)
	// A position fed past the last one (rows restored without passing
	// here) restarts the cache there, and drafting goes on from it.
	ext := append(append([]int32{}, hist...), 3, 4, 5, 6, 7)
	for p := N + 3; p < N+5; p++ {
		if err := small.Feed(h, ext[p], p); err != nil {
			t.Fatal(err)
		}
	}
	if !small.Synced(ext[:N+6], N+5) {
		t.Fatalf("after a restart: not synced (fed %d, %d pairs)", small.Fed(), small.Len())
	}
	if _, err := small.Step(ext[N+5], small.H(N+4), N+5); err != nil {
		t.Fatalf("drafting after a restart: %v", err)
	}
	// A history that differs from what was fed is not synced.
	ext[N+3] = 9
	if small.Synced(ext[:N+6], N+5) {
		t.Fatal("a cache fed other tokens reports the history synced")
	}
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// TestMTPDraftVocab: with a draft vocabulary of n ids the block's logits
// of those ids are the full head's, bit for bit (on one thread and on the
// target's workers), and every other id is −∞.
func TestMTPDraftVocab(t *testing.T) {
	m := openModel(t, zoo.Path(t, "new2", "models", "tiny-qwen35-mtp-Q4_0.gguf"))
	mt, err := LoadMTP(m)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.NewState(StateOptions{Ctx: 64, Batch: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hist := []int32{1, 450, 2143, 701, 29, 3001, 77}
	const n = 1000
	full, one, pool := mt.NewState(64, 64, nil), mt.NewState(64, 64, nil), mt.NewState(64, 64, s.HeadProduct)
	one.SetDraftVocab(n)
	pool.SetDraftVocab(n)
	h := make([]float32, m.NEmbd)
	for i, tok := range hist[:len(hist)-1] {
		if _, err := s.Forward([]int32{tok}, false); err != nil {
			t.Fatal(err)
		}
		s.HiddenNormed(0, h)
		for _, st := range []*MTPState{full, one, pool} {
			if err := st.Feed(h, tok, i); err != nil {
				t.Fatal(err)
			}
		}
	}
	N := len(hist) - 1
	step := func(st *MTPState) []float32 {
		a, err := st.Step(hist[N], st.H(N-1), N)
		if err != nil {
			t.Fatal(err)
		}
		return append([]float32(nil), a...)
	}
	want := step(full)
	for _, got := range [][]float32{step(one), step(pool)} {
		for j := range got {
			if j < n && math.Float32bits(got[j]) != math.Float32bits(want[j]) || j >= n && !math.IsInf(float64(got[j]), -1) {
				t.Fatalf("logit %d is %v (the full head's %v)", j, got[j], want[j])
			}
		}
	}
}

// TestMTPCatchUpBudget: a cache with more than MTPCatchUpMax recorded
// pairs runs only the last MTPCatchUpMax of them (the stretch before is a
// hole: its drafts are those of a cache fed from there on, bit for bit),
// and a cancellation stops the catch-up between pairs, promptly, with the
// pairs left recorded for a later one.
func TestMTPCatchUpBudget(t *testing.T) {
	m := openModel(t, zoo.Path(t, "new2", "models", "tiny-qwen35-mtp-Q4_0.gguf"))
	mt, err := LoadMTP(m)
	if err != nil {
		t.Fatal(err)
	}
	N := MTPCatchUpMax + 24
	toks := make([]int32, N+1)
	for i := range toks {
		toks[i] = int32(1 + (i*7919)%1000)
	}
	h := make([]float32, m.NEmbd)
	hOf := func(p int) []float32 { // a stand-in for the target's hidden state of p
		for j := range h {
			h[j] = float32(math.Sin(float64(p*len(h)+j) * 0.01))
		}
		return h
	}
	feed := func(st *MTPState, from int) {
		t.Helper()
		st.SetLazy(true)
		for p := from; p < N; p++ {
			if err := st.Feed(hOf(p), toks[p], p); err != nil {
				t.Fatal(err)
			}
		}
	}
	draft := func(st *MTPState) []float32 {
		t.Helper()
		if !st.Synced(toks, N) {
			t.Fatalf("not synced (fed %d, %d pairs)", st.Fed(), st.Len())
		}
		l, err := st.Step(toks[N], st.H(N-1), N)
		if err != nil {
			t.Fatal(err)
		}
		st.Rewind(N)
		return append([]float32(nil), l...)
	}
	all, tail := mt.NewState(N+1, N+1, nil), mt.NewState(N+1, N+1, nil)
	feed(all, 0)
	feed(tail, N-MTPCatchUpMax) // a hole before: the cache starts there
	want := draft(tail)
	got := draft(all)
	for j := range got {
		if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
			t.Fatalf("logit %d after catching up %d pairs is %v; a cache fed the last %d only: %v", j, N, got[j], MTPCatchUpMax, want[j])
		}
	}
	// A cancellation after 5 pairs: CatchUp returns, the rest stay
	// recorded, and a later catch-up (not cancelled) gives the same cache.
	c := mt.NewState(N+1, N+1, nil)
	feed(c, 0)
	calls := 0
	stop := errors.New("cancelled")
	c.SetCancel(func() error {
		if calls++; calls > 5 {
			return stop
		}
		return nil
	})
	if err := c.CatchUp(); !errors.Is(err, stop) {
		t.Fatalf("a cancelled catch-up returned %v", err)
	}
	if calls != 6 || c.Len() != N-MTPCatchUpMax+5 || c.Fed() != N {
		t.Fatalf("a catch-up cancelled after 5 pairs: %d checks, %d pairs run of %d fed", calls, c.Len(), c.Fed())
	}
	if c.Synced(toks, N) {
		t.Fatal("a cancelled catch-up reports the cache synced")
	}
	c.SetCancel(nil)
	got = draft(c)
	for j := range got {
		if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
			t.Fatalf("logit %d after a cancelled catch-up resumed is %v, want %v", j, got[j], want[j])
		}
	}
}
