package model

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/sample"
	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/neon"
	"github.com/geisten/geist/quant"
)

type genGolden struct {
	Model     string `json:"model"`
	Tolerance struct {
		MaxAbs  float64 `json:"max_abs"`
		MeanAbs float64 `json:"mean_abs"`
	} `json:"tolerance"`
	Cases []struct {
		Prompt       string  `json:"prompt"`
		PromptTokens []int32 `json:"prompt_tokens"`
		Tokens       []int32 `json:"tokens"`
		TopLogprobs  [][]struct {
			ID      int32   `json:"id"`
			Logprob float64 `json:"logprob"`
		} `json:"top_logprobs"`
	} `json:"cases"`
}

func loadGen(t testing.TB, path string) *genGolden {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g genGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &g
}

func openModel(t testing.TB, path string) *Model {
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	o := LoadOptions{RepackBudget: -1}
	if testRepackShare > 0 {
		o.RepackBudget = repackBudget(t, f, testRepackShare)
	}
	m, err := LoadWith(f, o)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	return m
}

// TestConformance reads every golden generation teacher-forced and compares
// the log-probabilities of llama.cpp's top-8 tokens at every generated
// position with the file's tolerance.
func TestConformance(t *testing.T) {
	files, _ := filepath.Glob(zoo.Path(t, "golden", "gen-*.json"))
	if len(files) == 0 {
		t.Fatal("no gen-*.json goldens")
	}
	forEachKernels(t, func(t *testing.T) { conformance(t, files, quant.F16) })
}

// TestConformanceQ8KV measures what a Q8_0 KV cache costs against the
// same goldens (models whose head size allows it) and logs the errors.
// Quantized models stay inside their tolerance; float models, whose
// tolerance is ten times tighter, show the 8-bit rounding of keys and
// values: it allows 0.25 at worst and 0.04 on average there.
func TestConformanceQ8KV(t *testing.T) {
	files, _ := filepath.Glob(zoo.Path(t, "golden", "gen-tiny-*.json"))
	if testing.Short() {
		// Under emulation: the quantized models (the cache's kernels are
		// the same; float weights only make each pass slower).
		files = slices.DeleteFunc(files, func(f string) bool {
			return strings.HasSuffix(f, "F16.json") || strings.HasSuffix(f, "F32.json")
		})
	}
	conformance(t, files, quant.Q8_0)
}

// forEachKernels runs f once with every kernel set this CPU can run
// (generic, neon, neon-dotprod, avx2, ...), as a subtest named after it.
//
// With -short on arm64 (qemu in CI) only the CPU's own set runs: the
// generic set is the same Go code the native run tests in full (under
// emulation it took a third of this package's time), and the Cortex-A76
// run's neon set is the Cortex-A72 run's (the same instructions; it took
// half of that phase), so A72 tests neon and A76 neon-dotprod.
func forEachKernels(t *testing.T, f func(t *testing.T)) {
	avail := neon.Available()
	for _, k := range avail {
		if testing.Short() && runtime.GOARCH == "arm64" && k != avail[0] {
			t.Logf("-short on arm64: the %s kernel set is tested natively or on the CPU whose best set it is", k.Name)
			continue
		}
		t.Run(k.Name, func(t *testing.T) {
			restore, err := neon.Use(k.Name)
			if err != nil {
				t.Fatal(err)
			}
			defer restore()
			f(t)
		})
	}
}

// sweptElsewhere reports whether the file called name (its weight type
// by the name's suffix: tiny-llama-Q4_1) has its full conformance and
// invariance sweeps under another kernel set than the active one: each
// file is swept in full under the sets with kernels of their own for its
// type (the SIMD sets that have them, or the generic set when none has),
// and by the short sweep under the rest, which run the very same products
// (a SIMD set without kernels for the type uses the generic ones) or
// products that neon's tests compare with the SIMD kernels (the generic
// set). Natively the generic set's conformance took 70% of TestConformance
// (573 of 814 s, load 30), and BF16, Q4_1 and Q5_1 under avx2 and
// avx512vnni 83% of what remained.
func sweptElsewhere(name string) bool {
	typ := name[strings.LastIndex(name, "-")+1:]
	var w *neon.Weight
	for i := range neon.Weights {
		if x := neon.Weights[i].Weight; x == typ || x+"_M" == typ || x+"_S" == typ || x+"_L" == typ {
			w = &neon.Weights[i]
		}
	}
	if w == nil {
		return false
	}
	generic := neon.Generic()
	own := func(k *neon.Kernels) bool { // k has kernels of its own for the type
		same := reflect.ValueOf(w.Dot(k)).Pointer() == reflect.ValueOf(w.Dot(generic)).Pointer()
		return !same || w.Rows != nil && w.Rows(k) != nil || w.Tile != nil && w.Tile(k) != nil || w.Pack != nil && w.Pack(k) != nil
	}
	if active := neon.Active(); active != generic {
		return !own(active)
	}
	return slices.ContainsFunc(neon.Available(), func(k *neon.Kernels) bool { return k != generic && own(k) })
}

