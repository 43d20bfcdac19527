package model

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// TestPoolParking runs many short jobs with polling turned off or nearly
// off, so that every job goes through the parking hand-over between the
// caller and the workers: a lost wake-up hangs the test, which the watchdog
// turns into a failure. Each job checks that every index ran exactly once.
func TestPoolParking(t *testing.T) {
	jobs := 20000
	if testing.Short() {
		jobs = 5000
	}
	for _, threads := range []int{2, 3, 4} {
		for _, polls := range [][2]int{{0, 0}, {1, 1}, {64, 0}, {0, 64}} {
			t.Run(fmt.Sprintf("threads=%d/polls=%v", threads, polls), func(t *testing.T) {
				p := newPollingPool(threads, polls[0], polls[1])
				defer p.close()
				const total = 64
				var hits [total]atomic.Int32
				var progress atomic.Int64
				done := make(chan struct{})
				go func() {
					defer close(done)
					fn := func(lo, hi int) {
						for i := lo; i < hi; i++ {
							hits[i].Add(1)
						}
					}
					for j := 0; j < jobs; j++ {
						p.run(fn, total, 1)
						progress.Add(1)
					}
				}()
				last := int64(-1)
				for {
					select {
					case <-done:
						for i := range hits {
							if got := hits[i].Load(); got != int32(jobs) {
								t.Fatalf("index %d ran %d times in %d jobs", i, got, jobs)
							}
						}
						return
					case <-time.After(20 * time.Second):
						now := progress.Load()
						if now == last {
							t.Fatalf("no job finished in 20 s (after %d of %d): a lost wake-up", now, jobs)
						}
						last = now
					}
				}
			})
		}
	}
}
