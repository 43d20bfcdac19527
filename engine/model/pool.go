package model

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// pool is a persistent set of worker goroutines that split one range of
// work (matrix rows, attention heads) between them. Dispatching allocates
// nothing: the work function is set once per call site, its parameters live
// in the State.
//
// A decoding step runs over a hundred short jobs back to back, so waking a
// parked goroutine for each (a futex round trip through the OS scheduler,
// tens of microseconds on a busy board) would eat a large share of a step.
// Workers therefore spin on the job counter for a short while after each
// job (spinFor) and only then park on their channel; the caller spins for
// the workers to finish. An idle pool costs nothing once the spin ends.
type pool struct {
	n     int           // workers, counting the calling goroutine
	gen   atomic.Uint64 // job number: a new job increments it
	left  atomic.Int32  // workers (besides the caller) still on the job
	sleep []atomic.Bool // worker i is parked (or about to park) on wake[i]
	wake  []chan struct{}
	fn    func(lo, hi int)
	total int
	grain int
	stop  chan struct{}
	done  atomic.Bool
	once  sync.Once
}

// spinFor is how long an idle worker keeps polling for the next job before
// it parks: longer than the gaps between the jobs of one decoding step.
const spinFor = 200 * time.Microsecond

// yieldEvery is how many polls a spinning goroutine makes between yields
// to the scheduler (a few microseconds): rare enough to cost nothing (a
// yield takes the scheduler's locks), often enough that more threads than
// processors still make progress.
const yieldEvery = 4096

func newPool(threads int) *pool {
	if threads < 1 {
		threads = 1
	}
	p := &pool{n: threads, stop: make(chan struct{})}
	p.wake = make([]chan struct{}, threads)
	p.sleep = make([]atomic.Bool, threads)
	for i := 1; i < threads; i++ {
		p.wake[i] = make(chan struct{}, 1)
		go p.worker(i)
	}
	return p
}

func (p *pool) worker(i int) {
	var seen uint64
	for {
		g, ok := p.await(i, seen)
		if !ok {
			return
		}
		seen = g
		lo, hi := p.span(i)
		if lo < hi {
			p.fn(lo, hi)
		}
		p.left.Add(-1)
	}
}

// await returns the next job number after seen, spinning first and then
// parking; false when the pool is closed.
func (p *pool) await(i int, seen uint64) (uint64, bool) {
	for {
		start := time.Now()
		for s := 1; ; s++ {
			if g := p.gen.Load(); g != seen {
				return g, true
			}
			if s%256 == 0 {
				if p.done.Load() {
					return 0, false
				}
				if time.Since(start) > spinFor {
					break
				}
				if s%yieldEvery == 0 {
					runtime.Gosched()
				}
			}
		}
		// Park. The flag is set before the last look at the counter and
		// run reads it after bumping the counter, so a job is never
		// missed; a wake-up without a new job just loops.
		p.sleep[i].Store(true)
		if g := p.gen.Load(); g != seen {
			p.sleep[i].Store(false)
			return g, true
		}
		select {
		case <-p.wake[i]:
		case <-p.stop:
			return 0, false
		}
		p.sleep[i].Store(false)
	}
}

// span is worker i's share of [0, total), in multiples of grain.
func (p *pool) span(i int) (int, int) {
	units := (p.total + p.grain - 1) / p.grain
	lo := units * i / p.n * p.grain
	hi := units * (i + 1) / p.n * p.grain
	return min(lo, p.total), min(hi, p.total)
}

// run calls fn over [0, total) split into contiguous spans, one per
// worker, and returns when all are done. Spans are multiples of grain.
// Small ranges run on the calling goroutine alone.
func (p *pool) run(fn func(lo, hi int), total, grain int) {
	if grain < 1 {
		grain = 1
	}
	if p.n == 1 || total <= grain {
		fn(0, total)
		return
	}
	p.fn, p.total, p.grain = fn, total, grain
	p.left.Store(int32(p.n - 1))
	p.gen.Add(1)
	for i := 1; i < p.n; i++ {
		if p.sleep[i].Load() {
			select {
			case p.wake[i] <- struct{}{}:
			default:
			}
		}
	}
	lo, hi := p.span(0)
	if lo < hi {
		fn(lo, hi)
	}
	for s := 1; p.left.Load() != 0; s++ {
		if s%yieldEvery == 0 {
			runtime.Gosched()
		}
	}
	p.fn = nil
}

// close stops the workers.
func (p *pool) close() {
	p.once.Do(func() {
		p.done.Store(true)
		close(p.stop)
	})
}
