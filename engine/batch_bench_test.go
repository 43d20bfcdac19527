package engine

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// BenchmarkBatchedDecode: aggregate and per-request decoding speed of 1,
// 2 and 4 concurrent requests (32 tokens each, greedy, short prompts) on
// an engine of 4 sequences, and one request alone on an engine of one
// (--parallel 1, speculation off) for reference. The model is
// GEIST_BENCH_MODEL (a geist synth file, say), the threads
// GEIST_BENCH_THREADS (default 1,2); skipped without a model.
//
//	GEIST_BENCH_MODEL=llama32-1b-Q4_0.gguf go test -run '^$' -bench BatchedDecode -benchtime 2x ./engine
//
// tok/s is the tokens of all requests over the wall time of the round
// (prefill of the short prompts included), req-tok/s each request's own
// decoding speed (Stats.DecodeTokS), averaged.
func BenchmarkBatchedDecode(b *testing.B) {
	path := os.Getenv("GEIST_BENCH_MODEL")
	if path == "" {
		b.Skip("GEIST_BENCH_MODEL names no model")
	}
	threads := []int{1, 2}
	if s := os.Getenv("GEIST_BENCH_THREADS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		threads = []int{n}
	}
	prompts := []string{"Once upon a time", "The weather today is", "In the kitchen there", "My favourite number is"}
	for _, th := range threads {
		for _, c := range []struct {
			par, streams int
		}{{1, 1}, {4, 1}, {4, 2}, {4, 4}} {
			b.Run(fmt.Sprintf("threads=%d/parallel=%d/streams=%d", th, c.par, c.streams), func(b *testing.B) {
				e, err := Load(path, Options{Threads: th, Ctx: 512, Parallel: c.par})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				var toks int
				var reqSpeed float64
				var wall time.Duration
				for b.Loop() {
					var wg sync.WaitGroup
					sts := make([]Stats, c.streams)
					t0 := time.Now()
					for i := range c.streams {
						wg.Add(1)
						go func() {
							defer wg.Done()
							st, err := e.Generate(b.Context(), Request{Prompt: prompts[i], MaxTokens: 32, Sampling: greedy(), Spec: SpecOptions{Mode: SpecOff}})
							if err != nil {
								b.Error(err)
							}
							sts[i] = st
						}()
					}
					wg.Wait()
					wall += time.Since(t0)
					for _, st := range sts {
						toks += st.GeneratedTokens
						reqSpeed += st.DecodeTokS
					}
					e.Reset()
				}
				b.ReportMetric(float64(toks)/wall.Seconds(), "tok/s")
				b.ReportMetric(reqSpeed/float64(b.N*c.streams), "req-tok/s")
			})
		}
	}
}
