package appliance

import (
	"container/list"
	"time"
)

// Dedup configures request-id deduplication; zero values take the
// defaults noted.
type Dedup struct {
	Size     int           // ids remembered (4096)
	TTL      time.Duration // how long a finished request's outcome is kept (10 min)
	MaxBytes int           // bytes of stored answers (4 MiB; beyond, the oldest are dropped)
}

func (d *Dedup) defaults() {
	if d.Size <= 0 {
		d.Size = 4096
	}
	if d.TTL <= 0 {
		d.TTL = 10 * time.Minute
	}
	if d.MaxBytes <= 0 {
		d.MaxBytes = 4 << 20
	}
}

// seen remembers client ids: the job of a request still queued or
// running, then its outcome for TTL. A request refused without work (bad
// request, too long, busy) leaves no trace, so it can be retried at once
// with the same id. It holds at most Size ids and MaxBytes of answers,
// oldest first out; the caller locks.
type seen struct {
	cfg   Dedup
	order *list.List // of *seenEntry, oldest at the front
	byID  map[string]*list.Element
	bytes int
}

type seenEntry struct {
	id  string
	job *job     // set while queued or running
	out *Outcome // set when finished
	at  time.Time
}

func newSeen(cfg Dedup) *seen {
	return &seen{cfg: cfg, order: list.New(), byID: map[string]*list.Element{}}
}

func entrySize(o *Outcome) int {
	if o == nil {
		return 0
	}
	n := len(o.Text) + len(o.Thinking) + len(o.ID) + 64
	for _, c := range o.Calls {
		n += len(c.ID) + len(c.Name) + len(c.Arguments) + 32
	}
	return n
}

// expire drops finished entries older than TTL and the oldest beyond the
// bounds; entries of jobs in flight stay (the queue bounds them).
func (s *seen) expire(now time.Time) {
	for e := s.order.Front(); e != nil; {
		next := e.Next()
		if en := e.Value.(*seenEntry); en.job == nil {
			if now.Sub(en.at) < s.cfg.TTL && s.order.Len() <= s.cfg.Size && s.bytes <= s.cfg.MaxBytes {
				break // the rest are younger
			}
			s.remove(e)
		}
		e = next
	}
}

func (s *seen) remove(e *list.Element) {
	en := e.Value.(*seenEntry)
	s.bytes -= entrySize(en.out)
	s.order.Remove(e)
	delete(s.byID, en.id)
}

// lookup returns the entry for id, if any.
func (s *seen) lookup(id string, now time.Time) *seenEntry {
	s.expire(now)
	if e, ok := s.byID[id]; ok {
		return e.Value.(*seenEntry)
	}
	return nil
}

// reserve records id for j.
func (s *seen) reserve(id string, j *job, now time.Time) {
	s.byID[id] = s.order.PushBack(&seenEntry{id: id, job: j, at: now})
}

// finish stores the outcome of id's job, or forgets id when the job was
// refused without work.
func (s *seen) finish(id string, o *Outcome, now time.Time) {
	e, ok := s.byID[id]
	if !ok {
		return
	}
	if o.Err != nil && refusal(o.Err.Code) {
		s.remove(e)
		return
	}
	en := e.Value.(*seenEntry)
	en.job, en.out, en.at = nil, o, now
	s.bytes += entrySize(o)
	s.order.MoveToBack(e)
	s.expire(now)
}
