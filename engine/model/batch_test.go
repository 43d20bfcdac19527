package model

import (
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/quant"
)

// batchFiles are the dense families of the zoo: llama, qwen2, qwen3 (QK
// norms), gemma3 (sliding-window rings), gemma4 (per-layer embeddings,
// shared KV layers), phi3, smollm3 (NoPE layers), qwen3moe (experts);
// and the recurrent ones: lfm2 (short convolutions), qwen35 (gated
// DeltaNet), granitehybrid (Mamba-2).
func batchFiles(t *testing.T) []string {
	fs := []string{zoo.Path(t, "models", "tiny-llama-Q4_0.gguf"), zoo.Path(t, "models", "tiny-qwen3-Q4_K_M.gguf"), zoo.Path(t, "new", "models", "tiny-gemma3-Q4_0.gguf"),
		zoo.Path(t, "new", "models", "tiny-lfm2-Q4_0.gguf"), new2Model(t, "tiny-qwen35-Q4_0"), new2Model(t, "tiny-granitehybrid-Q4_0")}
	if testing.Short() {
		return fs
	}
	for _, f := range []string{"tiny-gemma4-Q4_0", "tiny-phi3-Q4_K_M", "tiny-smollm3-Q4_0", "tiny-qwen3moe-Q4_0", "tiny-granite-Q8_0"} {
		fs = append(fs, zoo.Path(t, "new", "models", f+".gguf"))
	}
	return append(fs, zoo.Path(t, "models", "tiny-qwen2-F16.gguf"))
}

// TestForwardBatchInvariance: sequences that join a batch at different
// passes, prefill their prompts in chunks between the others' decoding
// steps, decode one token per pass and leave (their slot taken by a new
// sequence) get, at every pass, logits bit for bit those of each sequence
// run alone one token at a time; with F16 and Q8_0 caches.
//
// Under -short (the emulated runs) the Q8_0 cache runs on the first file
// only: the cache's kernels are the same for every family, and
// TestBatchInvarianceQ8KV covers it further.
func TestForwardBatchInvariance(t *testing.T) {
	for _, kv := range []quant.Type{quant.F16, quant.Q8_0} {
		for i, path := range batchFiles(t) {
			if kv == quant.Q8_0 && i > 0 && testing.Short() {
				continue
			}
			name := strings.TrimSuffix(filepath.Base(path), ".gguf")
			t.Run(kv.String()+"/"+name, func(t *testing.T) { forwardBatchInvariance(t, path, kv) })
		}
	}
}

type batchSeq struct {
	toks   []int32
	prompt int // the first prompt tokens are prefilled in chunks
	chunk  int
	join   int // the pass it joins at
	slot   int
	done   int // tokens run
	ref    []float32
}

func forwardBatchInvariance(t *testing.T, path string, kv quant.Type) {
	m := openModel(t, path)
	const ctx = 160
	rng := rand.New(rand.NewPCG(3, 4))
	seqs := []*batchSeq{
		{prompt: 9, chunk: 4, join: 0, slot: 0},
		{prompt: 70, chunk: 16, join: 2, slot: 1},
		{prompt: 1, chunk: 1, join: 3, slot: 2},
		{prompt: 23, chunk: 23, join: 30, slot: 0}, // takes the first one's slot when it has left
	}
	lens := []int{25, 110, 60, 40}
	nv := m.NVocab
	for i, q := range seqs {
		q.toks = make([]int32, lens[i])
		for j := range q.toks {
			q.toks[j] = int32(rng.IntN(nv))
		}
		one, err := m.NewState(StateOptions{Ctx: ctx, Batch: 1, Threads: 2, KVType: kv})
		if err != nil {
			t.Fatal(err)
		}
		q.ref = make([]float32, len(q.toks)*nv)
		for j, tok := range q.toks {
			lg, err := one.Forward([]int32{tok}, true)
			if err != nil {
				t.Fatal(err)
			}
			copy(q.ref[j*nv:], lg)
		}
		one.Close()
	}
	w, err := m.NewState(StateOptions{Ctx: 64, MaxCtx: ctx, Batch: 32, Threads: 2, LogitRows: 4, KVType: kv})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	slots := []*State{w}
	for range 2 {
		sl, err := w.NewSlot(StateOptions{Ctx: 32, MaxCtx: ctx, KVType: kv})
		if err != nil {
			t.Fatal(err)
		}
		defer sl.Close()
		slots = append(slots, sl)
	}
	if _, err := slots[1].Forward([]int32{1}, false); err == nil {
		t.Error("a slot ran a pass of its own")
	}
	batch := make([]Seq, 0, len(seqs))
	var in []*batchSeq
	for pass := 0; ; pass++ {
		batch, in = batch[:0], in[:0]
		rows, left := 0, 0
		for _, q := range seqs {
			if q.done < len(q.toks) {
				left++
			}
			if pass < q.join || q.done == len(q.toks) {
				continue
			}
			if q.slot == 0 && q != seqs[0] && seqs[0].done < len(seqs[0].toks) {
				continue // its slot is still taken
			}
			S := slots[q.slot]
			if q.done == 0 {
				S.Truncate(0)
			}
			k := 1
			if q.done < q.prompt {
				k = min(q.chunk, q.prompt-q.done)
			}
			if rows+k > w.MaxBatch() {
				continue // the next pass
			}
			rows += k
			batch = append(batch, Seq{S: S, Tokens: q.toks[q.done : q.done+k], Logits: true})
			in = append(in, q)
		}
		if left == 0 {
			break
		}
		if pass > 500 {
			t.Fatal("the schedule does not end")
		}
		if len(batch) == 0 {
			continue
		}
		lg, err := w.ForwardBatch(batch)
		if err != nil {
			t.Fatal(err)
		}
		for i, q := range in {
			q.done += len(batch[i].Tokens)
			p := q.done - 1
			got, want := lg[i*nv:(i+1)*nv], q.ref[p*nv:(p+1)*nv]
			for j := range want {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					t.Fatalf("pass %d: sequence %d position %d (%d sequences, %d rows): logit %d is %v in the batch, %v alone", pass, q.slot, p, len(batch), rows, j, got[j], want[j])
				}
			}
			if S := batch[i].S; S.Len() != q.done || S.Tokens()[p] != q.toks[p] {
				t.Fatalf("sequence %d holds %d tokens, want %d", q.slot, S.Len(), q.done)
			}
		}
	}
}

