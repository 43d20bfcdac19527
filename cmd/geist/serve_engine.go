package main

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/chat"
	"github.com/geisten/geist/engine/sample"
	"github.com/geisten/geist/mqtt"
	"github.com/geisten/geist/storage"
)

// SessionStore keeps the conversation history of sessions. The in-memory
// store below is the default; the storage package can provide a durable
// one with the same two methods.
type SessionStore interface {
	// Load returns the history of session id (nil when unknown).
	Load(id string) ([]chat.Message, error)
	// Append adds messages to the end of session id's history.
	Append(id string, msgs ...chat.Message) error
}

// memSessions is a SessionStore in memory: at most maxSessions sessions
// (the least recently used goes first), each trimmed to its last
// maxHistory messages.
type memSessions struct {
	mu          sync.Mutex
	maxSessions int
	maxHistory  int
	order       *list.List // of *memSession, most recent at the front
	byID        map[string]*list.Element
}

type memSession struct {
	id   string
	msgs []chat.Message
}

func newMemSessions(maxSessions, maxHistory int) *memSessions {
	return &memSessions{maxSessions: max(maxSessions, 1), maxHistory: maxHistory, order: list.New(), byID: map[string]*list.Element{}}
}

func (m *memSessions) Load(id string) ([]chat.Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.byID[id]
	if !ok {
		return nil, nil
	}
	m.order.MoveToFront(e)
	return append([]chat.Message(nil), e.Value.(*memSession).msgs...), nil
}

func (m *memSessions) Append(id string, msgs ...chat.Message) error {
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
	if n := len(s.msgs) - m.maxHistory; m.maxHistory > 0 && n > 0 {
		s.msgs = append(s.msgs[:0], s.msgs[n:]...)
	}
	if m.maxHistory == 0 {
		s.msgs = s.msgs[:0]
	}
	return nil
}

// Forget drops the history of session id.
func (m *memSessions) Forget(id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.byID[id]; ok {
		m.order.Remove(e)
		delete(m.byID, id)
	}
	return nil
}

// engineGenerator adapts an engine.Engine to mqtt.Generator. Only the
// service's one worker calls it, so it owns the engine.
type engineGenerator struct {
	eng         *engine.Engine
	sessions    SessionStore
	system      string  // default system message
	temperature float64 // default temperature
	maxPrompt   int     // most prompt tokens (< the context)
}

func newEngineGenerator(eng *engine.Engine, sessions SessionStore, cfg *serveConfig) *engineGenerator {
	maxPrompt := eng.Ctx() - 1
	if p := cfg.Limits.MaxPromptTokens; p > 0 && p < maxPrompt {
		maxPrompt = p
	}
	return &engineGenerator{eng: eng, sessions: sessions, system: cfg.Generation.System,
		temperature: cfg.Generation.Temperature, maxPrompt: maxPrompt}
}

// Forget drops the history of session (mqtt.Forgetter: a new
// conversation), when the session store can.
func (g *engineGenerator) Forget(session string) error {
	f, ok := g.sessions.(interface{ Forget(id string) error })
	if !ok {
		return errors.New("the session store cannot forget sessions")
	}
	return f.Forget(session)
}

// Generate renders the session's history and the request with the model's
// chat template, drops the oldest history turns while the prompt is too
// long, generates, and appends the turn to the session.
func (g *engineGenerator) Generate(ctx context.Context, req mqtt.Request, onDelta func(string)) (mqtt.Result, error) {
	var history []chat.Message
	if req.Session != "" {
		h, err := g.sessions.Load(req.Session)
		if err != nil {
			return mqtt.Result{}, fmt.Errorf("loading session %q: %w", req.Session, err)
		}
		history = h
	}
	var turn []chat.Message
	if len(req.Messages) > 0 {
		for _, m := range req.Messages {
			turn = append(turn, chat.Message{Role: m.Role, Content: m.Content})
		}
	} else {
		turn = []chat.Message{{Role: "user", Content: req.Text}}
	}
	system := g.system
	if req.System != "" {
		system = req.System
	}
	temp := g.temperature
	if req.Temperature != nil {
		temp = *req.Temperature
	}
	p := sample.DefaultParams()
	p.Temperature = float32(temp)
	p.Seed = uint64(time.Now().UnixNano())
	var text strings.Builder
	ereq := engine.Request{
		MaxTokens: req.MaxTokens,
		Sampling:  p,
		OnText: func(b []byte) error {
			text.Write(b)
			onDelta(string(b))
			return nil
		},
	}
	if system != "" && (len(turn) == 0 || turn[0].Role != "system") {
		ereq.Messages = append(ereq.Messages, chat.Message{Role: "system", Content: system})
	}
	ereq.Messages = append(append(ereq.Messages, history...), turn...)
	ereq.History = len(history)
	ereq.MaxPromptTokens = g.maxPrompt
	st, err := g.eng.Generate(ctx, ereq)
	if err != nil {
		if errors.Is(err, engine.ErrPromptTooLong) {
			return mqtt.Result{}, fmt.Errorf("%w: %v", mqtt.ErrTooLong, err)
		}
		return mqtt.Result{}, err
	}
	res := mqtt.Result{Text: text.String(), Usage: mqtt.Usage{
		PromptTokens: st.PromptTokens, GeneratedTokens: st.GeneratedTokens, TTFTms: st.TTFTms, TokS: st.DecodeTokS,
		Drafted: st.Drafted, Accepted: st.Accepted, CachedTokens: st.ReusedTokens,
	}}
	if req.Session != "" {
		msgs := append(turn, chat.Message{Role: "assistant", Content: res.Text})
		if err := g.sessions.Append(req.Session, msgs...); err != nil {
			return res, fmt.Errorf("saving session %q: %w", req.Session, err)
		}
	}
	return res, nil
}

// dbSessions is the durable SessionStore: conversations in sessions.db, so
// an unplugged appliance remembers them. Every Append has committed (and
// fsynced) when it returns.
type dbSessions struct {
	db         *storage.Sessions
	model      string
	maxHistory int
}

func (d *dbSessions) Load(id string) ([]chat.Message, error) {
	_, turns, err := d.db.Get(id)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if d.maxHistory > 0 && len(turns) > d.maxHistory {
		turns = turns[len(turns)-d.maxHistory:]
	}
	msgs := make([]chat.Message, len(turns))
	for i, t := range turns {
		msgs[i] = chat.Message{Role: t.Role, Content: t.Text}
	}
	return msgs, nil
}

func (d *dbSessions) Append(id string, msgs ...chat.Message) error {
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

// Forget deletes session id (a new conversation).
func (d *dbSessions) Forget(id string) error {
	if err := d.db.Delete(id); err != nil && !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	return nil
}

func (d *dbSessions) Close() error { return d.db.Close() }
