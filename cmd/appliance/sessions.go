package appliance

import (
	"container/list"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/geisten/geist/storage"
)

// SessionStore keeps conversations. The core loads a session's history
// before it generates and appends the exchange after; it calls Forget for
// a new conversation. MemorySessions and the store of OpenStorage
// implement it; methods must be safe for concurrent use.
type SessionStore interface {
	// Load returns the history of session id (nil when unknown).
	Load(id string) ([]Message, error)
	// Append adds messages to the end of session id's history, creating
	// the session.
	Append(id string, msgs ...Message) error
	// Forget drops session id (no error when unknown).
	Forget(id string) error
	// List describes every session, most recently updated first.
	List() ([]SessionInfo, error)
}

// SessionInfo describes a stored conversation.
type SessionInfo struct {
	ID       string
	Messages int
	Updated  time.Time
}

// MemorySessions is a SessionStore in memory: at most maxSessions
// sessions (the least recently used goes first), each trimmed to its last
// maxHistory messages (0: none are kept).
type MemorySessions struct {
	mu          sync.Mutex
	maxSessions int
	maxHistory  int
	order       *list.List // of *memSession, most recent at the front
	byID        map[string]*list.Element
}

type memSession struct {
	id      string
	msgs    []Message
	updated time.Time
}

// NewMemorySessions returns an empty MemorySessions.
func NewMemorySessions(maxSessions, maxHistory int) *MemorySessions {
	return &MemorySessions{maxSessions: max(maxSessions, 1), maxHistory: max(maxHistory, 0), order: list.New(), byID: map[string]*list.Element{}}
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
	return slices.Clone(e.Value.(*memSession).msgs), nil
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

// sessionCounter is a SessionStore that can count its sessions cheaply.
type sessionCounter interface{ Count() int }

// dbSessions is the durable SessionStore: conversations in sessions.db,
// so an unplugged appliance remembers them. Every Append has committed
// (and fsynced) when it returns.
type dbSessions struct {
	db         *storage.Sessions
	model      string
	maxHistory int
}

// maxHistoryBytes bounds the history text a request reads back: more
// than any context geist runs takes.
const maxHistoryBytes = 1 << 20

// Load implements SessionStore: it reads only the newest maxHistory
// turns (and at most maxHistoryBytes of them), however long the
// conversation.
func (d *dbSessions) Load(id string) ([]Message, error) {
	if d.maxHistory <= 0 {
		return nil, nil
	}
	_, turns, err := d.db.Recent(id, d.maxHistory, maxHistoryBytes)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return messagesOf(turns), nil
}

// messagesOf is stored turns as messages.
func messagesOf(turns []storage.Turn) []Message {
	msgs := make([]Message, len(turns))
	for i, t := range turns {
		msgs[i] = Message{Role: t.Role, Content: t.Text}
	}
	return msgs
}

// Append implements SessionStore.
func (d *dbSessions) Append(id string, msgs ...Message) error {
	if _, err := d.db.Info(id); errors.Is(err, storage.ErrNotFound) {
		if _, err := d.db.Create(storage.Conversation{ID: id, Model: d.model}); err != nil && !errors.Is(err, storage.ErrExists) {
			return err
		}
	} else if err != nil {
		return err
	}
	turns := make([]storage.Turn, len(msgs))
	for i, m := range msgs {
		turns[i] = storage.Turn{Role: m.Role, Text: m.Content}
	}
	_, err := d.db.Append(id, turns...)
	return err
}

// Forget implements SessionStore: it deletes the conversation.
func (d *dbSessions) Forget(id string) error {
	if err := d.db.Delete(id); err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	return nil
}

// List implements SessionStore.
func (d *dbSessions) List() ([]SessionInfo, error) {
	list, err := d.db.List()
	if err != nil {
		return nil, err
	}
	out := make([]SessionInfo, len(list))
	for i, c := range list {
		out[i] = SessionInfo{ID: c.ID, Messages: c.Turns, Updated: c.Updated}
	}
	slices.SortStableFunc(out, func(a, b SessionInfo) int { return b.Updated.Compare(a.Updated) })
	return out, nil
}

// Count returns the number of stored conversations (State.Sessions).
func (d *dbSessions) Count() int {
	n, _ := d.db.Usage()
	return n
}

func (d *dbSessions) Close() error { return d.db.Close() }

// storageProblem says what went wrong with a session store in words safe
// for any client: the error itself names files.
func storageProblem(err error) string {
	switch {
	case errors.Is(err, storage.ErrDiskFull):
		return "the device's disk is full"
	case errors.Is(err, storage.ErrWrite):
		return "the device's storage cannot be written"
	case errors.Is(err, storage.ErrCorrupt):
		return "the sessions database is damaged"
	}
	return "a storage error (details in the device's log)"
}
