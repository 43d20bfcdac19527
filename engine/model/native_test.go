package model

import (
	"math"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/quant"
)

func openGGUF(t testing.TB, path string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestCaptureInputsBatchInvariant: the features a pass keeps for EAGLE-3
// (the residual stream entering chosen layers, and the final state) and
// the normed hidden state a Gemma 4 assistant reads are the same bits for
// a token run alone or in a batch.
func TestCaptureInputsBatchInvariant(t *testing.T) {
	m := openModel(t, zoo.Path(t, "drafters", "models", "tiny-eagle3-target-Q4_0.gguf"))
	layers := []int{2, 4, 5, m.NLayer}
	toks := []int32{1, 450, 2143, 701, 29, 3001, 77, 1500, 9}
	newState := func() *State {
		s, err := m.NewState(StateOptions{Ctx: 64, Batch: 16})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		if err := s.CaptureInputs(layers); err != nil {
			t.Fatal(err)
		}
		return s
	}
	batch, single := newState(), newState()
	if _, err := batch.Forward(toks, false); err != nil {
		t.Fatal(err)
	}
	h1, h2 := make([]float32, m.NEmbd), make([]float32, m.NEmbd)
	for i, tok := range toks {
		if _, err := single.Forward([]int32{tok}, false); err != nil {
			t.Fatal(err)
		}
		a, b := batch.Features(i), single.Features(0)
		if len(a) != len(layers)*m.NEmbd {
			t.Fatalf("features of %d values, want %d", len(a), len(layers)*m.NEmbd)
		}
		for j := range a {
			if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
				t.Fatalf("token %d, feature %d: %v in a batch, %v alone", i, j, a[j], b[j])
			}
		}
		batch.HiddenNormed(i, h1)
		single.HiddenNormed(0, h2)
		for j := range h1 {
			if math.Float32bits(h1[j]) != math.Float32bits(h2[j]) {
				t.Fatalf("token %d, hidden %d: %v in a batch, %v alone", i, j, h1[j], h2[j])
			}
		}
	}
	if err := batch.CaptureInputs([]int{m.NLayer + 1}); err == nil {
		t.Error("a feature layer past the last was accepted")
	}
}

// TestAssistantSparseHeadRows: the sparse head's logits are the dense
// head's for the tokens of its clusters (bit for bit) and −∞ elsewhere;
// over every cluster they are the dense head's.
func TestAssistantSparseHeadRows(t *testing.T) {
	m := openModel(t, zoo.Path(t, "drafters", "models", "tiny-gemma4e-Q4_0.gguf"))
	a, err := LoadAssistant(openGGUF(t, zoo.Path(t, "drafters", "models", "tiny-gemma4e-assistant-centroids-Q4_0.gguf")), m)
	if err != nil {
		t.Fatal(err)
	}
	if a.Centroids == nil || a.SparseTop <= 0 {
		t.Fatal("the centroid file has no sparse head")
	}
	for _, kv := range []quant.Type{quant.F16, quant.Q8_0} {
		s, err := m.NewState(StateOptions{Ctx: 128, Batch: 8, KVType: kv})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		toks := []int32{2, 651, 1092, 300, 44, 3000, 17, 900, 2500, 12, 8, 1900, 77, 1234, 3333, 60, 61, 62, 63, 64}
		for _, tok := range toks[:len(toks)-1] {
			if _, err := s.Forward([]int32{tok}, false); err != nil {
				t.Fatal(err)
			}
		}
		h := make([]float32, m.NEmbd)
		s.HiddenNormed(0, h)
		pos := s.Len()
		dense, sparse := a.NewState(s.Ctx()), a.NewState(s.Ctx())
		dense.Sparse = false
		want, err := dense.Step(s, toks[len(toks)-1], h, pos)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			top     int
			cluster bool
		}{{a.SparseTop, false}, {a.Centroids.Rows, false}, {a.SparseTop, true}, {a.Centroids.Rows, true}} {
			top := tc.top
			if tc.cluster {
				if err := a.Cluster(); err != nil {
					t.Fatal(err)
				}
			}
			sparse.Top = top
			got, err := sparse.Step(s, toks[len(toks)-1], h, pos)
			if err != nil {
				t.Fatal(err)
			}
			finite := 0
			for i := range got {
				if math.IsInf(float64(got[i]), -1) {
					continue
				}
				finite++
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s cache, top %d: token %d: sparse %v, dense %v", kv, top, i, got[i], want[i])
				}
			}
			if n := top * (a.NVocab / a.Centroids.Rows); finite != n {
				t.Errorf("%s cache, top %d: %d finite logits, want %d", kv, top, finite, n)
			}
		}
		for i, x := range dense.HNext() {
			if math.Float32bits(x) != math.Float32bits(sparse.HNext()[i]) {
				t.Fatalf("h_next differs between the heads at %d", i)
			}
		}
		if _, err := dense.Step(s, 5000, h, pos); err == nil {
			t.Error("a token outside the vocabulary was accepted")
		}
		if _, err := dense.Step(s, 5, h, pos+1); err == nil {
			t.Error("a step past the cache was accepted")
		}
	}
}