// TestForwardBatchErrors: what a batched pass refuses.
func TestForwardBatchErrors(t *testing.T) {
	m := openModel(t, zoo.Path(t, "models", "tiny-llama-Q4_0.gguf"))
	w, err := m.NewState(StateOptions{Ctx: 16, Batch: 8, Threads: 1, LogitRows: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	sl, err := w.NewSlot(StateOptions{Ctx: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	other, err := m.NewState(StateOptions{Ctx: 16, Batch: 8, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for name, seqs := range map[string][]Seq{
		"empty":       nil,
		"no tokens":   {{S: sl}},
		"twice":       {{S: sl, Tokens: []int32{1}}, {S: sl, Tokens: []int32{2}}},
		"foreign":     {{S: other, Tokens: []int32{1}}},
		"too many":    {{S: sl, Tokens: make([]int32, 9)}},
		"logits":      {{S: sl, Tokens: []int32{1}, Logits: true}, {S: w, Tokens: []int32{1}, Logits: true}, {S: nil}},
		"bad token":   {{S: sl, Tokens: []int32{-1}}},
		"context end": {{S: sl, Tokens: make([]int32, 8)}, {S: w, Tokens: []int32{1}}},
	} {
		if name == "context end" {
			for range 2 {
				if _, err := w.ForwardBatch([]Seq{{S: sl, Tokens: make([]int32, 5)}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := w.ForwardBatch(seqs); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := sl.ForwardBatch([]Seq{{S: sl, Tokens: []int32{1}}}); err == nil {
		t.Error("a slot served as a workspace")
	}
	lfm, err := openModel(t, zoo.Path(t, "new", "models", "tiny-lfm2-Q4_0.gguf")).NewState(StateOptions{Ctx: 16, Batch: 8, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer lfm.Close()
	if _, err := lfm.NewSlot(StateOptions{Ctx: 16}); errors.Is(err, ErrNotBatchable) || err != nil {
		t.Errorf("a recurrent model's slot: %v", err) // every family batches now
	}
}

// TestAllocationsForwardBatch: a batched decoding pass of three sequences
// allocates nothing, for a dense family and the recurrent ones.
func TestAllocationsForwardBatch(t *testing.T) {
	for _, path := range []string{zoo.Path(t, "new", "models", "tiny-gemma3-Q4_0.gguf"), zoo.Path(t, "new", "models", "tiny-lfm2-Q4_0.gguf"), new2Model(t, "tiny-qwen35-Q4_0"), new2Model(t, "tiny-granitehybrid-Q4_0")} {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".gguf"), func(t *testing.T) { allocationsForwardBatch(t, path) })
	}
}

func allocationsForwardBatch(t *testing.T, path string) {
	m := openModel(t, path)
	w, err := m.NewState(StateOptions{Ctx: 512, Batch: 16, Threads: 2, LogitRows: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	seqs := []Seq{{S: w, Tokens: []int32{1}, Logits: true}}
	for range 2 {
		sl, err := w.NewSlot(StateOptions{Ctx: 512})
		if err != nil {
			t.Fatal(err)
		}
		defer sl.Close()
		seqs = append(seqs, Seq{S: sl, Tokens: []int32{2}, Logits: true})
	}
	if _, err := w.ForwardBatch(seqs); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(20, func() {
		if _, err := w.ForwardBatch(seqs); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("%v allocations per batched pass", a)
	}
}
