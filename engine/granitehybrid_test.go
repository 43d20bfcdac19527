package engine

import (
	"testing"

	"github.com/geisten/geist/engine/zoo"
)

// granitehybrid (Granite 4.0-H, the zoo's new2/ files): Mamba-2 layers
// whose state is kept by the recurrent layers' machinery
// (engine/model/recurrent.go, mamba2.go). Greedy output is identical under every
// speculation mode, with trees and chains (the Q4_0 file drafts for the
// Q4_K_M one); a prefix restored from the prompt cache continues as a
// cold run, under speculation too; decoding allocates nothing.

// new2Draft is the draft model of the new2/ families' Q4_K_M files.
var new2Draft = map[string]string{
	"tiny-granitehybrid": "tiny-granitehybrid-Q4_0.gguf",
}

func TestSpeculativeGreedyExactGraniteHybrid(t *testing.T) {
	files := []string{zoo.Path(t, "new2", "golden", "gen-tiny-granitehybrid-Q4_0.json")}
	if !testing.Short() {
		files = append(files, zoo.Path(t, "new2", "golden", "gen-tiny-granitehybrid-Q4_K_M.json"),
			zoo.Path(t, "new2", "golden", "gen-tiny-granitehybrid-F16.json"))
	}
	speculativeGreedyExact(t, files)
}

func TestPromptCacheRestoreGraniteHybrid(t *testing.T) {
	specs := []SpecOptions{{Mode: SpecOff}, {Mode: SpecSelf, Fixed: true}, {Mode: SpecSelf, Fixed: true, Chains: true}, {Mode: SpecAuto}}
	promptCacheRestore(t, []string{zoo.Path(t, "new2", "models", "tiny-granitehybrid-Q4_0.gguf"), zoo.Path(t, "new2", "models", "tiny-granitehybrid-Q4_K_M.gguf")}, specs...)
}

func TestAllocationsGraniteHybrid(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	fileAllocations(t, zoo.Path(t, "new2", "models", "tiny-granitehybrid-Q4_K_M.gguf"), installRecSkip)
}
