package engine

import (
	"maps"
	"slices"
	"testing"

	"github.com/geisten/geist/engine/zoo"
)

// The families of issue 23 (granite, smollm3, phi3, gemma3, qwen3moe)
// under speculation: greedy output identical with --spec off, lookup,
// auto (trees and chains), self and draft (the family's Q4_0 file drafting
// for its Q4_K_M file: the same vocabulary), and decoding allocates
// nothing.

var familyDraft = map[string]string{
	"tiny-granite":  "tiny-granite-Q4_0.gguf",
	"tiny-smollm3":  "tiny-smollm3-Q4_0.gguf",
	"tiny-phi3":     "tiny-phi3-Q4_0.gguf",
	"tiny-gemma3":   "tiny-gemma3-Q4_0.gguf",
	"tiny-qwen3moe": "tiny-qwen3moe-Q4_0.gguf",
}

func TestSpeculativeGreedyExactFamilies(t *testing.T) {
	for fam := range familyDraft {
		t.Run(fam, func(t *testing.T) {
			gf := zoo.Path(t, "new", "golden", "gen-"+fam+"-Q4_K_M.json")
			if testing.Short() {
				gf = zoo.Path(t, "new", "golden", "gen-"+fam+"-Q4_0.json")
			}
			speculativeGreedyExact(t, []string{gf})
		})
	}
}

func TestAllocationsFamilies(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	fams := slices.Sorted(maps.Keys(familyDraft))
	if testing.Short() {
		// Under emulation one family: the counts come from the same Go
		// code on every CPU (the kernels allocate nothing), and each
		// family took 40-50 s under qemu.
		fams = fams[:1]
	}
	for _, fam := range fams {
		t.Run(fam, func(t *testing.T) { newFamilyAllocations(t, fam+"-Q4_K_M") })
	}
}
