package mqtt

import (
	"container/list"
	"sync"
	"time"
)

// seenSet remembers request ids for a while so that a QoS 1 redelivery (or
// a client retrying) is not answered twice. It holds at most max ids and
// forgets each after ttl, oldest first.
type seenSet struct {
	mu    sync.Mutex
	max   int
	ttl   time.Duration
	order *list.List // of seenEntry, oldest at the front
	byID  map[string]*list.Element
}

type seenEntry struct {
	id string
	at time.Time
}

func newSeenSet(max int, ttl time.Duration) *seenSet {
	return &seenSet{max: max, ttl: ttl, order: list.New(), byID: make(map[string]*list.Element)}
}

// add records id and reports whether it is new (not seen within the ttl).
func (s *seenSet) add(id string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for e := s.order.Front(); e != nil; e = s.order.Front() {
		en := e.Value.(seenEntry)
		if now.Sub(en.at) < s.ttl && s.order.Len() < s.max {
			break
		}
		s.order.Remove(e)
		delete(s.byID, en.id)
	}
	if _, ok := s.byID[id]; ok {
		return false
	}
	s.byID[id] = s.order.PushBack(seenEntry{id, now})
	return true
}

func (s *seenSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len()
}
