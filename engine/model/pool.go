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
	n int // workers, counting the calling goroutine
	// job is the current job's number (high 32 bits), how many chunks it
	// has (next 16) and how many of them have been taken (low 16). A
	// worker takes a chunk by a compare-and-swap that finds the job's
	// number unchanged, so a worker that comes late to a job takes nothing
	// from the next one, and the job's parameters it reads after a
	// successful take stay put until it has finished that chunk.
	job     atomic.Uint64
	_       [56]byte     // job, which every take writes, on its own cache line
	left    atomic.Int32 // chunks of the current job not yet finished
	_       [60]byte
	sleep   []atomic.Bool // worker i is parked (or about to park) on wake[i]
	wake    []chan struct{}
	waiting atomic.Bool   // the caller is parked (or about to park) on done
	done    chan struct{} // the worker that finishes the last chunk wakes the caller
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

// chunksPerWorker is how many chunks a job is cut into per worker. The
// workers take chunks as they come free rather than one fixed span each,
// so a worker that starts late (a wake-up, another process on its core)
// or runs slower (rows of a wider type) leaves its share to the others
// instead of making them wait; more chunks balance better and cost one
// compare-and-swap each.
const chunksPerWorker = 4

// maxChunks bounds a job's chunks (16 bits of pool.job).
const maxChunks = 1<<16 - 1

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
	var seen uint32
	for {
		g, ok := p.await(i, seen)
		if !ok {
			return
		}
		seen = g
		p.chunks(i, g)
	}
}

// chunks runs chunks of job g on worker w until none is left, and wakes
// the caller when it finishes the job's last one.
func (p *pool) chunks(w int, g uint32) {
	for {
		c, nc, ok := p.take(g)
		if !ok {
			return
		}
		lo, hi := p.span(c, nc)
		if lo < hi {
			if p.fnw != nil {
				p.fnw(w, lo, hi)
			} else {
				p.fn(lo, hi)
			}
		}
		if p.left.Add(-1) == 0 && w != 0 && p.waiting.Load() {
			select {
			case p.done <- struct{}{}:
			default:
			}
		}
	}
}

// take claims the next chunk of job g: its index and the job's chunk
// count, false when the job has none left (or is no longer the current
// one).
func (p *pool) take(g uint32) (c, nc int, ok bool) {
	for {
		j := p.job.Load()
		if uint32(j>>32) != g {
			return 0, 0, false
		}
		c, nc = int(j&0xffff), int(j>>16&0xffff)
		if c >= nc {
			return 0, 0, false
		}
		if p.job.CompareAndSwap(j, j+1) {
			return c, nc, true
		}
	}
}

// await returns the next job number after seen, polling first and then
// parking; false when the pool is closed.
func (p *pool) await(i int, seen uint32) (uint32, bool) {
	for {
		for s := 1; s <= p.workerPolls; s++ {
			if g := uint32(p.job.Load() >> 32); g != seen {
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
		if g := uint32(p.job.Load() >> 32); g != seen {
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

// span is chunk c of nc of [0, total), in multiples of grain.
func (p *pool) span(c, nc int) (int, int) {
	units := (p.total + p.grain - 1) / p.grain
	lo := units * c / nc * p.grain
	hi := units * (c + 1) / nc * p.grain
	return min(lo, p.total), min(hi, p.total)
}

// run calls fn over [0, total) split into contiguous chunks, multiples of
// grain, which the workers take as they come free, and returns when all
// are done. Small ranges run on the calling goroutine alone. Which worker
// runs which rows changes from job to job: the work of one index must not
// depend on the split.
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
	units := (total + grain - 1) / grain
	nc := min(units, p.n*chunksPerWorker, maxChunks)
	p.fn, p.fnw, p.total, p.grain = fn, fnw, total, grain
	p.left.Store(int32(nc))
	g := uint32(p.job.Load()>>32) + 1
	p.job.Store(uint64(g)<<32 | uint64(nc)<<16)
	for i := 1; i < p.n; i++ {
		if p.sleep[i].Load() {
			select {
			case p.wake[i] <- struct{}{}:
			default:
			}
		}
	}
	p.chunks(0, g)
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

// wait returns when every chunk of the current job is finished: polling,
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
