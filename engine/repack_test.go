package engine

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/zoo"
)

func TestRepackBudgetSpec(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		spec  string
		avail int64
		want  int64
	}{
		{"", 16 * gib, 12 * gib}, {"auto", 16 * gib, 12 * gib}, {"auto", 0, -1}, {"auto", 300 << 20, 0},
		{"all", 16 * gib, -1}, {"none", 16 * gib, 0}, {"0", 16 * gib, 0},
		{"6GiB", 0, 6 * gib}, {"6G", 0, 6 * gib}, {"512MiB", 0, 512 << 20}, {"3.5g", 0, 3.5 * gib}, {"4096", 0, 4096}, {" 64 KiB ", 0, 64 << 10},
	} {
		got, err := RepackBudget(c.spec, c.avail)
		if err != nil || got != c.want {
			t.Errorf("RepackBudget(%q, %d) = %d, %v; want %d", c.spec, c.avail, got, err, c.want)
		}
	}
	for _, bad := range []string{"lots", "-1G", "6TB", "1e30"} {
		if _, err := RepackBudget(bad, 0); err == nil || !strings.Contains(err.Error(), "want auto, all, none or a size") {
			t.Errorf("RepackBudget(%q): %v", bad, err)
		}
	}
	if _, err := Load(zoo.Path(t, "new", "models", "tiny-qwen3moe-Q4_0.gguf"), Options{RepackBudget: "lots"}); err == nil || !strings.Contains(err.Error(), `repack budget "lots"`) {
		t.Errorf("Load with a bad budget: %v", err)
	}
}

// TestRepackBudgetGenerate: the zoo's qwen3moe Q4_0 file with nothing
// repacked (every matrix multiplied from the mapped file) generates the
// greedy text of the fully repacked one, plainly and speculatively, and
// decodes without allocating.
func TestRepackBudgetGenerate(t *testing.T) {
	path := zoo.Path(t, "new", "models", "tiny-qwen3moe-Q4_0.gguf")
	run := func(e *Engine, mode SpecMode) []int32 {
		var got []int32
		e.Reset()
		req := Request{Prompt: copyHeavy[0], MaxTokens: 48, Sampling: greedy(), Spec: SpecOptions{Mode: mode},
			OnToken: func(id int32) { got = append(got, id) }}
		if _, err := e.Generate(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		return got
	}
	all := loadFile(t, path, Options{Ctx: 512, Batch: 16, SelfSpec: SelfSpecOff, RepackBudget: "all"})
	none := loadFile(t, path, Options{Ctx: 512, Batch: 16, SelfSpec: SelfSpecOff, RepackBudget: "none"})
	// A kernel set without packed layouts for the file's types (neon
	// without the dot-product instructions, Cortex-A72) repacks nothing
	// under any budget: every matrix is read from the file either way.
	if r := all.Model().Repack; r.Packed == 0 && r.InFile == 0 {
		t.Log("this kernel set packs none of the file's types: both budgets read every matrix from the file")
	} else {
		if r := none.Model().Repack; r.Packed != 0 || r.ExpertsInFile != r.Experts || r.InFile == 0 {
			t.Fatalf("budget none: %v", r)
		}
		if r := all.Model().Repack; r.InFile != 0 || r.Packed == 0 {
			t.Fatalf("budget all: %v", r)
		}
	}
	want := run(all, SpecOff)
	for _, mode := range []SpecMode{SpecOff, SpecAuto, SpecLookup} {
		if got := run(none, mode); !slices.Equal(got, want) {
			t.Errorf("--spec %s, nothing repacked:\n got %v\nwant %v", mode, got, want)
		}
	}
	s := none.state
	tok := []int32{1}
	if a := steadyAllocs(10, func() {
		if _, err := s.Forward(tok, false); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("%v allocations per decoded token with the experts in the file", a)
	}
}
