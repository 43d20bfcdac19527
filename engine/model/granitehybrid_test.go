package model

import (
	"path/filepath"
	"testing"

	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/quant"
)

// granitehybrid (Granite 4.0-H): Mamba-2 layers and attention layers
// without rope, from the zoo's new2/ files.

func new2Goldens(t *testing.T, fam string) []string {
	files, _ := filepath.Glob(zoo.Path(t, "new2", "golden", "gen-tiny-"+fam+"-*.json"))
	if len(files) == 0 {
		t.Fatalf("no gen-tiny-%s goldens in the zoo's new2/golden", fam)
	}
	return files
}

func new2Model(t *testing.T, name string) string {
	return zoo.Path(t, "new2", "models", name+".gguf")
}

// TestConformanceGraniteHybrid: llama.cpp's teacher-forced
// log-probabilities of every tiny-granitehybrid file, with every kernel
// set (the generic one on the Q4_K_M file, outside -short).
func TestConformanceGraniteHybrid(t *testing.T) {
	files := new2Goldens(t, "granitehybrid")
	forEachKernels(t, func(t *testing.T) { conformance(t, genericOne(t, files), quant.F16) })
}

// TestBatchInvarianceGraniteHybrid, TestTreeInvarianceGraniteHybrid: a
// token's logits are the same alone, in a batch (longer than the
// convolution and than a verification pass) and in a tree, and a
// compacted tree leaves the state of its path alone.
func TestBatchInvarianceGraniteHybrid(t *testing.T) {
	files := []string{new2Model(t, "tiny-granitehybrid-Q4_K_M"), new2Model(t, "tiny-granitehybrid-Q4_0")}
	forEachKernels(t, func(t *testing.T) { batchInvariance(t, genericOne(t, files)) })
}

func TestTreeInvarianceGraniteHybrid(t *testing.T) {
	files := []string{new2Model(t, "tiny-granitehybrid-Q4_0")}
	forEachKernels(t, func(t *testing.T) { treeInvariance(t, genericOne(t, files), quant.F16, 24) })
}
