package model

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/quant"
)

// testRepackShare, when positive, makes openModel load with a repack
// budget of everything but the experts and that share of the experts.
var testRepackShare float64

// repackBudget is the memory repacking all of f's matrices but the
// experts takes, and share of what the experts take.
func repackBudget(t testing.TB, f *gguf.File, share float64) int64 {
	m, err := LoadWith(f, LoadOptions{RepackBudget: -1, Plan: true})
	if err != nil {
		t.Fatal(err)
	}
	var experts int64
	for i := range m.Layers {
		L := &m.Layers[i]
		for e := range L.ExpGate {
			mem, _ := unitSize([]*quant.Matrix{L.ExpGate[e], L.ExpUp[e], L.ExpDown[e]})
			experts += mem
		}
	}
	return m.Repack.Packed - experts + int64(share*float64(experts))
}

// withRepackShare runs f with openModel's budget at share.
func withRepackShare(share float64, f func()) {
	saved := testRepackShare
	testRepackShare = share
	defer func() { testRepackShare = saved }()
	f()
}

// TestRepackBudget: the zoo's qwen3moe files loaded with a repack budget
// of the rest and half the experts (and of nothing) repack a prefix of the matrices, the attention
// and the head first, and leave the rest of the experts in the file; the
// logits are those of the fully repacked model, bit for bit where every
// packed layout involved is exact (Q4_0, Q8_0: the packed kernels and the
// ggml-layout kernels both reproduce the generic dots), within the
// k-quant packings' own tolerance otherwise (Q4_K_M: 2e-6 relative, the
// packed and one-row k-quant dots sum in another order); conformance
// against llama.cpp and batch invariance hold with the experts in the
// file.
func TestRepackBudget(t *testing.T) {
	files, _ := filepath.Glob(zoo.Path(t, "new", "models", "tiny-qwen3moe-*.gguf"))
	if len(files) == 0 {
		t.Fatal("no tiny-qwen3moe models in the zoo's new/models")
	}
	seq := []int32{1, 17, 300, 5, 42, 99, 7, 250, 3, 1000, 12, 8}
	forEachKernels(t, func(t *testing.T) {
		for _, path := range files {
			name := strings.TrimSuffix(filepath.Base(path), ".gguf")
			if testing.Short() && !strings.HasSuffix(name, "Q4_0") && !strings.HasSuffix(name, "Q4_K_M") {
				continue
			}
			t.Run(name, func(t *testing.T) {
				full := openModel(t, path)
				if full.Repack.Packed == 0 {
					t.Skipf("the %s kernels have no packed layout for this file's types", t.Name())
				}
				if full.Repack.InFile != 0 || full.Repack.ExpertsInFile != 0 {
					t.Fatalf("no budget: %v", full.Repack)
				}
				want := logitsOf(t, full, seq)
				for _, share := range []float64{0.5, 0} {
					var m *Model
					withRepackShare(share, func() { m = openModel(t, path) })
					if share == 0 { // openModel's 0 means no budget
						f, err := gguf.Open(path)
						if err != nil {
							t.Fatal(err)
						}
						defer f.Close()
						if m, err = LoadWith(f, LoadOptions{RepackBudget: 0}); err != nil {
							t.Fatal(err)
						}
					}
					r := m.Repack
					packed, left := 0, 0
					for _, w := range m.matrices() {
						if w.Packed() != "" {
							packed++
						} else if w.PackedSize() > 0 {
							left++
						}
					}
					if r.Packed > r.Budget || packed != r.Matrices || left != r.MatricesLeft || r.ExpertsInFile == 0 ||
						(share > 0 && r.ExpertsInFile == r.Experts) || r.PackedFile+r.InFile != full.Repack.PackedFile {
						t.Fatalf("budget share %v: %v (%d matrices packed, %d left)", share, r, packed, left)
					}
					if share > 0 && m.Layers[0].Wq.Packed() == "" {
						t.Errorf("the attention is not repacked first: %v", r)
					}
					exact := true // the matrices packed in full and not in m are in exact layouts
					for i, w := range m.matrices() {
						if w.Packed() == "" && !full.matrices()[i].PackedExact() && full.matrices()[i].Packed() != "" {
							exact = false
						}
					}
					got := logitsOf(t, m, seq)
					worst := 0.0
					for i := range got {
						if exact && math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%v: logit %d: %v, fully repacked %v", r, i, got[i], want[i])
						}
						worst = max(worst, math.Abs(float64(got[i]-want[i])))
					}
					if worst > 1e-3 {
						t.Errorf("%v: logits differ by up to %g from the fully repacked model", r, worst)
					}
					t.Logf("%s: %v; exact layouts %v, largest logit difference %g", name, r, exact, worst)
				}
			})
		}
	})
	withRepackShare(0.5, func() {
		t.Run("allocations", func(t *testing.T) { expertsInFileAllocs(t, zoo.Path(t, "new", "models", "tiny-qwen3moe-Q4_0.gguf")) })
		t.Run("conformance", func(t *testing.T) { conformance(t, familyGoldens(t, "qwen3moe"), quant.F16) })
		t.Run("invariance", func(t *testing.T) { batchInvariance(t, familyModel(t, "qwen3moe")) })
	})
}

// expertsInFileAllocs: decoding a token with experts left in the mapped
// file (advised random, each chosen one asked for with WillNeed after
// routing) allocates nothing.
func expertsInFileAllocs(t *testing.T, path string) {
	m := openModel(t, path)
	if m.Repack.ExpertsInFile == 0 {
		t.Skipf("no expert left in the file: %v", m.Repack)
	}
	st, err := m.NewState(StateOptions{Ctx: 256, Batch: 4, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tok := []int32{1}
	if _, err := st.Forward(tok, true); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(20, func() {
		if st.Len() > 200 {
			st.Truncate(1)
		}
		if _, err := st.Forward(tok, true); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("%v allocations per decoded token with %d experts in the file", a, m.Repack.ExpertsInFile)
	}
}
