package model

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/quant"
)

// The families of issues 23 and 27 (granite, smollm3, phi3, gemma3,
// qwen3moe, lfm2, gemma4): conformance against llama.cpp on every zoo
// file of each, batch and tree invariance bit for bit (experts routed per
// row, windows shorter than the prompts, layers without rope, fused
// projections, convolution states, per-layer head sizes).

var newFamilies = []string{"granite", "smollm3", "phi3", "gemma3", "qwen3moe", "lfm2", "gemma4"}

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
// of every file of the families, with every kernel set (the generic
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
// logits are the same alone, in a batch and in a tree (of 24 nodes: paths
// deeper than the 16-token windows cut their ancestors; Compact leaves a
// convolution state's kept path alone).
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

// genericOne keeps the first Q4_K_M file (Q4_K and Q6_K rows) of files
// under the generic kernel set (none with -short: qemu runs the same Go
// code natively tested), all of them under the others.
func genericOne(t *testing.T, files []string) []string {
	if !strings.HasSuffix(t.Name(), "/generic") {
		return files
	}
	if testing.Short() {
		return nil
	}
	for _, f := range files {
		if strings.Contains(f, "Q4_K_M") {
			return []string{f}
		}
	}
	return files[:1]
}

// TestConformanceQ8KVFamilies: a Q8_0 KV cache on the families with
// sliding windows (rings of Q8_0 rows; gemma4's layers of different head
// sizes) stays within the Q8_0 tolerance of TestConformanceQ8KV.
func TestConformanceQ8KVFamilies(t *testing.T) {
	for _, fam := range []string{"gemma3", "gemma4"} {
		t.Run(fam, func(t *testing.T) { conformance(t, familyGoldens(t, fam), quant.Q8_0) })
	}
}
