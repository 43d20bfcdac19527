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
//
// A conversation's system message, when it has one of its own, is the
// first message Load returns (role "system"), and an Append whose
// messages include one replaces it: it is not a turn.
type SessionStore interface {
	// Load returns the history of session id as a request renders it
	// (nil when unknown): the newest turns within the store's bounds
	// (maxHistory messages, maxHistoryBytes of text).
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
// within maxHistoryBytes, as from sessions.db.
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
	return withSystem(s.system, slices.Clone(newest(s.msgs, maxHistoryBytes))), nil
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
	return withSystem(s.system, slices.Clone(s.msgs)), nil
}

// withSystem is msgs after the conversation's system message, if any.
func withSystem(system string, msgs []Message) []Message {
	if system == "" {
		return msgs
	}
	return append([]Message{{Role: "system", Content: system}}, msgs...)
}

// splitSystem takes the system message out of msgs (set: there was one;
// the last counts).
func splitSystem(msgs []Message) (system string, set bool, turns []Message) {
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
	system, set, msgs := splitSystem(msgs)
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

// dbSessions is the durable SessionStore: conversations in sessions.db,
// so an unplugged appliance remembers them. Every Append has committed
// (and fsynced) when it returns.
type dbSessions struct {
	db         *storage.Sessions
	model      string
	maxHistory int
}

// maxHistoryBytes bounds the history text a request reads (every
// conversation path: serve, chat, run --session): more than any context
// the board runs holds (128K tokens are about 512 KiB), so the newest
// turns that fit are all there, and a conversation of 50,000 turns costs
// what a short one does.
const maxHistoryBytes = 1 << 20

// Load implements SessionStore: it reads only the newest maxHistory
// turns (and at most maxHistoryBytes of them), however long the
// conversation.
func (d *dbSessions) Load(id string) ([]Message, error) {
	if d.maxHistory <= 0 {
		return nil, nil
	}
	c, turns, err := d.db.Recent(id, d.maxHistory, maxHistoryBytes)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return withSystem(c.System, messagesOf(turns)), nil
}

// Turns implements SessionStore.
func (d *dbSessions) Turns(id string) ([]Message, error) {
	c, turns, err := d.db.Get(id)
	if err != nil {
		return nil, err
	}
	return withSystem(c.System, messagesOf(turns)), nil
}

// messagesOf is stored turns as messages.
func messagesOf(turns []storage.Turn) []Message {
	msgs := make([]Message, len(turns))
	for i, t := range turns {
		msgs[i] = Message{Role: t.Role, Content: t.Text, Tokens: t.Tokens}
	}
	return msgs
}

// Append implements SessionStore.
func (d *dbSessions) Append(id string, msgs ...Message) error {
	system, set, msgs := splitSystem(msgs)
	info, err := d.db.Info(id)
	if errors.Is(err, storage.ErrNotFound) {
		info, err = d.db.Create(storage.Conversation{ID: id, Model: d.model, System: system})
		if errors.Is(err, storage.ErrExists) {
			info, err = d.db.Info(id)
		}
	}
	if err != nil {
		return err
	}
	if set && system != info.System {
		if err := d.db.SetMeta(id, info.Model, system); err != nil {
			return err
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	turns := make([]storage.Turn, len(msgs))
	for i, m := range msgs {
		turns[i] = storage.Turn{Role: m.Role, Text: m.Content, Tokens: m.Tokens}
	}
	_, err = d.db.Append(id, turns...)
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
