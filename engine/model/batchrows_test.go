package model

import (
	"math"
	"testing"

	"github.com/geisten/geist/engine/zoo"
)

// TestForwardBatchKeepsRows: after a ForwardBatch pass beside another
// sequence, a slot that keeps its rows (KeepRows) and captures features
// (CaptureInputs) reads its own rows' normed hidden states and features
// bit for bit as the same tokens run alone give them, after the
// workspace's row buffers held another pass; and a sequence alone in a
// pass with blocks skipped (Seq.Skip) gets the logits ForwardTree with
// that skip gives.
func TestForwardBatchKeepsRows(t *testing.T) {
	m := openModel(t, zoo.Path(t, "models", "tiny-llama-Q4_0.gguf"))
	layers := []int{0, m.NLayer / 2, m.NLayer}
	alone, err := m.NewState(StateOptions{Ctx: 64, Batch: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	ws, err := m.NewState(StateOptions{Ctx: 64, Batch: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	sl, err := ws.NewSlot(StateOptions{Ctx: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	for _, s := range []*State{alone, sl} {
		if err := s.CaptureInputs(layers); err != nil {
			t.Fatal(err)
		}
	}
	sl.KeepRows()
	toks := []int32{1, 450, 2143, 701, 29, 3001}
	other := []int32{1, 9, 12, 13}
	if _, err := alone.Forward(toks, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.ForwardBatch([]Seq{{S: ws, Tokens: other}, {S: sl, Tokens: toks}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.ForwardBatch([]Seq{{S: ws, Tokens: []int32{77}}}); err != nil { // the row buffers move on
		t.Fatal(err)
	}
	same := func(what string, a, b []float32) {
		t.Helper()
		for j := range a {
			if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
				t.Fatalf("%s: value %d is %v, alone %v", what, j, a[j], b[j])
			}
		}
	}
	E := m.NEmbd
	ha, hb := make([]float32, E), make([]float32, E)
	for i := range toks {
		alone.HiddenNormed(i, ha)
		sl.HiddenNormed(i, hb)
		same("the kept hidden row", hb, ha)
		same("the captured features", sl.Features(i), alone.Features(i))
	}
	// A skipped-layer step of the slot alone in its pass.
	L := m.NLayer
	skip := &Skip{Attn: make([]bool, L), MLP: make([]bool, L)}
	skip.MLP[L-1], skip.Attn[1] = true, true
	if err := alone.ForwardTree([]int32{5}, nil, skip); err != nil {
		t.Fatal(err)
	}
	want, err := alone.Logits(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, m.NVocab)
	if _, err := ws.ForwardBatch([]Seq{{S: sl, Tokens: []int32{5}, Logits: true, Out: out, Skip: skip}}); err != nil {
		t.Fatal(err)
	}
	same("a skipped-layer step's logits", out, want)
	if _, err := ws.ForwardBatch([]Seq{{S: sl, Tokens: []int32{6}, Skip: skip}, {S: ws, Tokens: []int32{7}}}); err == nil {
		t.Fatal("a pass of two sequences, one skipping blocks, was run")
	}
}

// TestForwardBatchSkipRecurrent: on a model with recurrent layers (qwen35)
// a slot's skipped-layer steps in passes of its own (a DeltaNet layer
// and the last feed-forward block left out) give ForwardTree's logits
// with that skip, and dropped as a whole (Truncate back) leave the slot
// where the state alone is: the next pass gives the same logits.
func TestForwardBatchSkipRecurrent(t *testing.T) {
	m := openModel(t, new2Model(t, "tiny-qwen35-Q4_0"))
	alone, err := m.NewState(StateOptions{Ctx: 64, Batch: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer alone.Close()
	ws, err := m.NewState(StateOptions{Ctx: 64, Batch: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	sl, err := ws.NewSlot(StateOptions{Ctx: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	L := m.NLayer
	skip := &Skip{Attn: make([]bool, L), MLP: make([]bool, L)}
	skip.Attn[1], skip.MLP[L-1] = true, true
	toks := []int32{1, 450, 2143, 701, 29, 3001}
	if _, err := alone.Forward(toks, false); err != nil {
		t.Fatal(err)
	}
	if _, err := ws.ForwardBatch([]Seq{{S: ws, Tokens: []int32{1, 9}}, {S: sl, Tokens: toks}}); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, m.NVocab)
	same := func(what string, a, b []float32) {
		t.Helper()
		for j := range a {
			if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
				t.Fatalf("%s: logit %d is %v, alone %v", what, j, a[j], b[j])
			}
		}
	}
	base := alone.Len()
	for i, tok := range []int32{5, 77, 12} { // three draft steps
		if err := alone.ForwardTree([]int32{tok}, nil, skip); err != nil {
			t.Fatal(err)
		}
		want, err := alone.Logits(0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ws.ForwardBatch([]Seq{{S: sl, Tokens: []int32{tok}, Logits: true, Out: out, Skip: skip}}); err != nil {
			t.Fatal(err)
		}
		same("draft step "+string(rune('1'+i)), out, want)
	}
	alone.Truncate(base)
	sl.Truncate(base)
	if alone.Len() != base || sl.Len() != base {
		t.Fatalf("after dropping the draft: %d and %d positions, want %d", alone.Len(), sl.Len(), base)
	}
	want, err := alone.Forward([]int32{8}, false)
	if err != nil {
		t.Fatal(err)
	}
	want = append([]float32(nil), want...)
	if _, err := ws.ForwardBatch([]Seq{{S: ws, Tokens: []int32{3}}, {S: sl, Tokens: []int32{8}, Logits: true, Out: out}}); err != nil {
		t.Fatal(err)
	}
	same("the pass after the dropped draft", out, want)
}
