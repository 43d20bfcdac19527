package guard

import (
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Refusals rate-limits the refusals a front end answers (and logs), per
// key (the topic the refused message came on): each key has a token
// bucket of Burst refusals refilled at PerSecond. A refusal over its
// bucket is neither answered nor logged one by one; such refusals are
// counted and reported in one log line per interval. Without it, every
// garbage message on an ask topic costs two publications and a log line.
type Refusals struct {
	perSecond rate.Limit
	burst     int
	every     time.Duration
	log       *slog.Logger

	keys      int // buckets kept (maxKeys)
	mu        sync.Mutex
	buckets   map[string]*rate.Limiter
	dropped   map[string]int64 // since the last report
	scheduled bool
	total     atomic.Int64
}

// maxKeys bounds the buckets kept: keys beyond share one.
const maxKeys = 64

// NewRefusals returns a Refusals allowing burst refusals per key at
// once and perSecond on average, reporting those it held back every
// interval to log.
func NewRefusals(perSecond float64, burst int, every time.Duration, log *slog.Logger) *Refusals {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Refusals{perSecond: rate.Limit(perSecond), burst: max(burst, 1), every: every, log: log, keys: maxKeys,
		buckets: map[string]*rate.Limiter{}, dropped: map[string]int64{}}
}

// NewAskerRefusals keeps a bucket per asker (the topic its answer goes
// to, one per request id) for up to keys askers, so that every asker
// hears its refusal up to its own rate: when the table is full it starts
// afresh (a forgotten asker may hear one more refusal), rather than
// lumping new askers into one bucket that answers almost none of them.
func NewAskerRefusals(perSecond float64, burst, keys int, every time.Duration, log *slog.Logger) *Refusals {
	r := NewRefusals(perSecond, burst, every, log)
	r.keys = -max(keys, 1)
	return r
}

// Allow reports whether a refusal of a message on key may be answered
// and logged now. When it may not, the refusal is counted for the next
// report.
func (r *Refusals) Allow(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, ok := r.buckets[key]
	if !ok {
		switch {
		case r.keys < 0 && len(r.buckets) >= -r.keys:
			clear(r.buckets)
		case r.keys > 0 && len(r.buckets) >= r.keys:
			key = "(other)"
			b = r.buckets[key]
		}
		if b == nil {
			b = rate.NewLimiter(r.perSecond, r.burst)
			r.buckets[key] = b
		}
	}
	if b.Allow() {
		return true
	}
	r.dropped[key]++
	r.total.Add(1)
	if !r.scheduled {
		r.scheduled = true
		time.AfterFunc(r.every, r.report)
	}
	return false
}

// Held returns how many refusals were held back so far.
func (r *Refusals) Held() int64 { return r.total.Load() }

func (r *Refusals) report() {
	r.mu.Lock()
	counts := r.dropped
	r.dropped = map[string]int64{}
	r.scheduled = false
	r.mu.Unlock()
	var n int64
	args := []any{}
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		n += counts[k]
		args = append(args, slog.Int64(k, counts[k]))
	}
	r.log.Warn("refusals not answered (rate limit)", "count", n, "interval", r.every, slog.Group("by_topic", args...))
}
