package appliance

import (
	"context"
	"slices"

	"github.com/geisten/geist/engine/chat"
)

// dashboardKey is the setting holding the dashboard conversation's
// number, so that a restart does not bring an old conversation back.
const dashboardKey = "dashboard"

// maxForgetPrefixes bounds the user turns whose prompt-cache entries a
// deleted conversation drops (the newest): one render and tokenization
// each.
const maxForgetPrefixes = 256

// DeleteSession deletes conversation id and what the prompt cache keeps
// of it, on the worker after the work already queued (a request queued
// before still sees the history), and returns when that is done. Use it
// rather than deleting from the session store directly while the core
// runs.
func (c *Core) DeleteSession(ctx context.Context, id string) error {
	if err := CheckID("session", id); err != nil {
		return err
	}
	done := make(chan error, 1)
	if !c.control(func() { done <- c.forget(id) }) {
		return errorf(CodeBusy, "%v", errShutdown)
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// forget drops session's prompt-cache entries, then the session. It runs
// on the worker: the engine renders and tokenizes for it.
func (c *Core) forget(session string) error {
	c.dropCached(session)
	return c.sessions.Forget(session)
}

// dropCached deletes the prompt-cache entries of session's prompts: each
// prompt begins with the system message and one of the conversation's
// user turns (the first, or a later one once older history is left out).
// Entries of prompts with a system message of the request's own are not
// found; the cache's budget ages them out.
func (c *Core) dropCached(session string) {
	if c.cfg.Storage == nil {
		return
	}
	drop, eng := c.cfg.Storage.Cache, c.cfg.Engine
	if drop == nil {
		return
	}
	msgs, err := c.sessions.Turns(session)
	if err != nil || len(msgs) == 0 {
		return
	}
	var users []string
	for i := len(msgs) - 1; i >= 0 && len(users) < maxForgetPrefixes; i-- {
		if m := msgs[i]; m.Role == "user" && !slices.Contains(users, m.Content) {
			users = append(users, m.Content)
		}
	}
	var prefixes [][]int32
	for _, u := range users {
		cm := make([]chat.Message, 0, 2)
		if c.cfg.System != "" {
			cm = append(cm, chat.Message{Role: "system", Content: c.cfg.System})
		}
		p, err := eng.ConversationPrefix(append(cm, chat.Message{Role: "user", Content: u}))
		if err == nil && len(p) > 0 {
			prefixes = append(prefixes, p)
		}
	}
	n, err := drop.DeletePrefix(eng.ModelID(), prefixes...)
	if err != nil {
		c.log.Warn("dropping the conversation's prompt-cache entries failed", "session", session, "err", err)
		return
	}
	c.log.Info("prompt-cache entries of the conversation dropped", "session", session, "entries", n, "turns", len(prefixes))
}

// storedDashboard is the dashboard conversation's number kept by the
// session store (0 without one).
func (c *Core) storedDashboard() int {
	n, err := c.sessions.Counter(dashboardKey)
	if err != nil {
		c.log.Warn("reading the dashboard conversation's number", "err", err)
	}
	return n
}

// nextDashboard starts a new dashboard conversation and returns its
// number, kept across restarts when the store can.
func (c *Core) nextDashboard() int {
	n, err := c.sessions.Increment(dashboardKey)
	if err == nil {
		c.mu.Lock()
		c.dashboard = max(c.dashboard, n)
		c.mu.Unlock()
		return n
	}
	c.log.Warn("saving the dashboard conversation's number failed; it counts on in memory", "err", err)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dashboard++
	return c.dashboard
}
