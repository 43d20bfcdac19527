package engine

import (
	"path/filepath"
	"testing"

	"github.com/geisten/geist/engine/zoo"
)

// TestSpeculativeGreedyExactGemma4: greedy output identical with lookup
// and n-gram trees, chains, the skipped-layer draft and auto mode, over
// prompts longer than the sliding window.
func TestSpeculativeGreedyExactGemma4(t *testing.T) {
	files, _ := filepath.Glob(zoo.Path(t, "new", "golden", "gen-tiny-gemma4-*.json"))
	if len(files) == 0 {
		t.Fatal("no gen-tiny-gemma4 goldens")
	}
	speculativeGreedyExact(t, files)
}

// TestPromptCacheRestoreGemma4: a restored prefix continues as a cold run.
func TestPromptCacheRestoreGemma4(t *testing.T) {
	files, _ := filepath.Glob(zoo.Path(t, "new", "models", "tiny-gemma4-*.gguf"))
	if len(files) == 0 {
		t.Fatal("no tiny-gemma4 models")
	}
	promptCacheRestore(t, files)
}
