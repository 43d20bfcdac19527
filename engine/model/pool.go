package model

import (
	"sync"
)

// pool is a persistent set of worker goroutines that split one range of
// work (matrix rows, attention heads) between them. Dispatching allocates
// nothing: the work function is set once per call site, its parameters live
// in the State, and the workers wait on their own channels.
type pool struct {
	n     int // workers, counting the calling goroutine
	wake  []chan struct{}
	done  sync.WaitGroup
	fn    func(lo, hi int)
	total int
	grain int
	stop  chan struct{}
	once  sync.Once
}

func newPool(threads int) *pool {
	if threads < 1 {
		threads = 1
	}
	p := &pool{n: threads, stop: make(chan struct{})}
	p.wake = make([]chan struct{}, threads)
	for i := 1; i < threads; i++ {
		p.wake[i] = make(chan struct{}, 1)
		go p.worker(i)
	}
	return p
}

func (p *pool) worker(i int) {
	for {
		select {
		case <-p.wake[i]:
			lo, hi := p.span(i)
			if lo < hi {
				p.fn(lo, hi)
			}
			p.done.Done()
		case <-p.stop:
			return
		}
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
	p.done.Add(p.n - 1)
	for i := 1; i < p.n; i++ {
		p.wake[i] <- struct{}{}
	}
	lo, hi := p.span(0)
	if lo < hi {
		fn(lo, hi)
	}
	p.done.Wait()
	p.fn = nil
}

// close stops the workers.
func (p *pool) close() {
	p.once.Do(func() { close(p.stop) })
}