func conformance(t *testing.T, files []string, kv quant.Type) {
	conformanceScaled(t, files, kv, 1, false)
}

// conformanceScaled is conformance with the goldens' max_abs tolerance of
// the quantized files × maxScale (the means keep theirs), over every case
// of a golden even with -short when allCases (the mean of one case is not
// the mean the tolerance was measured over).
func conformanceScaled(t *testing.T, files []string, kv quant.Type, maxScale float64, allCases bool) {
	for _, gf := range files {
		g := loadGen(t, gf)
		name := strings.TrimSuffix(g.Model, ".gguf")
		t.Run(name, func(t *testing.T) {
			m := openModel(t, filepath.Join(filepath.Dir(filepath.Dir(gf)), "models", g.Model)) // golden/ beside models/
			maxTol, meanTol := g.Tolerance.MaxAbs, g.Tolerance.MeanAbs
			if !strings.HasSuffix(name, "F16") && !strings.HasSuffix(name, "F32") {
				maxTol *= maxScale
			}
			if kv == quant.Q8_0 {
				maxTol, meanTol = max(maxTol, 0.25), max(meanTol, 0.04)
			}
			worst, sum, count := 0.0, 0.0, 0
			lp := make([]float32, m.NVocab)
			cases := g.Cases
			if (testing.Short() || sweptElsewhere(name)) && !allCases {
				// Under emulation: the first prompt of every file; natively,
				// likewise under a set that is not the file's (see
				// sweptElsewhere).
				cases = cases[:1]
			}
			for ci, c := range cases {
				seq := append(append([]int32{}, c.PromptTokens...), c.Tokens...)
				s, err := m.NewState(StateOptions{Ctx: len(seq), Batch: 16, Threads: 2, KVType: kv})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if _, err := s.Forward(c.PromptTokens, false); err != nil {
					t.Fatal(err)
				}
				// Position i is predicted after prompt + tokens[:i]; run the
				// generated tokens in batches and check every row.
				s.Truncate(len(c.PromptTokens) - 1)
				rest := seq[len(c.PromptTokens)-1 : len(seq)-1]
				pos := 0
				for len(rest) > 0 {
					chunk := rest[:min(len(rest), s.MaxBatch())]
					rest = rest[len(chunk):]
					logits, err := s.Forward(chunk, true)
					if err != nil {
						t.Fatal(err)
					}
					for j := range chunk {
						sample.LogSoftmax(lp, logits[j*m.NVocab:(j+1)*m.NVocab])
						for _, ref := range c.TopLogprobs[pos] {
							d := math.Abs(float64(lp[ref.ID]) - ref.Logprob)
							sum += d
							count++
							if d > worst {
								worst = d
							}
							if d > maxTol {
								t.Errorf("case %d position %d token %d: logprob %.5f, llama.cpp %.5f (|diff| %.4f > %.4f)", ci, pos, ref.ID, lp[ref.ID], ref.Logprob, d, maxTol)
							}
						}
						pos++
					}
				}
			}
			mean := sum / float64(count)
			t.Logf("%-22s kv %-4s worst |Δlogprob| %.5f (tolerance %.4f), mean %.5f (tolerance %.4f), %d comparisons",
				name, kv, worst, g.Tolerance.MaxAbs, mean, g.Tolerance.MeanAbs, count)
			if mean > meanTol {
				t.Errorf("mean |Δlogprob| %.5f exceeds the tolerance %.5f", mean, meanTol)
			}
		})
	}
}

// TestConformanceFiles runs the conformance check on the gen goldens that
// GEIST_GEN_FILES names (a glob; each golden's model in models/ beside its
// golden/ directory): files made for a question (a held-back shape
// rebuilt, a new quantization) rather than the zoo's. Skipped without it.
func TestConformanceFiles(t *testing.T) {
	pat := os.Getenv("GEIST_GEN_FILES")
	if pat == "" {
		t.Skip("GEIST_GEN_FILES is not set")
	}
	files, err := filepath.Glob(pat)
	if err != nil || len(files) == 0 {
		t.Fatalf("GEIST_GEN_FILES %q names no file (%v)", pat, err)
	}
	forEachKernels(t, func(t *testing.T) { conformanceScaled(t, files, quant.F16, 1, true) })
}
