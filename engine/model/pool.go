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
// parked goroutine for each (a futex round trip through the OS scheduler)
// would eat a large share of a step. Workers therefore poll the job counter
// for a short while after each job before they park, and the caller polls
// for them to finish before it parks. The polls are bounded by count, not
// by clock (reading the clock is a system call under emulation), and kept
// short: when more goroutines want to run than there are processors (two
// engines, a parallel test run, qemu), a long spin takes the processor from
// the goroutine that has the work.
type pool struct {
	n       int           // workers, counting the calling goroutine
	gen     atomic.Uint64 // job number: a new job increments it
	left    atomic.Int32  // workers (besides the caller) still on the job
	sleep   []atomic.Bool // worker i is parked (or about to park) on wake[i]
	wake    []chan struct{}
	waiting atomic.Bool   // the caller is parked (or about to park) on done
	done    chan struct{} // the last worker to finish wakes the caller
	fn      func(lo, hi int)
	fnw     func(w, lo, hi int) // instead of fn: told which worker runs the span
	total   int
	grain   int
	stop    chan struct{}
	stopped atomic.Bool
	once    sync.Once
	// polls before parking: workerPolls and callerPolls, except in tests
	// that exercise the parking paths.
	workerPolls, callerPolls int
	// kind and prof: the State's profile of its jobs (nil: none).
	kind int
	prof *[jobKinds]JobProfile
}

const (
	// workerPolls is how many times an idle worker polls for the next job
	// before it parks (tens of microseconds natively: longer than the gaps
	// between the jobs of one decoding step).
	workerPolls = 1 << 17
	// callerPolls is how many times the caller polls for the workers to
	// finish before it parks.
	callerPolls = 1 << 14
	// yieldEvery is how many polls pass between yields to the scheduler.
	yieldEvery = 1 << 12
)

func newPool(threads int) *pool { return newPollingPool(threads, workerPolls, callerPolls) }

// newPollingPool is newPool with the poll counts given.
func newPollingPool(threads, workerPolls, callerPolls int) *pool {
	if threads < 1 {
		threads = 1
	}
	p := &pool{n: threads, stop: make(chan struct{}), done: make(chan struct{}, 1),
		workerPolls: workerPolls, callerPolls: callerPolls}
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
			if p.fnw != nil {
				p.fnw(i, lo, hi)
			} else {
				p.fn(lo, hi)
			}
		}
		if p.left.Add(-1) == 0 && p.waiting.Load() {
			select {
			case p.done <- struct{}{}:
			default:
			}
		}
	}
}

// await returns the next job number after seen, polling first and then
// parking; false when the pool is closed.
func (p *pool) await(i int, seen uint64) (uint64, bool) {
	for {
		for s := 1; s <= p.workerPolls; s++ {
			if g := p.gen.Load(); g != seen {
				return g, true
			}
			if s%yieldEvery == 0 {
				if p.stopped.Load() {
					return 0, false
				}
				runtime.Gosched()
			}
		}
		// Park. The flag is set before the last look at the counter and
		// run reads it after bumping the counter, so a job is never
		// missed; a wake-up without a new job just loops. The flag is set
		// with a swap, not a store: this hand-over needs the store
		// ordered before the following load, which arm64's STLR;LDAR
		// promises but qemu's translation of them does not keep on an
		// x86 host (the store can wait in the store buffer while the
		// load runs ahead: both sides miss each other and the pool hangs,
		// as it did once in CI). A swap is a locked instruction there and
		// costs the same as a store natively.
		p.sleep[i].Swap(true)
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
func (p *pool) run(fn func(lo, hi int), total, grain int) { p.runAny(fn, nil, total, grain) }

// runWorker is run for work that keeps scratch per worker: fn is told the
// index (0..n-1) of the worker that runs the span.
func (p *pool) runWorker(fn func(w, lo, hi int), total, grain int) { p.runAny(nil, fn, total, grain) }

func (p *pool) runAny(fn func(lo, hi int), fnw func(w, lo, hi int), total, grain int) {
	if grain < 1 {
		grain = 1
	}
	var t0 time.Time
	if p.prof != nil {
		t0 = time.Now()
	}
	if p.n == 1 || total <= grain {
		if fnw != nil {
			fnw(0, 0, total)
		} else {
			fn(0, total)
		}
		if p.prof != nil {
			jp := &p.prof[p.kind]
			jp.Runs++
			jp.Own += time.Since(t0)
		}
		return
	}
	p.fn, p.fnw, p.total, p.grain = fn, fnw, total, grain
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
	if lo, hi := p.span(0); lo < hi {
		if fnw != nil {
			fnw(0, lo, hi)
		} else {
			fn(lo, hi)
		}
	}
	if p.prof != nil {
		t1 := time.Now()
		p.wait()
		jp := &p.prof[p.kind]
		jp.Runs++
		jp.Parallel++
		jp.Own += t1.Sub(t0)
		jp.Wait += time.Since(t1)
	} else {
		p.wait()
	}
	p.fn, p.fnw = nil, nil
}

// wait returns when every worker has finished the current job: polling,
// then parked on done (same protocol as the workers' parking; a stale
// wake-up just loops).
func (p *pool) wait() {
	for s := 1; p.left.Load() != 0; s++ {
		if s%yieldEvery == 0 {
			runtime.Gosched()
		}
		if s < p.callerPolls {
			continue
		}
		p.waiting.Swap(true) // a swap for the reason given in await
		if p.left.Load() != 0 {
			<-p.done
		}
		p.waiting.Store(false)
	}
}

// close stops the workers.
func (p *pool) close() {
	p.once.Do(func() {
		p.stopped.Store(true)
		close(p.stop)
	})
}
