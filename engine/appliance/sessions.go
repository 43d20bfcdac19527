package appliance

import (
	"container/list"
	"slices"
	"sync"
	"time"
)

// SessionStore keeps conversations. The core loads a session's history
// before it generates and appends the exchange after; it calls Forget for
// a new conversation. MemorySessions and the daemon's store over
// sessions.db (cmd/internal/daemon.OpenStorage) implement it; methods
// must be safe for concurrent use. Errors a client should hear about in
// words (a full disk, a damaged file) wrap ErrStoreFull, ErrStoreWrite or
// ErrStoreCorrupt.
//
// A conversation's system message, when it has one of its own, is the
// first message Load returns (role "system"), and an Append whose
// messages include one replaces it: it is not a turn.
type SessionStore interface {
	// Load returns the history of session id as a request renders it
	// (nil when unknown): the newest turns within the store's bounds
	// (maxHistory messages, MaxHistoryBytes of text).
	Load(id string) ([]Message, error)
	// Turns returns every stored message of session id, not only the
	// history a request reads (deleting it drops the prompt-cache
	// entries of all of them).
	Turns(id string) ([]Message, error)
	// Append adds messages to the end of session id's history, creating
	// the session.
	Append(id string, msgs ...Message) error
	// Forget drops session id (no error when unknown).
	Forget(id string) error
	// List describes every session, most recently updated first.
	List() ([]SessionInfo, error)
	// Count returns the number of sessions, cheaply (State.Sessions).
	Count() int
	// Counter returns the counter key (0 when unset); Increment adds one
	// and returns the new value. sessions.db keeps them across restarts
	// (the dashboard conversation's number).
	Counter(key string) (int, error)
	Increment(key string) (int, error)
}

// SessionInfo describes a stored conversation.
type SessionInfo struct {
	ID       string
	Messages int
	Updated  time.Time
}

// MemorySessions is a SessionStore in memory: at most maxSessions
// sessions (the least recently used goes first), each trimmed to its last
// maxHistory messages (0: none are kept), of which Load reads those
// within MaxHistoryBytes, as from sessions.db.
type MemorySessions struct {
	mu          sync.Mutex
	maxSessions int
	maxHistory  int
	order       *list.List // of *memSession, most recent at the front
	byID        map[string]*list.Element
	counters    map[string]int
}

type memSession struct {
	id      string
	system  string
	msgs    []Message
	updated time.Time
}

// NewMemorySessions returns an empty MemorySessions.
func NewMemorySessions(maxSessions, maxHistory int) *MemorySessions {
	return &MemorySessions{maxSessions: max(maxSessions, 1), maxHistory: max(maxHistory, 0), order: list.New(), byID: map[string]*list.Element{}, counters: map[string]int{}}
}

// Load implements SessionStore.
func (m *MemorySessions) Load(id string) ([]Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.byID[id]
	if !ok {
		return nil, nil
	}
	m.order.MoveToFront(e)
	s := e.Value.(*memSession)
	return WithSystem(s.system, slices.Clone(newest(s.msgs, MaxHistoryBytes))), nil
}

// newest is the newest of msgs whose text is within maxBytes (the
// newest one always), as sessions.db's Recent reads them.
func newest(msgs []Message, maxBytes int) []Message {
	size := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if size += len(msgs[i].Content); size > maxBytes && i < len(msgs)-1 {
			return msgs[i+1:]
		}
	}
	return msgs
}

// Turns implements SessionStore: a session in memory keeps its history
// only.
func (m *MemorySessions) Turns(id string) ([]Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.byID[id]
	if !ok {
		return nil, nil
	}
	s := e.Value.(*memSession)
	return WithSystem(s.system, slices.Clone(s.msgs)), nil
}

// MaxHistoryBytes bounds the history text a request reads (every
// conversation path: serve, chat, run --session): more than any context
// the board runs holds (128K tokens are about 512 KiB), so the newest
// turns that fit are all there, and a conversation of 50,000 turns costs
// what a short one does. A SessionStore's Load keeps to it.
const MaxHistoryBytes = 1 << 20

// WithSystem is msgs after the conversation's system message, if any (a
// SessionStore's Load returns this).
func WithSystem(system string, msgs []Message) []Message {
	if system == "" {
		return msgs
	}
	return append([]Message{{Role: "system", Content: system}}, msgs...)
}

// SplitSystem takes the system message out of msgs (set: there was one;
// the last counts): a SessionStore's Append keeps it apart from the
// turns.
func SplitSystem(msgs []Message) (system string, set bool, turns []Message) {
	turns = make([]Message, 0, len(msgs))
	for _, m := range msgs {
		if m.Role == "system" {
			system, set = m.Content, true
			continue
		}
		turns = append(turns, m)
	}
	return system, set, turns
}

// Append implements SessionStore.
func (m *MemorySessions) Append(id string, msgs ...Message) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.byID[id]
	if !ok {
		e = m.order.PushFront(&memSession{id: id})
		m.byID[id] = e
		for m.order.Len() > m.maxSessions {
			old := m.order.Back()
			m.order.Remove(old)
			delete(m.byID, old.Value.(*memSession).id)
		}
	}
	m.order.MoveToFront(e)
	s := e.Value.(*memSession)
	system, set, msgs := SplitSystem(msgs)
	if set {
		s.system = system
	}
	s.msgs = append(s.msgs, msgs...)
	if n := len(s.msgs) - m.maxHistory; n > 0 {
		s.msgs = append(s.msgs[:0], s.msgs[n:]...)
	}
	s.updated = time.Now()
	return nil
}

// Forget implements SessionStore.
func (m *MemorySessions) Forget(id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.byID[id]; ok {
		m.order.Remove(e)
		delete(m.byID, id)
	}
	return nil
}

// List implements SessionStore.
func (m *MemorySessions) List() ([]SessionInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []SessionInfo
	for e := m.order.Front(); e != nil; e = e.Next() {
		s := e.Value.(*memSession)
		out = append(out, SessionInfo{ID: s.id, Messages: len(s.msgs), Updated: s.updated})
	}
	slices.SortStableFunc(out, func(a, b SessionInfo) int { return b.Updated.Compare(a.Updated) })
	return out, nil
}

// Count returns the number of sessions held (State.Sessions).
func (m *MemorySessions) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.byID)
}

// Counter implements SessionStore.
func (m *MemorySessions) Counter(key string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counters[key], nil
}

// Increment implements SessionStore.
func (m *MemorySessions) Increment(key string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.counters[key]++
	return m.counters[key], nil
}
