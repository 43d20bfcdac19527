package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

// TestServeDraftSidecar: serve drafts with draft_model when set, else
// with MODEL.draft.gguf beside a model file when there, else with none.
func TestServeDraftSidecar(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.gguf")
	c := Config{Model: model}
	if d := c.DraftFile(); d != "" {
		t.Errorf("no sidecar: draft model %q", d)
	}
	side := filepath.Join(dir, "m.draft.gguf")
	if err := os.WriteFile(side, []byte("GGUF"), 0o600); err != nil {
		t.Fatal(err)
	}
	if d := c.DraftFile(); d != side {
		t.Errorf("sidecar: draft model %q, want %q", d, side)
	}
	c.DraftModel = "/x/assistant.gguf"
	if d := c.DraftFile(); d != c.DraftModel {
		t.Errorf("draft_model set: %q", d)
	}
	c = Config{Model: "qwen3:1.7b"}
	if d := c.DraftFile(); d != "" {
		t.Errorf("a stored model's name: draft model %q", d)
	}
}
