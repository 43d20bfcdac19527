package bench

import (
	"sync"
	"time"
)

// memReadBandwidth measures this machine's memory read bandwidth in bytes
// per second with the given number of threads: each sums its share of a
// buffer four times larger than any last-level cache of the boards geist
// runs on (256 MiB), 8 independent 64-bit accumulators per thread, best of
// reps passes. It is the figure decode speed is compared with: decoding
// reads every weight once per token.
func memReadBandwidth(threads, reps int) float64 {
	const size = 256 << 20
	buf := make([]uint64, size/8)
	for i := range buf {
		buf[i] = uint64(i) // touch every page: no zero-page reads
	}
	best := 0.0
	var sink uint64
	var mu sync.Mutex
	for r := 0; r < reps; r++ {
		t0 := time.Now()
		var wg sync.WaitGroup
		part := len(buf) / threads
		for t := 0; t < threads; t++ {
			wg.Add(1)
			go func(p []uint64) {
				defer wg.Done()
				s := sumWords(p)
				mu.Lock()
				sink += s
				mu.Unlock()
			}(buf[t*part : (t+1)*part])
		}
		wg.Wait()
		best = max(best, float64(part*threads*8)/time.Since(t0).Seconds())
	}
	_ = sink
	return best
}

func sumWords(b []uint64) uint64 {
	var s0, s1, s2, s3, s4, s5, s6, s7 uint64
	for i := 0; i+8 <= len(b); i += 8 {
		s0 += b[i]
		s1 += b[i+1]
		s2 += b[i+2]
		s3 += b[i+3]
		s4 += b[i+4]
		s5 += b[i+5]
		s6 += b[i+6]
		s7 += b[i+7]
	}
	return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7
}
