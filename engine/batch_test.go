package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/geisten/geist/engine/chat"
	"github.com/geisten/geist/engine/sample"
	"github.com/geisten/geist/engine/zoo"
)

// batchReq is one request of a batching test and what it gave.
type batchReq struct {
	req   Request
	after int // it starts when the first request has emitted this many tokens
	toks  []int32
	text  strings.Builder
	st    Stats
	err   error
}

func batchRequests() []*batchReq {
	seeded := sample.Params{Temperature: 0.9, TopK: 40, TopP: 0.95, RepeatPenalty: 1.1, RepeatLastN: 64, Seed: 7}
	long := strings.Repeat("Once upon a time there was a little girl who liked to play in the garden. ", 6)
	return []*batchReq{
		{req: Request{Prompt: "Once upon a time", MaxTokens: 60, Sampling: greedy()}},
		{req: Request{Prompt: long + "One day", MaxTokens: 25, Sampling: seeded}, after: 3},
		{req: Request{Prompt: "The cat sat", MaxTokens: 40, Sampling: greedy(), Stop: []string{"zzz"}}, after: 5},
		{req: Request{Prompt: "Tom and his dog", MaxTokens: 12, Sampling: seeded}, after: 8},
		// A fifth waits for a slot, then takes the first one that frees.
		{req: Request{Prompt: long + "The end", MaxTokens: 20, Sampling: greedy()}, after: 9},
	}
}

// aloneAnswers runs every request alone, one after another, with
// speculation off.
func aloneAnswers(t *testing.T, path string, rs []*batchReq) {
	e := loadFile(t, path, Options{Ctx: 1024, Batch: 16, Threads: 2})
	for _, r := range rs {
		req := r.req
		req.Spec = SpecOptions{Mode: SpecOff}
		req.OnToken = func(id int32) { r.toks = append(r.toks, id) }
		req.OnText = func(b []byte) error { r.text.Write(b); return nil }
		if r.st, r.err = e.Generate(t.Context(), req); r.err != nil {
			t.Fatal(r.err)
		}
	}
}

