package daemon

import (
	"slices"
	"testing"
	"time"

	"github.com/geisten/geist/cmd/internal/models"
	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/zoo"
)

// TestShowFamilies: what /api/show says of a loaded model of each family
// of issues 23 and 27 (the zoo's new/ files): the family is the
// architecture, the parameter size (rounded as the store rounds it) and quantization
// level are the file's,
// the context length the one geist runs with, model_info carries the
// family's keys, and the capabilities are the template's (tools where geist can place a
// request's tools: a tools variable, Phi-4-mini's system-message string,
// SmolLM3's xml_tools or system block; thinking where it has a switch).
func TestShowFamilies(t *testing.T) {
	for _, c := range []struct {
		fam, params string
		caps        []string
	}{
		{"gemma3", "3M", []string{"completion", "structured_outputs"}},
		{"qwen3moe", "3M", []string{"completion", "tools", "thinking", "structured_outputs"}},
		{"phi3", "2M", []string{"completion", "tools", "structured_outputs"}},
		{"granite", "2M", []string{"completion", "tools", "thinking", "structured_outputs"}},
		{"smollm3", "3M", []string{"completion", "tools", "thinking", "structured_outputs"}},
		{"lfm2", "3M", []string{"completion", "tools", "structured_outputs"}},
		{"gemma4", "3M", []string{"completion", "tools", "thinking", "structured_outputs"}},
	} {
		t.Run(c.fam, func(t *testing.T) {
			path := zoo.Path(t, "new", "models", "tiny-"+c.fam+"-Q4_K_M.gguf")
			eng, err := engine.Load(path, engine.Options{Ctx: 256, Batch: 8, SelfSpec: engine.SelfSpecOff})
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			cfg := Config{Model: path}
			m, err := cfg.loadedModel(eng, models.New(t.TempDir()), time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if m.Family != c.fam || m.Quantization != "Q4_K_M" || m.ParameterSize != c.params || m.ContextLength != 256 {
				t.Errorf("family %q, quantization %q, parameters %q, context %d; want %s, Q4_K_M, %s, 256",
					m.Family, m.Quantization, m.ParameterSize, m.ContextLength, c.fam, c.params)
			}
			if _, ok := m.Info[c.fam+".block_count"]; !ok || m.EmbeddingLength <= 0 {
				t.Errorf("model_info lacks %s.block_count or the embedding length (%d)", c.fam, m.EmbeddingLength)
			}
			if !slices.Equal(m.Capabilities, c.caps) {
				t.Errorf("capabilities %v, want %v", m.Capabilities, c.caps)
			}
		})
	}
}
