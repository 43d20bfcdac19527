package model

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
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
// The F16 files hold the goldens' tolerances (worst 0.014 of 0.02, mean
// 0.0026 of 0.003). The quantized files hold their mean tolerances, and
// max_abs × qwen35MaxScale: those tolerances are twice llama.cpp's
// flash-attention on/off disagreement, which leaves out how the DeltaNet
// recurrence (32 positions of state carried through three layers, then
// re-quantized activations) amplifies rounding. Measured (avx2, this
// file's history): float32 instead of float64 exp and softplus in the
// decay moved Q4_0's worst position from 0.348 to 0.291; ggml's SiLU form
// x/(1+e^-x) and sqrtf in the L2 norm moved Q4_K_M's from 0.444 to 0.513
// (means 0.043-0.062 of 0.073); geist's own generic and avx2 kernel sets,
// which differ only in rounding, give 0.444 and 0.513 on the same file.
// The worst positions are late (25-28 of 32) and scattered over the top-8
// tokens, not a shift of them.
//
// That the factor covers rounding noise and not an error was measured
// (issue 35) with two perturbations that change nothing but the rounding
// of the same arithmetic, over the five cases' 1,280 top-8 log-probs of
// each quantized file (Q8_0 / Q4_0 / Q4_K_M, tolerances 0.222 / 0.306 /
// 0.352): geist's generic against its avx2 set (DeltaRow with and without
// fused multiply-adds, the weights' sums in other orders) differ by 0.257
// / 0.277 / 0.541 at worst (1.16x / 0.91x / 1.54x the tolerance), and
// llama.cpp against itself, the goldens' incremental decoding (the prompt
// in one batch, then token by token) against the whole sequence in one
// llama_decode through libllama, by 0.121 / 0.130 / 0.470 (up to 1.34x on
// Q4_K_M). geist's worst against llama.cpp's batched evaluation is 0.297 /
// 0.348 / 0.329 and against the goldens 0.278 / 0.348 / 0.513: inside
// what either engine's own rounding moves. The F16 files (no 8-bit
// re-quantization to amplify it) hold their tolerances unscaled.
func TestConformanceQwen35(t *testing.T) {
	files := new2Goldens(t, "qwen35")
	if testing.Short() {
		// Under emulation: the files without the MTP block (the main
		// pass is the same), every case of each, and not the F16 one
		// (50 of this test's 74 s under A72: its head of F16 rows; the
		// recurrent and attention layers are the same for every weight
		// type and run on the three quantized files, F16 products on
		// TestConformance's F16 files).
		files = slices.DeleteFunc(files, func(f string) bool { return strings.Contains(f, "-mtp-") || strings.HasSuffix(f, "-F16.json") })
	}
	forEachKernels(t, func(t *testing.T) {
		conformanceScaled(t, genericOne(t, files), quant.F16, qwen35MaxScale, true)
	})
}

// qwen35MaxScale is the factor on the quantized qwen35 files' max_abs
// tolerance (see TestConformanceQwen35).
const qwen35MaxScale = 1.6

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