// TestNativeDraftersRefuseOtherTargets: a drafter for another target is
// refused with an error naming the mismatch.
func TestNativeDraftersRefuseOtherTargets(t *testing.T) {
	gemma := openModel(t, zoo.Path(t, "drafters", "models", "tiny-gemma4e-Q4_0.gguf"))
	llama := openModel(t, zoo.Path(t, "drafters", "models", "tiny-eagle3-target-Q4_0.gguf"))
	af := openGGUF(t, zoo.Path(t, "drafters", "models", "tiny-gemma4e-assistant-Q4_0.gguf"))
	ef := openGGUF(t, zoo.Path(t, "drafters", "models", "tiny-eagle3-Q4_0.gguf"))
	if !IsAssistant(af) || IsAssistant(ef) || !IsEagle3(ef) || IsEagle3(af) {
		t.Fatal("architecture detection")
	}
	if _, err := LoadAssistant(af, llama); err == nil || !strings.Contains(err.Error(), "width") {
		t.Errorf("assistant for a llama target: %v", err)
	}
	if _, err := LoadEagle3(ef, gemma); err == nil || !strings.Contains(err.Error(), "width") {
		t.Errorf("eagle3 for a gemma4 target: %v", err)
	}
	if _, err := LoadAssistant(ef, gemma); err == nil {
		t.Error("an eagle3 file loaded as an assistant")
	}
	e, err := LoadEagle3(ef, llama)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.TargetLayers) != 3 || e.TargetLayers[0] != 2 || e.TargetLayers[1] != 4 || e.TargetLayers[2] != 5 || len(e.D2T) != 1024 {
		t.Errorf("eagle3 target layers %v, %d draft tokens", e.TargetLayers, len(e.D2T))
	}
}

// TestEagle3StateGrowsAndRewinds: an EAGLE-3 cache that starts small and
// grows with the positions computes the same draft logits as one sized
// for them all, and after a rewind (Truncate) the same as before it.
func TestEagle3StateGrowsAndRewinds(t *testing.T) {
	m := openModel(t, zoo.Path(t, "drafters", "models", "tiny-eagle3-target-Q4_0.gguf"))
	e, err := LoadEagle3(openGGUF(t, zoo.Path(t, "drafters", "models", "tiny-eagle3-Q4_0.gguf")), m)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.NewState(StateOptions{Ctx: 64, Batch: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CaptureInputs(e.TargetLayers); err != nil {
		t.Fatal(err)
	}
	hist := []int32{1, 450, 2143, 701, 29, 3001, 77, 1500, 9, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22}
	small, big := e.NewState(2, 64), e.NewState(64, 64)
	var want []float32
	for i, tok := range hist[:len(hist)-1] {
		if _, err := s.Forward([]int32{tok}, false); err != nil {
			t.Fatal(err)
		}
		for _, st := range []*Eagle3State{small, big} {
			if err := st.Feed(s.Features(0), tok, i); err != nil {
				t.Fatal(err)
			}
		}
		a, err := small.Sync(hist[:i+2])
		if err != nil {
			t.Fatalf("position %d: %v", i, err)
		}
		a = append([]float32(nil), a...)
		b, err := big.Sync(hist[:i+2])
		if err != nil {
			t.Fatal(err)
		}
		for j := range a {
			if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
				t.Fatalf("position %d: a grown cache's logit %d is %v, a full one's %v", i, j, a[j], b[j])
			}
		}
		want = append(want[:0], b...)
	}
	// Rewind both the target and the head by five positions and run them
	// forward again: the last draft logits are the same.
	N := len(hist) - 1
	s.Truncate(N - 5)
	small.Truncate(N - 5)
	for i := small.Known(); i < N; i++ {
		if s.Len() > i {
			s.Truncate(i)
		}
		if _, err := s.Forward(hist[i:i+1], false); err != nil {
			t.Fatal(err)
		}
		if err := small.Feed(s.Features(0), hist[i], i); err != nil {
			t.Fatal(err)
		}
	}
	got, err := small.Sync(hist)
	if err != nil {
		t.Fatal(err)
	}
	for j := range got {
		if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
			t.Fatalf("after a rewind: logit %d is %v, was %v", j, got[j], want[j])
		}
	}
	if _, err := e.NewState(2, 4).Sync(hist); err == nil {
		t.Error("a sync past what was fed succeeded")
	}
}