// batchedAnswers runs the requests concurrently on an engine of parallel
// sequences, each starting when the first has emitted its after tokens.
func batchedAnswers(t *testing.T, e *Engine, rs []*batchReq) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	first := 0
	cond := sync.NewCond(&mu)
	for i, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu.Lock()
			for first < r.after {
				cond.Wait()
			}
			mu.Unlock()
			req := r.req
			req.OnToken = func(id int32) {
				r.toks = append(r.toks, id)
				if i == 0 {
					mu.Lock()
					first++
					cond.Broadcast()
					mu.Unlock()
				}
			}
			req.OnText = func(b []byte) error { r.text.Write(b); return nil }
			r.st, r.err = e.Generate(t.Context(), req)
			if i == 0 {
				mu.Lock()
				first = 1 << 30
				cond.Broadcast()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// TestBatchedExact: requests decoded together (joining at different
// steps, leaving at different lengths, a fifth taking a freed slot, long
// prompts prefilled in chunks while the others decode), greedy and with
// seeded sampling, each give bit for bit the tokens and text they give
// alone; for dense families (llama, qwen3, gemma3's rings, qwen3moe's
// experts).
func TestBatchedExact(t *testing.T) {
	files := []string{zoo.Path(t, "models", "tiny-llama-Q4_0.gguf"), zoo.Path(t, "new", "models", "tiny-gemma3-Q4_0.gguf")}
	if !testing.Short() {
		files = append(files, zoo.Path(t, "models", "tiny-qwen3-Q4_K_M.gguf"), zoo.Path(t, "new", "models", "tiny-qwen3moe-Q4_0.gguf"))
	}
	for _, path := range files {
		t.Run(path[strings.LastIndex(path, "/")+1:], func(t *testing.T) {
			want := batchRequests()
			aloneAnswers(t, path, want)
			e := loadFile(t, path, Options{Ctx: 1024, Batch: 16, Threads: 2, Parallel: 4})
			if e.Parallel() != 4 {
				t.Fatalf("Parallel() = %d, want 4", e.Parallel())
			}
			for round := range 2 { // the second reuses the slots' prefixes
				got := batchRequests()
				batchedAnswers(t, e, got)
				for i := range got {
					if got[i].err != nil {
						t.Fatalf("round %d request %d: %v", round, i, got[i].err)
					}
					if !slices.Equal(got[i].toks, want[i].toks) || got[i].text.String() != want[i].text.String() {
						t.Errorf("round %d request %d: batched %v %q, alone %v %q", round, i, got[i].toks, got[i].text.String(), want[i].toks, want[i].text.String())
					}
					if got[i].st.StopReason != want[i].st.StopReason || got[i].st.GeneratedTokens != want[i].st.GeneratedTokens {
						t.Errorf("round %d request %d: stop %s after %d, alone %s after %d", round, i, got[i].st.StopReason, got[i].st.GeneratedTokens, want[i].st.StopReason, want[i].st.GeneratedTokens)
					}
				}
				if round == 1 && got[0].st.ReusedTokens == 0 && e.State().Batchable() && !strings.Contains(path, "gemma3") { // gemma3's rings rewind only within the window
					t.Error("the second round reused no prefix")
				}
			}
			b := e.batch
			t.Logf("%d passes, %d with several sequences, %d with a prompt chunk beside decoding rows, most rows %d", b.passes, b.multi, b.mixed, b.most)
			if b.multi == 0 || b.mixed == 0 {
				t.Error("no pass ran several sequences, or none a prompt chunk beside decoding")
			}
		})
	}
}

// TestBatchedLeavers: a request that fails (its OnText errors after a few
// tokens), one cancelled, one with a grammar and one whose client is slow
// (OnText sleeps) leave or lag without changing the others' answers, and
// the others do not wait for the slow one's every token.
func TestBatchedLeavers(t *testing.T) {
	path := zoo.Path(t, "models", "tiny-llama-Q4_0.gguf")
	want := batchRequests()[:3]
	aloneAnswers(t, path, want)
	e := loadFile(t, path, Options{Ctx: 1024, Batch: 16, Threads: 2, Parallel: 4})
	got := batchRequests()[:3]
	boom := errors.New("client gone")
	n := 0
	got = append(got, &batchReq{req: Request{Prompt: "Lily", MaxTokens: 50, Sampling: greedy(), OnText: func([]byte) error {
		if n++; n == 4 {
			return boom
		}
		return nil
	}}})
	ctx, cancel := context.WithCancel(t.Context())
	m := 0
	cancelled := &batchReq{req: Request{Prompt: "Ben", MaxTokens: 50, Sampling: greedy(), OnToken: func(int32) {
		if m++; m == 3 {
			cancel()
		}
	}}}
	slow := &batchReq{req: Request{Prompt: "Sue", MaxTokens: 5, Sampling: greedy(), OnText: func([]byte) error {
		time.Sleep(30 * time.Millisecond)
		return nil
	}}}
	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		batchedAnswers(t, e, got[:3])
	}()
	go func() {
		defer wg.Done()
		_, got[3].err = e.Generate(t.Context(), got[3].req)
		cancelled.st, cancelled.err = e.Generate(ctx, cancelled.req)
	}()
	go func() {
		defer wg.Done()
		slow.st, slow.err = e.Generate(t.Context(), slow.req)
	}()
	wg.Wait()
	if !errors.Is(got[3].err, boom) {
		t.Errorf("the failing request: %v", got[3].err)
	}
	if !errors.Is(cancelled.err, context.Canceled) {
		t.Errorf("the cancelled request: %v", cancelled.err)
	}
	if slow.err != nil || slow.st.GeneratedTokens != 5 {
		t.Errorf("the slow request: %v, %d tokens", slow.err, slow.st.GeneratedTokens)
	}
	for i := range want {
		if got[i].err != nil || !slices.Equal(got[i].toks, want[i].toks) {
			t.Errorf("request %d beside the leavers: %v %v, alone %v", i, got[i].err, got[i].toks, want[i].toks)
		}
	}
}

