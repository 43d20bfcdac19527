package model

import (
	"testing"

	"github.com/geisten/geist/engine/zoo"
)

// TestConvRewind: rewinding a convolution model past its ring goes back
// to the checkpoint at or before the position asked, and continuing from
// there, from a snapshot restored into a fresh state, or from a rewind
// inside the ring gives bit for bit the logits of one uninterrupted run.
func TestConvRewind(t *testing.T) {
	n := 3*convEvery + 20
	m, seq, newState, ref := rewindSetup(t, zoo.Path(t, "new", "models", "tiny-lfm2-Q4_0.gguf"), n)
	check := func(what string, s *State) {
		t.Helper()
		for i := s.Len(); i < n; i++ {
			lg, err := s.Forward(seq[i:i+1], false)
			if err != nil {
				t.Fatal(err)
			}
			sameRows(t, what, lg, ref[i], 0, 1, m.NVocab, i, 1)
		}
	}
	s := newState()
	if _, err := s.Forward(seq, false); err != nil {
		t.Fatal(err)
	}
	wants, ats := []int{n - 3, 2*convEvery + 5, convEvery, 1}, []int{2 * convEvery, n - 5}
	if testing.Short() {
		wants, ats = wants[:2], ats[:1]
	}
	for _, want := range wants {
		s.Truncate(want)
		exact := s.Len()
		switch {
		case want >= n-8 && exact != want:
			t.Fatalf("Truncate(%d) inside the ring kept %d", want, exact)
		case want < n-s.MaxLogitRows()-convRingSlack && exact != want/convEvery*convEvery:
			t.Fatalf("Truncate(%d) past the ring kept %d, want the checkpoint %d", want, exact, want/convEvery*convEvery)
		}
		check("after Truncate", s)
	}
	// A snapshot at a checkpoint and at the end, restored into a fresh
	// state, continues exactly; one between checkpoints is refused.
	if _, err := s.Snapshot(convEvery+3, nil); err == nil {
		t.Error("a snapshot between checkpoints, past the ring, was taken")
	}
	for _, at := range ats {
		s.Truncate(at)
		blob, err := s.Snapshot(at, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := newState()
		if err := r.Restore(seq[:at], blob); err != nil {
			t.Fatal(err)
		}
		check("after Restore", r)
		check("after Snapshot", s)
	}
}

// TestProbeLFM2: a probe over a convolution model (with its full history)
// is what a one-token step computes, with and without skipped blocks; a
// state without the history refuses probes far back.
func TestProbeLFM2(t *testing.T) {
	m := openModel(t, zoo.Path(t, "new", "models", "tiny-lfm2-Q4_K_M.gguf"))
	seq := make([]int32, 24)
	for i := range seq {
		seq[i] = int32((i*131 + 7) % m.NVocab)
	}
	s, err := m.NewState(StateOptions{Ctx: 64, Batch: 8, LogitRows: 8, Threads: 2, FullHistory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ref, err := m.NewState(StateOptions{Ctx: 64, Batch: 8, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	skip := &Skip{Attn: make([]bool, m.NLayer), MLP: make([]bool, m.NLayer)}
	skip.Attn[0], skip.MLP[2] = true, true
	for _, k := range []*Skip{nil, skip} {
		s.Truncate(0)
		if _, err := s.Forward(seq, false); err != nil {
			t.Fatal(err)
		}
		from := 3
		if err := s.Probe(seq[from:from+8], from, k); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Logits(0, 8)
		for j := 0; j < 8; j++ {
			ref.Truncate(0)
			if _, err := ref.Forward(seq[:from+j], false); err != nil {
				t.Fatal(err)
			}
			if err := ref.ForwardTree(seq[from+j:from+j+1], nil, k); err != nil {
				t.Fatal(err)
			}
			want, _ := ref.Logits(0, 1)
			sameRows(t, "probe", got[j*m.NVocab:], want, j, j+1, m.NVocab, from, 8)
		}
	}
	short, err := m.NewState(StateOptions{Ctx: 64, Batch: 8, LogitRows: 2, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	if _, err := short.Forward(seq, false); err != nil {
		t.Fatal(err)
	}
	if err := short.Probe(seq[1:3], 1, nil); err == nil {
		t.Error("a probe behind the ring was accepted")
	}
}

// BenchmarkConvRewind measures what the convolution state costs a
// rejected draft, in the shape of LFM2-1.2B (10 convolution layers of
// width 2048, 3 taps): a chain rejected after its first token (Truncate
// inside the ring), a tree whose kept path of 4 nodes must move (Compact),
// and a rewind past the ring to a checkpoint.
func BenchmarkConvRewind(b *testing.B) {
	c := Config{NLayer: 16, NEmbd: 2048, Conv: make([]bool, 16), ConvTaps: 2}
	for l := range c.Conv {
		c.Conv[l] = l != 2 && l != 5 && l != 8 && l != 10 && l != 12 && l != 14
	}
	s := &State{m: &Model{Config: c}, ctx: 4096, maxRows: 33, maxBatch: 33, toks: make([]int32, 4096)}
	s.newConvState(false)
	fill := func(n int) {
		// As if a causal pass had run to n: the ring and the checkpoints hold it.
		s.n, s.conv.lo, s.toks = n, max(0, n-s.conv.R), s.toks[:n]
		for k := 1; k*convEvery <= n; k++ {
			s.conv.ckOK[k] = true
		}
	}
	b.Run("reject-chain", func(b *testing.B) {
		for b.Loop() {
			fill(1000 + 9)
			s.Truncate(1000 + 1)
		}
	})
	b.Run("compact-tree-path-4", func(b *testing.B) {
		nodes := []int32{0, 2, 5, 7}
		for b.Loop() {
			fill(1000 + 12)
			s.convCompact(1000, nodes)
		}
	})
	b.Run("rewind-checkpoint", func(b *testing.B) {
		for b.Loop() {
			fill(1000)
			s.Truncate(900)
		}
	})
}
