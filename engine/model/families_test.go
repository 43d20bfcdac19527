package model

import (
	"path/filepath"
	"testing"

	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/quant"
)

// The families of issue 23 (gemma3, qwen3moe, phi3, granite, smollm3):
// conformance against llama.cpp on every zoo file of each, batch and tree
// invariance bit for bit.

var newFamilies = []string{"granite", "smollm3", "phi3", "gemma3", "qwen3moe"}

func familyGoldens(t *testing.T, fam string) []string {
	files, _ := filepath.Glob(zoo.Path(t, "new", "golden", "gen-tiny-"+fam+"-*.json"))
	if len(files) == 0 {
		t.Fatalf("no gen-tiny-%s goldens in the zoo's new/golden", fam)
	}
	return files
}

// familyModel is the family's Q4_K_M file (its mix of tensor types; the
// invariance of every type is shown on the older families' files).
func familyModel(t *testing.T, fam string) []string {
	files, _ := filepath.Glob(zoo.Path(t, "new", "models", "tiny-"+fam+"-Q4_K_M.gguf"))
	if len(files) == 0 {
		t.Fatalf("no tiny-%s-Q4_K_M model in the zoo's new/models", fam)
	}
	return files
}

// TestConformanceFamilies: llama.cpp's teacher-forced log-probabilities
// of every file of the five families, with every kernel set (the generic
// one on one file, outside -short).
func TestConformanceFamilies(t *testing.T) {
	for _, fam := range newFamilies {
		t.Run(fam, func(t *testing.T) {
			files := familyGoldens(t, fam)
			forEachKernels(t, func(t *testing.T) { conformance(t, genericOne(t, files), quant.F16) })
		})
	}
}

// TestBatchInvarianceFamilies, TestTreeInvarianceFamilies: a token's
// logits are the same alone, in a batch and in a tree (experts routed per
// row, windows, layers without rope, fused projections).
func TestBatchInvarianceFamilies(t *testing.T) {
	for _, fam := range newFamilies {
		t.Run(fam, func(t *testing.T) {
			files := familyModel(t, fam)
			forEachKernels(t, func(t *testing.T) { batchInvariance(t, genericOne(t, files)) })
		})
	}
}

func TestTreeInvarianceFamilies(t *testing.T) {
	for _, fam := range newFamilies {
		t.Run(fam, func(t *testing.T) {
			files := familyModel(t, fam)
			forEachKernels(t, func(t *testing.T) { treeInvariance(t, genericOne(t, files), quant.F16, 24) })
		})
	}
}