// TestBatchedRecurrent: the recurrent families (lfm2's short
// convolutions, qwen35's gated DeltaNet, granitehybrid's Mamba-2) decode
// together, each sequence from its own recurrent state, joining and
// leaving at different steps, a fifth taking a freed slot (whose state
// rewinds to a checkpoint or to 0), with the speculation modes of
// TestBatchedSpeculation (drafted trees rewound per sequence by Compact's
// replay): each answer is bit for bit the one it is alone, greedy and
// seeded, in two rounds.
func TestBatchedRecurrent(t *testing.T) {
	files := []string{zoo.Path(t, "new", "models", "tiny-lfm2-Q4_0.gguf"), zoo.Path(t, "new2", "models", "tiny-qwen35-Q4_0.gguf"), zoo.Path(t, "new2", "models", "tiny-granitehybrid-Q4_0.gguf")}
	if !testing.Short() {
		files = append(files, zoo.Path(t, "new2", "models", "tiny-qwen35-Q4_K_M.gguf"), zoo.Path(t, "new2", "models", "tiny-granitehybrid-Q8_0.gguf"))
	}
	for _, path := range files {
		t.Run(path[strings.LastIndex(path, "/")+1:], func(t *testing.T) {
			want := batchedSpeculation(t, path)
			e := loadFile(t, path, Options{Ctx: 1024, Batch: 16, Threads: 2, Parallel: 4})
			got := batchRequests()
			for _, r := range got {
				r.req.Spec = SpecOptions{Mode: SpecOff}
			}
			batchedAnswers(t, e, got)
			for i := range got {
				if got[i].err != nil || !slices.Equal(got[i].toks, want[i].toks) {
					t.Errorf("request %d without speculation: %v %v, alone %v", i, got[i].err, got[i].toks, want[i].toks)
				}
			}
		})
	}
}

// TestAutoParallel: the automatic count of sequences.
func TestAutoParallel(t *testing.T) {
	for _, c := range []struct {
		cap, ctx, want int
	}{{0, 4096, 1}, {4096, 4096, 1}, {8192, 4096, 2}, {100000, 4096, 4}, {12000, 4096, 2}} {
		if got := AutoParallel(ContextChoice{MemoryCap: c.cap}, c.ctx); got != c.want {
			t.Errorf("AutoParallel(cap %d, ctx %d) = %d, want %d", c.cap, c.ctx, got, c.want)
		}
	}
}

