package model

import (
	"math/rand/v2"
	"testing"

	"github.com/geisten/geist/quant"
)

// granitehybrid (Granite 4.0-H): Mamba-2 layers and attention layers
// without rope, from the zoo's new2/ files.

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

// TestMamba2Rewind: the Mamba-2 state returns exactly to every position
// a verification pass may rewind to (a rejected draft, the accepted part
// replayed), to a compacted tree's path, to its checkpoint (KeepAt) and
// through snapshots; a self-speculative draft that skips Mamba-2 layers
// computes the same one token at a time as in one pass, and the target
// continues exactly after it. Every continuation is compared bit for bit
// with one uninterrupted run.
func TestMamba2Rewind(t *testing.T) {
	n := 64
	m, seq, newState, ref := rewindSetup(t, new2Model(t, "tiny-granitehybrid-Q4_0"), n)
	next := func(what string, s *State) {
		t.Helper()
		i := s.Len()
		lg, err := s.Forward(seq[i:i+1], false)
		if err != nil {
			t.Fatal(err)
		}
		sameRows(t, what, lg, ref[i], 0, 1, m.NVocab, i, 1)
	}
	s := newState()
	if _, err := s.Forward(seq[:20], false); err != nil {
		t.Fatal(err)
	}
	// A verification pass of 6, 3 accepted: the rest is dropped, the
	// accepted part replayed by the next pass.
	if err := s.ForwardRows(seq[20:26]); err != nil {
		t.Fatal(err)
	}
	if s.Truncate(23); s.Len() != 23 {
		t.Fatalf("Truncate(23) after a pass over 20..25 kept %d", s.Len())
	}
	next("after a rejected draft", s)
	// A tree whose kept path is node 0, then node 2 (node 1 a sibling).
	base := s.Len()
	wrong := (seq[base] + 1) % int32(m.NVocab)
	if err := s.ForwardTree([]int32{seq[base], wrong, seq[base+1]}, []int32{-1, -1, 0}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(base, []int32{0, 2}); err != nil {
		t.Fatal(err)
	}
	next("after a compacted tree", s)
	// A passed-over position inside the log: snapshot, restore, continue.
	if err := s.ForwardRows(seq[s.Len() : s.Len()+5]); err != nil {
		t.Fatal(err)
	}
	at := s.Len() - 2
	blob, err := s.Snapshot(at, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := newState()
	if err := r.Restore(seq[:at], blob); err != nil {
		t.Fatal(err)
	}
	next("after Restore inside the log", r)
	s.Truncate(at)
	next("after Truncate inside the log", s)
	// Far back: no checkpoint, back to the start.
	if s.Truncate(5); s.Len() != 0 {
		t.Fatalf("Truncate(5) far back kept %d, want 0", s.Len())
	}
	// A checkpoint (what the engine pins at the system prompt's end).
	if _, err := s.Forward(seq[:10], false); err != nil {
		t.Fatal(err)
	}
	s.Checkpoint()
	if _, err := s.Forward(seq[10:40], false); err != nil {
		t.Fatal(err)
	}
	if e := s.ExactPrefix(15); e != 10 {
		t.Fatalf("ExactPrefix(15) with a checkpoint at 10: %d", e)
	}
	if blob, err = s.Snapshot(10, nil); err != nil {
		t.Fatal(err)
	}
	r = newState()
	if err := r.Restore(seq[:10], blob); err != nil {
		t.Fatal(err)
	}
	next("after Restore of the checkpoint", r)
	s.Truncate(15)
	next("after Truncate to the checkpoint", s)
	// A draft that skips Mamba-2 layers 0 and 3 (and attention 4): one
	// token at a time as in one pass; then the target.
	skip := &Skip{Attn: make([]bool, m.NLayer)}
	skip.Attn[0], skip.Attn[3], skip.Attn[4] = true, true, true
	at = s.Len()
	var draft [3][]float32
	for j := range draft {
		if err := s.ForwardTree(seq[at+j:at+j+1], nil, skip); err != nil {
			t.Fatal(err)
		}
		lg, _ := s.Logits(0, 1)
		draft[j] = append([]float32(nil), lg...)
	}
	s.Truncate(at)
	if err := s.ForwardTree(seq[at:at+3], nil, skip); err != nil {
		t.Fatal(err)
	}
	lg, _ := s.Logits(0, 3)
	for j := range draft {
		sameRows(t, "draft, one pass", lg[j*m.NVocab:], draft[j], j, j+1, m.NVocab, at, 3)
	}
	s.Truncate(at)
	for range 4 {
		next("after a draft", s)
	}
	t.Logf("recurrent state memory of this State: %d KiB (a state %d KiB)", s.RecStateBytes()>>10, m.SSMStateBytes()>>10)
}

// TestGraniteHybridConfig: the layer kinds, multipliers and the refusals.
func TestGraniteHybridConfig(t *testing.T) {
	m := openModel(t, new2Model(t, "tiny-granitehybrid-Q8_0"))
	c := &m.Config
	kinds := ""
	for l := range c.NLayer {
		switch {
		case c.IsSSM(l) && !c.OwnKV(l):
			kinds += "M"
		case !c.IsSSM(l) && c.OwnKV(l) && c.ropeOff(l):
			kinds += "A"
		default:
			kinds += "?"
		}
	}
	if kinds != "MMAMA" || c.SSMInner != 512 || c.SSMHeads != 8 || c.SSMState != 64 || c.SSMGroups != 1 || c.SSMConv != 4 ||
		c.EmbdScale != 12 || c.LogitScale != 8 || c.ResidScale != 0.22 || c.AttnScale != 1.0/128 {
		t.Errorf("layers %s, ssm %d/%d/%d/%d/%d, scales %v %v %v %v", kinds, c.SSMInner, c.SSMHeads, c.SSMState, c.SSMGroups, c.SSMConv,
			c.EmbdScale, c.LogitScale, c.ResidScale, c.AttnScale)
	}
	s, err := m.NewState(StateOptions{Ctx: 32, Batch: 4, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Forward([]int32{1, 2, 3, 4}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.Probe([]int32{2}, 1, nil); err == nil {
		t.Error("a probe of a Mamba-2 model succeeded")
	}
}

// BenchmarkMamba2State: what the Mamba-2 state costs under speculation
// on a Granite-4.0-H-1B shape (40 layers, 36 of them Mamba-2 with 48
// heads of 64 and a state of 128: 1.5 MiB per layer): one token's step of
// every Mamba-2 layer (what any pass pays per token for the recurrence,
// beside the weights), a verification pass of 9 rejected whole
// (Truncate to its start), 4 of 9 accepted (Truncate replays them from
// the logged inputs: per accepted token), a tree's kept path of 4
// (Compact: the log rows moved and replayed), and the memory the State
// holds for the recurrent layers (logged with -v).
func BenchmarkMamba2State(b *testing.B) {
	const L = 40
	c := Config{NLayer: L, NEmbd: 1536}
	c.Rec = make([]bool, L)
	for l := range c.Rec {
		c.Rec[l] = l%10 != 9
	}
	c.SSMInner, c.SSMState, c.SSMHeads, c.SSMGroups, c.SSMConv = 3072, 128, 48, 1, 4
	c.RecShape = RecShape{RecState: 3072 * 128, RecConv: c.ssmConvCh(), RecTaps: 3, RecIn: c.ssmConvCh() + 2*48, RecOut: 3072}
	m := &Model{Config: c, Layers: make([]Layer, L)}
	s := &State{m: m, ctx: 4096, maxRows: 33, maxBatch: 33, pool: newPool(1), toks: make([]int32, 4096)}
	defer s.Close()
	s.newRecState()
	rs := &s.rec
	rng := rand.New(rand.NewPCG(1, 2))
	In, ch, H := c.RecIn, c.RecConv, c.SSMHeads
	fill := func(row []float32) {
		for i := range row[:ch] {
			row[i] = rng.Float32()*0.2 - 0.1
		}
		for h := 0; h < H; h++ {
			row[ch+h], row[ch+H+h] = 0.05, ssmDecay(0.05, -0.5-float32(h)/float32(H))
		}
	}
	for i := 0; i < s.maxBatch; i++ {
		fill(rs.in[i*In : (i+1)*In])
	}
	for r := range rs.lay {
		for e := 0; e < rs.K; e++ {
			fill(rs.log[r][e*In : (e+1)*In])
		}
	}
	const at = 1000
	pass := func(n int) {
		// As if a verification pass of n tokens had run from at.
		s.n, s.toks = at+n, s.toks[:at+n]
		rs.bpos, rs.nlog, rs.tree, rs.draft, rs.cut = at, n, false, false, rs.K
		rs.lo = 0
	}
	b.Run("step-per-token", func(b *testing.B) {
		c0 := cpuNow()
		for b.Loop() {
			for r, l := range rs.lay {
				rs.step(s, l, rs.work[r], rs.base[r], rs.in[:In], rs.out[:c.RecOut])
			}
		}
		reportCPU(b, c0)
	})
	b.Run("reject-9", func(b *testing.B) {
		c0 := cpuNow()
		for b.Loop() {
			pass(9)
			s.Truncate(at)
		}
		reportCPU(b, c0)
	})
	b.Run("accept-4-of-9", func(b *testing.B) {
		c0 := cpuNow()
		for b.Loop() {
			pass(9)
			s.Truncate(at + 4)
		}
		reportCPU(b, c0)
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/4, "ns/accepted-token")
	})
	b.Run("compact-tree-path-4", func(b *testing.B) {
		nodes := []int32{0, 2, 5, 7}
		c0 := cpuNow()
		for b.Loop() {
			pass(12)
			rs.tree, rs.treeAt, rs.chain = true, 0, 1
			if err := s.recCompact(at, nodes); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, c0)
	})
	b.Logf("recurrent state held: %.1f MiB (one layer's state %.2f MiB, %d layers)", float64(s.RecStateBytes())/(1<<20), float64(4*c.RecState)/(1<<20), len(rs.lay))
}
