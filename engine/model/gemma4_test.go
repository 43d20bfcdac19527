package model

import (
	"path/filepath"
	"testing"

	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/quant"
)

// gemma4Files are the zoo's gemma4 models (local and global layers of
// different head sizes, values equal to keys on the global layer, partial
// rope, soft-capped logits).
func gemma4Files(t *testing.T) []string {
	files, _ := filepath.Glob(zoo.Path(t, "new", "models", "tiny-gemma4-*.gguf"))
	if len(files) == 0 {
		t.Fatal("no tiny-gemma4 models in the zoo's new/models")
	}
	return files
}

// TestConformanceGemma4: llama.cpp's teacher-forced log-probabilities of
// every tiny-gemma4 file (its prompts are longer than the sliding window).
func TestConformanceGemma4(t *testing.T) {
	files, _ := filepath.Glob(zoo.Path(t, "new", "golden", "gen-tiny-gemma4-*.json"))
	if len(files) == 0 {
		t.Fatal("no gen-tiny-gemma4 goldens")
	}
	forEachKernels(t, func(t *testing.T) { conformance(t, genericOne(t, files), quant.F16) })
}

// TestBatchInvarianceGemma4, TestTreeInvarianceGemma4: windows and
// per-layer shapes keep a token's logits the same alone, in a batch and in
// a tree (whose depth exceeds the window).
func TestBatchInvarianceGemma4(t *testing.T) {
	files := gemma4Files(t)
	forEachKernels(t, func(t *testing.T) { batchInvariance(t, genericOne(t, files)) })
}

func TestTreeInvarianceGemma4(t *testing.T) {
	files := gemma4Files(t)
	// 24 nodes: paths deeper than the 16-token window cut their ancestors.
	forEachKernels(t, func(t *testing.T) { treeInvariance(t, genericOne(t, files), quant.F16, 24) })
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