// TestAllocationsBatched: a batched decoding step of three sequences
// (their rendezvous with the runner, the pass, the logits' copy) allocates
// nothing.
func TestAllocationsBatched(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	e := loadFile(t, zoo.Path(t, "models", "tiny-llama-Q4_0.gguf"), Options{Ctx: 1024, Batch: 16, Threads: 2, Parallel: 3})
	b := e.batch
	var sls []*slot
	for i := range 3 {
		sl, err := b.acquire(t.Context(), []int32{int32(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		sls = append(sls, sl)
	}
	step := func() {
		var wg sync.WaitGroup
		for _, sl := range sls[1:] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sl.one[0] = 5
				if _, err := b.pass(sl, sl.one[:], true); err != nil {
					panic(err)
				}
			}()
		}
		sls[0].one[0] = 5
		if _, err := b.pass(sls[0], sls[0].one[:], true); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
	step()
	// What the step's own goroutines cost is the test's, not the loop's:
	// count the one goroutine's step with the others' passes run by
	// goroutines started before.
	if a := steadyAllocs(10, func() {
		sls[0].one[0] = 5
		if _, err := b.pass(sls[0], sls[0].one[:], true); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("%v allocations per batched step", a)
	}
	for _, sl := range sls {
		b.release(sl)
	}
}

// TestBatchedPromptCache: in batched mode the prompt cache works as alone:
// a first engine's batched request stores its prefixes, and a second
// engine's requests, run together, restore them into their slots and
// answer as cold runs do; also for the recurrent families (their
// checkpoints and states in the snapshots).
func TestBatchedPromptCache(t *testing.T) {
	for _, path := range []string{zoo.Path(t, "models", "tiny-llama-Q4_0.gguf"), zoo.Path(t, "new2", "models", "tiny-qwen35-Q4_0.gguf"), zoo.Path(t, "new2", "models", "tiny-granitehybrid-Q4_0.gguf"), zoo.Path(t, "new", "models", "tiny-lfm2-Q4_0.gguf")} {
		t.Run(path[strings.LastIndex(path, "/")+1:], func(t *testing.T) { batchedPromptCache(t, path) })
	}
}

func batchedPromptCache(t *testing.T, path string) {
	system := "You are the house assistant. You answer briefly. The kitchen lights are on, the garden lights are off, the front door is locked and the heating is set to twenty degrees. Never invent devices."
	questions := []string{"Are the garden lights on?", "Is the front door locked?"}
	req := func(q string) Request {
		return Request{Messages: []chat.Message{{Role: "system", Content: system}, {Role: "user", Content: q}}, MaxTokens: 24, Sampling: greedy()}
	}
	var cold []*batchReq
	for _, q := range questions {
		cold = append(cold, &batchReq{req: req(q)})
	}
	aloneAnswers(t, path, cold)
	cache := &memCache{}
	e1 := loadFile(t, path, Options{Ctx: 512, Batch: 16, Cache: cache, Parallel: 2})
	if _, err := e1.Generate(t.Context(), req(questions[0])); err != nil {
		t.Fatal(err)
	}
	e1.Close()
	e2 := loadFile(t, path, Options{Ctx: 512, Batch: 16, Cache: cache, Parallel: 3})
	got := []*batchReq{{req: req(questions[1])}, {req: req(questions[0]), after: 2}}
	batchedAnswers(t, e2, got)
	for i, r := range got {
		if r.err != nil || !slices.Equal(r.toks, cold[len(cold)-1-i].toks) {
			t.Errorf("question %d: %v %v, cold %v", i, r.err, r.toks, cold[len(cold)-1-i].toks)
		}
		if r.st.RestoredTokens == 0 {
			t.Errorf("question %d restored nothing from the prompt cache", i)
		}
	}
}

// TestBatchedRefusedRows: rows the pass refuses (a token out of the
// vocabulary) fail their own sequence only; the others' pass runs, with
// the logits they get alone.
func TestBatchedRefusedRows(t *testing.T) {
	path := zoo.Path(t, "models", "tiny-llama-Q4_0.gguf")
	alone := loadFile(t, path, Options{Ctx: 256, Batch: 16, Threads: 2})
	want, err := alone.State().Forward([]int32{1, 5}, false)
	if err != nil {
		t.Fatal(err)
	}
	e := loadFile(t, path, Options{Ctx: 256, Batch: 16, Threads: 2, Parallel: 2})
	b := e.batch
	good, err := b.acquire(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := b.acquire(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	good.s.Truncate(0)
	if _, err := b.pass(good, []int32{1}, false); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := b.pass(bad, []int32{int32(e.model.NVocab)}, true)
		done <- err
	}()
	got, err := b.pass(good, []int32{5}, true)
	if err != nil {
		t.Fatalf("the good sequence: %v", err)
	}
	if err := <-done; err == nil {
		t.Error("a token out of the vocabulary was accepted")
	}
	if !slices.Equal(got, want) {
		t.Error("the good sequence's logits differ from alone")
	}
	b.release(good)
	b.release(bad)
}
