package appliance

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"
)

// Models are the models besides a core's own that its requests may name
// (Request.Model): geist serve's stored models, each answered by a core
// of its own, loaded on demand. The core hands such a request to that
// model's core: Submit returns at once, and the load runs on a goroutine
// of the request's own, so that the front end (an MQTT handler, a
// Wyoming connection) never waits on a load, and a request for a loaded
// model never waits on the load of another.
type Models interface {
	// Other says whether name names a model other than the core's own
	// (false: the core answers). It does not load anything; its error
	// (an *Error) refuses a name no stored model has.
	Other(name string) (bool, error)
	// Acquire returns the core answering for name, loading its model
	// when it is not loaded (on the calling goroutine, until ctx ends),
	// and release, to be called once the request is answered (a model is
	// never unloaded while a request uses it). Its error is an *Error or
	// is reported as internal.
	Acquire(ctx context.Context, name string) (*Core, func(), error)
}

// CanonicalModel is a client's model name as compared: trimmed, without
// the tag ":latest" (Ollama's default tag), lower case.
func CanonicalModel(name string) string {
	return strings.ToLower(strings.TrimSuffix(strings.TrimSpace(name), ":latest"))
}

// routed says whether r names a model other than the core's and hands
// it to that model's core (the ticket then follows it there), or refuses
// it when the core has no other models.
func (c *Core) routed(ctx context.Context, r *Request, sink Sink) (*Ticket, *Error, bool) {
	if r.Model == "" {
		return nil, nil, false
	}
	if c.cfg.Models == nil {
		if CanonicalModel(r.Model) == CanonicalModel(c.cfg.Model) {
			r.Model = ""
			return nil, nil, false
		}
		return nil, errorf(CodeBadRequest, "model %q: geist serves %s only here", r.Model, c.cfg.Model), true
	}
	other, err := c.cfg.Models.Other(r.Model)
	if err != nil {
		return nil, asError(err), true
	}
	if !other {
		r.Model = ""
		return nil, nil, false
	}
	return c.forward(ctx, *r, sink)
}

// asError is err as the core's *Error (internal when it is another).
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return errorf(CodeInternal, "%v", err)
}

// forward hands r to the core of the model it names: at once a ticket,
// whose outcome is the other core's (or the load's error). Cancel(r.ID)
// and the end of ctx cancel it, while the model loads or the other core
// answers; so does the end of this core's work at shutdown.
func (c *Core) forward(ctx context.Context, r Request, sink Sink) (*Ticket, *Error, bool) {
	if r.ID == "" {
		r.ID, r.Generated = NewID(), true
	}
	name := r.Model
	r.Model = ""
	t := newTicket(&r)
	fctx, cancel := context.WithCancelCause(c.workCtx)
	stop := context.AfterFunc(ctx, func() { cancel(errCancelled) })
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		stop()
		cancel(nil)
		return nil, errorf(CodeBusy, "%v", errShutdown), true
	}
	if c.forwarded == nil {
		c.forwarded = map[string]context.CancelCauseFunc{}
	}
	if _, dup := c.forwarded[r.ID]; dup && !r.Generated {
		c.mu.Unlock()
		stop()
		cancel(nil)
		return nil, &Error{Code: CodeDuplicate, Message: "request " + r.ID + " is already queued", State: "queued"}, true
	}
	c.forwarded[r.ID] = cancel
	c.mu.Unlock()
	c.log.Debug("request handed to another model", "id", r.ID, "model", name, "source", r.Source)
	go func() {
		defer func() {
			stop()
			cancel(nil)
			c.mu.Lock()
			delete(c.forwarded, r.ID)
			c.mu.Unlock()
		}()
		fail := func(e *Error) { t.complete(Outcome{ID: r.ID, Source: r.Source, Session: r.Session, Err: e}) }
		other, release, err := c.cfg.Models.Acquire(fctx, name)
		if err != nil {
			// No other core saw the request: this one counts it.
			e := asError(err)
			if fctx.Err() != nil {
				e = errorf(CodeCancelled, "cancelled while model %s loaded", name)
			} else {
				c.log.Info("request for another model refused", "id", r.ID, "model", name, "err", err)
			}
			c.count(r.Source, string(e.Code))
			fail(e)
			return
		}
		defer release()
		ot, err := other.Submit(fctx, r, sink)
		if err != nil {
			fail(asError(err))
			return
		}
		select {
		case <-ot.Done():
		case <-fctx.Done():
			other.Cancel(r.ID)
		}
		t.complete(ot.Outcome())
	}()
	return t, nil, true
}

// cancelForwarded cancels the request id handed to another model.
func (c *Core) cancelForwarded(id string) bool {
	c.mu.Lock()
	cancel, ok := c.forwarded[id]
	c.mu.Unlock()
	if ok {
		c.log.Info("request for another model cancelled", "id", id)
		cancel(errCancelled)
	}
	return ok
}

// maxModelName bounds a model name a client sends.
const maxModelName = 256

// CheckModelName checks a client's model name (Request.Model) before it
// is looked up: at most 256 bytes of printable characters, no spaces.
func CheckModelName(field, s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return errorf(CodeBadRequest, "%s is empty: name a stored model (geist list), or leave it out for the model geist started with", field)
	case len(s) > maxModelName:
		return errorf(CodeBadRequest, "%s is longer than %d bytes", field, maxModelName)
	case strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f || r == utf8.RuneError }) >= 0:
		return errorf(CodeBadRequest, "%s %.64q has spaces or control characters", field, s)
	}
	return nil
}