// TestRecurrentRewind: a qwen35 state rewound inside its log (a rejected
// draft, a partly accepted verification pass), to its prefill checkpoint,
// or restored from a snapshot into a fresh state continues bit for bit
// like one uninterrupted run; a snapshot it cannot take exactly is refused.
func TestRecurrentRewind(t *testing.T) {
	n := 120
	m, seq, newState, ref := rewindSetup(t, new2Model(t, "tiny-qwen35-Q4_0"), n)
	check := func(what string, s *State, upto int) {
		t.Helper()
		for i := s.Len(); i < upto; i++ {
			lg, err := s.Forward(seq[i:i+1], false)
			if err != nil {
				t.Fatal(err)
			}
			sameRows(t, what, lg, ref[i], 0, 1, m.NVocab, i, 1)
		}
	}
	s := newState()
	if _, err := s.Forward(seq[:40], false); err != nil { // prefill: a checkpoint at 40
		t.Fatal(err)
	}
	// A verification pass of 8 (wrong) tokens, 3 of them accepted.
	at := s.Len()
	bad := append([]int32(nil), seq[at:at+8]...)
	bad[3], bad[5] = (bad[3]+1)%int32(m.NVocab), (bad[5]+1)%int32(m.NVocab)
	if err := s.ForwardRows(bad); err != nil {
		t.Fatal(err)
	}
	s.Truncate(at + 3)
	if s.Len() != at+3 {
		t.Fatalf("Truncate(%d) inside the log kept %d", at+3, s.Len())
	}
	check("after a partly accepted pass", s, 60)
	// A tree whose kept path is not its first nodes.
	at = s.Len()
	toks := []int32{(seq[at] + 5) % int32(m.NVocab), seq[at], seq[at+1], seq[at+2]}
	if err := s.ForwardTree(toks, []int32{-1, -1, 1, 2}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(at, []int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	check("after Compact", s, 80)
	// Self-draft steps (blocks skipped) dropped as a whole.
	at = s.Len()
	skip := &Skip{Attn: make([]bool, m.NLayer)}
	skip.Attn[1] = true
	for i := 0; i < 4; i++ {
		if err := s.ForwardTree(seq[at+i:at+i+1], nil, skip); err != nil {
			t.Fatal(err)
		}
	}
	s.Truncate(at)
	if s.Len() != at {
		t.Fatalf("Truncate(%d) after a draft kept %d", at, s.Len())
	}
	check("after a dropped draft", s, 90)
	// Back to the prefill's checkpoint.
	s.Truncate(45)
	if s.Len() != 40 {
		t.Fatalf("Truncate(45) past the log kept %d, want the checkpoint 40", s.Len())
	}
	check("after Truncate to the checkpoint", s, 100)
	// Snapshots at the end, inside the log and at the checkpoint restore
	// exactly.
	for _, at := range []int{100, 99, 40} {
		blob, err := s.Snapshot(at, nil)
		if err != nil {
			t.Fatalf("Snapshot(%d): %v", at, err)
		}
		r := newState()
		if err := r.Restore(seq[:at], blob); err != nil {
			t.Fatal(err)
		}
		check("after Restore", r, n)
	}
	if _, err := s.Snapshot(70, nil); err == nil {
		t.Error("a snapshot the recurrent state cannot return to was taken")
	}
	if err := s.Probe(seq[:2], 0, nil); err == nil {
		t.Error("a probe of a recurrent model was run")
	}
	check("after Snapshot", s, n)
	t.Logf("recurrent state: %d bytes", s.RecStateBytes())
}

// BenchmarkRecurrentState measures what the recurrent state costs under
// speculation on Qwen3.5-0.8B's shape (18 DeltaNet layers of 16 heads of
// 128×128: 1 MiB of state each), without weights: a verification pass's
// rejected drafts (Truncate to the pass's start: nothing to replay), the
// replay of an accepted path of k tokens (Truncate or Compact to
// base+k: k steps of the recurrence per layer), one token's step (what a
// decoded token's recurrence costs in the pass itself), and the memory
// the state holds (reported as bytes/state).
func BenchmarkRecurrentState(b *testing.B) {
	c := Config{NLayer: 24, NEmbd: 1024, Rec: make([]bool, 24)}
	c.DeltaNet = DeltaNet{DNHeadsK: 16, DNHeadsV: 16, DNHeadK: 128, DNHeadV: 128}
	c.RecTaps, c.RecConv = 3, 3*2048
	c.RecState, c.RecIn, c.RecOut = 16*128*128, 3*2048+2*16, 2048
	for l := range c.Rec {
		c.Rec[l] = (l+1)%4 != 0
	}
	s := &State{m: &Model{Config: c}, ctx: 4096, maxRows: 33, maxBatch: 33, pool: newPool(1), toks: make([]int32, 4096)}
	s.newRecState()
	rs := &s.rec
	for r := range rs.lay { // unit q and k, as the layer feeds them
		for e := 0; e < rs.K; e++ {
			in := rs.log[r][e*c.RecIn : (e+1)*c.RecIn]
			for j := range in[:2*2048] {
				in[j] = 1 / float32(11.3137)
			}
			for j := 2 * 2048; j < len(in); j++ {
				in[j] = 0.5
			}
		}
	}
	pass := func(n int) { // as if a verification pass of n tokens had run from base
		s.n, s.toks = 1000+n, s.toks[:1000+n]
		rs.bpos, rs.nlog, rs.lo, rs.tree = 1000, n, 1000+n-rs.R, false
	}
	b.ReportMetric(float64(s.RecStateBytes()), "bytes/state")
	b.Run("reject-all-9", func(b *testing.B) {
		c0 := cpuNow()
		for b.Loop() {
			pass(9)
			s.Truncate(1000)
		}
		reportCPU(b, c0)
	})
	for _, k := range []int{1, 4} {
		b.Run(fmt.Sprintf("accept-%d-of-9", k), func(b *testing.B) {
			c0 := cpuNow()
			for b.Loop() {
				pass(9)
				s.Truncate(1000 + k)
			}
			reportCPU(b, c0)
		})
	}
	b.Run("compact-tree-path-4", func(b *testing.B) {
		nodes := []int32{0, 2, 5, 7}
		c0 := cpuNow()
		for b.Loop() {
			pass(12)
			rs.tree, rs.treeAt, rs.chain = true, 0, 1
			if err := s.recCompact(1000, nodes); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, c0)
	})
	b.Run("step-one-layer", func(b *testing.B) {
		c0 := cpuNow()
		for b.Loop() {
			deltaStep(s, 0, rs.work[0], rs.work[0], rs.log[0][:c.RecIn], rs.tmp)
		}
		reportCPU(b, c0)
	})
}
