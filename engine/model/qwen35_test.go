package model

import (
	"path/filepath"
	"testing"

	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/quant"
)

// The hybrid families of issue 35 (zoo new2/): qwen35 (gated DeltaNet and
// gated full attention; the -mtp files carry a next-token block the main
// pass leaves out).

func new2Goldens(t *testing.T, fam string) []string {
	files, _ := filepath.Glob(zoo.Path(t, "new2", "golden", "gen-tiny-"+fam+"-*.json"))
	if len(files) == 0 {
		t.Fatalf("no gen-tiny-%s goldens in the zoo's new2/golden", fam)
	}
	return files
}

func new2Model(t *testing.T, file string) string {
	return zoo.Path(t, "new2", "models", file+".gguf")
}

// TestConformanceQwen35: llama.cpp's teacher-forced log-probabilities of
// every qwen35 file (with and without the MTP block), every kernel set.
func TestConformanceQwen35(t *testing.T) {
	files := new2Goldens(t, "qwen35")
	forEachKernels(t, func(t *testing.T) { conformance(t, genericOne(t, files), quant.F16) })
}

// TestBatchInvarianceQwen35, TestTreeInvarianceQwen35: a token's logits
// are the same bits alone, in a batch (up to 256 tokens, past the conv
// window and a verification pass) and in a tree of 24 nodes; Compact
// leaves the recurrent state of the kept path alone.
func TestBatchInvarianceQwen35(t *testing.T) {
	files := []string{new2Model(t, "tiny-qwen35-Q4_K_M"), new2Model(t, "tiny-qwen35-mtp-Q4_0")}
	forEachKernels(t, func(t *testing.T) { batchInvariance(t, genericOne(t, files)) })
}

func TestTreeInvarianceQwen35(t *testing.T) {
	files := []string{new2Model(t, "tiny-qwen35-Q4_K_M"), new2Model(t, "tiny-qwen35-mtp-Q4_0")}
	forEachKernels(t, func(t *testing.T) { treeInvariance(t, genericOne(t, files), quant.F16, 24) })
}
