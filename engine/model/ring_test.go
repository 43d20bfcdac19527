package model

import (
	"testing"

	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/quant"
)

// TestSlidingRing: the local layers of gemma3 and gemma4 keep a ring of
// the window and a batch (the zoo files' 16-token window: 128 slots for
// batches of 8), and a state with rings computes the bits of one keeping
// the whole context (whose conformance with llama.cpp the conformance
// tests show) over a sequence many times the ring: a prefill in
// batches, single steps, a tree, rejected drafts rewound, a restored
// snapshot continued; a rewind behind the ring goes back to the start.
func TestSlidingRing(t *testing.T) {
	for _, f := range []string{"tiny-gemma3-Q4_0", "tiny-gemma4-Q4_0"} {
		for _, kv := range []quant.Type{quant.F16, quant.Q8_0} {
			if testing.Short() && (f == "tiny-gemma3-Q4_0") != (kv == quant.F16) {
				continue // under emulation: gemma3 with F16 rings, gemma4 with Q8_0 ones
			}
			t.Run(f+"/"+kv.String(), func(t *testing.T) { slidingRing(t, f, kv) })
		}
	}
}

func slidingRing(t *testing.T, file string, kv quant.Type) {
	m := openModel(t, zoo.Path(t, "new", "models", file+".gguf"))
	const ctx, batch = 512, 8
	n := 400
	if testing.Short() {
		n = 168 // past the 128 slots of the rings
	}
	seq := make([]int32, n+batch)
	for i := range seq {
		seq[i] = int32((i*2654435761 + 11) % m.NVocab)
	}
	// The ring state starts at 64 positions and grows to ctx (its global
	// layers grow, its rings keep their size).
	newState := func(full bool) *State {
		first := 64
		if full {
			first = ctx
		}
		s, err := m.NewState(StateOptions{Ctx: first, MaxCtx: ctx, Batch: batch, LogitRows: batch, Threads: 2, KVType: kv, FullHistory: full})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	ring, full := newState(false), newState(true)
	slots := func(when string) {
		t.Helper()
		for l := range m.NLayer {
			want := ring.Allocated()
			if m.IsSWA(l) {
				want = 128
			}
			if ring.KVSlots(l) != want || full.KVSlots(l) != ctx {
				t.Fatalf("%s, layer %d: %d slots with a ring, %d without; want %d and %d", when, l, ring.KVSlots(l), full.KVSlots(l), want, ctx)
			}
		}
	}
	slots("at the start")
	nv := m.NVocab
	// both runs toks on both states and compares every row's logits.
	both := func(what string, toks []int32) {
		t.Helper()
		var got []float32
		for _, s := range []*State{ring, full} {
			lg, err := s.Forward(toks, true)
			if err != nil {
				t.Fatal(err)
			}
			if got == nil {
				got = append([]float32(nil), lg...)
				continue
			}
			sameRows(t, what, got, lg, 0, len(toks), nv, s.Len()-len(toks), len(toks))
		}
	}
	i := 0
	for ; i < n/2; i += batch {
		both("prefill", seq[i:i+batch])
	}
	slots("grown")
	if r, f := ring.KVBytes(), full.KVBytes(); r >= f {
		t.Errorf("the rings take %d bytes, the full cache %d (allocated %d of %d)", r, f, ring.Allocated(), ctx)
	} else {
		t.Logf("%s %s: KV cache of %d of %d positions: %d bytes with rings, %d without (all %d)", file, kv, ring.Len(), ctx, r, f, ctx)
	}
	// Drafts of 5 rejected after 2: rewinding inside the ring.
	for ; i < n*3/4; i += 2 {
		both("draft", seq[i:i+5])
		ring.Truncate(i + 2)
		full.Truncate(i + 2)
		if ring.Len() != i+2 {
			t.Fatalf("a rewind of 3 inside the ring went to %d, not %d", ring.Len(), i+2)
		}
	}
	// A tree (two branches of 3) whose second branch is kept.
	toks, par := seq[i:i+6], []int32{-1, 0, 1, -1, 3, 4}
	var rows [2][]float32
	for k, s := range []*State{ring, full} {
		if err := s.ForwardTree(toks, par, nil); err != nil {
			t.Fatal(err)
		}
		lg, _ := s.Logits(0, 6)
		rows[k] = append([]float32(nil), lg...)
		if err := s.Compact(i, []int32{3, 4, 5}); err != nil {
			t.Fatal(err)
		}
	}
	sameRows(t, "tree", rows[0], rows[1], 0, 6, nv, i, 6)
	i += 3
	both("after the tree", seq[i:i+1])
	i++
	// A snapshot restored into a new ring continues as the uninterrupted run.
	blob, err := ring.Snapshot(ring.Len(), nil)
	if err != nil {
		t.Fatal(err)
	}
	fb, _ := full.Snapshot(full.Len(), nil)
	if len(blob) != len(fb) || len(blob) >= ring.SnapshotSize(0)+int(full.KVBytes())*ring.Len()/ctx {
		t.Errorf("snapshot of %d positions: %d bytes with rings, %d without (the local layers keep their window)", ring.Len(), len(blob), len(fb))
	}
	restored := newState(false)
	if err := restored.Restore(ring.Tokens(), blob); err != nil {
		t.Fatal(err)
	}
	ring = restored
	for ; i < n; i++ {
		both("restored", seq[i:i+1])
	}
	// Behind the ring: back to the start, and a fresh prefill is exact.
	if e := ring.ExactPrefix(n / 4); e != 0 {
		t.Errorf("ExactPrefix(%d) = %d behind a ring of 128 at %d", n/4, e, ring.Len())
	}
	ring.Truncate(n / 4)
	full.Truncate(0)
	if ring.Len() != 0 {
		t.Fatalf("a rewind behind the ring kept %d positions", ring.Len())
	}
	for i = 0; i < 3*batch; i += batch {
		both("prefill again", seq[i:i+batch])
	}
}

// TestWindowTreeChain: a 24-token chain as a tree (every node's ancestors
// run past the 16-token window) gives the logits of the causal pass.
func TestWindowTreeChain(t *testing.T) {
	m := openModel(t, zoo.Path(t, "new", "models", "tiny-gemma4-Q4_0.gguf"))
	s, err := m.NewState(StateOptions{Ctx: 64, Batch: 24, LogitRows: 24, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	toks, par := make([]int32, 24), make([]int32, 24)
	for i := range toks {
		toks[i], par[i] = int32((i*37+5)%m.NVocab), int32(i-1)
	}
	if _, err := s.Forward(toks[:7], false); err != nil {
		t.Fatal(err)
	}
	want, err := s.Forward(toks, true)
	if err != nil {
		t.Fatal(err)
	}
	want = append([]float32(nil), want...)
	s.Truncate(7)
	if err := s.ForwardTree(toks, par, nil); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Logits(0, 24)
	sameRows(t, "tree chain", got, want, 0, 24, m.NVocab, 7, 24)
}
