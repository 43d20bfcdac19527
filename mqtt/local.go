package mqtt

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// In-process requests: buttons, push-to-talk and voice bridges of the
// daemon ask through the same queue and the same single worker as MQTT
// requests, because the engine behind the Generator is not safe for
// concurrent use.

// Outcome is how a submitted request ended: the answer, or a contract
// error (busy, cancelled, timeout, too_long, internal).
type Outcome struct {
	Result Result
	Err    *Error // nil on success
}

// localJob is the in-process side of a job.
type localJob struct {
	onDelta func(string)
	publish bool
	out     chan Outcome // buffered: one Outcome, then closed
	once    sync.Once
	stop    func() bool // stops watching the caller's context
}

func (l *localJob) deliver(res *Result, e *Error) {
	l.once.Do(func() {
		if l.stop != nil {
			l.stop()
		}
		o := Outcome{Err: e}
		if res != nil {
			o.Result = *res
		}
		l.out <- o
		close(l.out)
	})
}

// Forgetter is implemented by Generators that keep session histories:
// Forget drops the history of session. NewConversation calls it on the
// worker, so it never runs during a generation.
type Forgetter interface {
	Forget(session string) error
}

// Submit queues req like a request that arrived over MQTT (same queue,
// same limits, same single worker) and returns at once. onDelta (may be
// nil) receives the answer's text as it is generated, on the worker. With
// publish, the answer or error is also published like that of an MQTT
// request: on req.ReplyTo or geist/<dev>/answer (without an id), the last
// answer sensor and the answer event.
//
// Unset fields take the request defaults: a generated ID, Limits.MaxTokens
// (also the cap), Limits.DefaultTTL. A request that cannot be queued (bad
// request, queue full, shutting down) is refused with an *Error and no
// channel. Otherwise the channel delivers exactly one Outcome and is then
// closed. Ending ctx cancels the request: removed from the queue when
// still waiting (Outcome cancelled at once), cancelled when running.
func (s *Service) Submit(ctx context.Context, req Request, onDelta func(string), publish bool) (<-chan Outcome, error) {
	now := time.Now()
	if e := s.checkLocal(&req, now); e != nil {
		return nil, e
	}
	j := s.newJob(req, now)
	l := &localJob{onDelta: onDelta, publish: publish, out: make(chan Outcome, 1)}
	j.local = l
	s.mu.Lock()
	switch {
	case s.closing:
		s.mu.Unlock()
		j.cancel(errShutdown)
		s.stats.refused.Add(1)
		return nil, errorf(CodeBusy, "%v", errShutdown)
	case s.waitingLocked() >= s.cfg.QueueLen:
		n := s.waitingLocked()
		s.mu.Unlock()
		j.cancel(errCancelled)
		s.stats.refused.Add(1)
		return nil, errorf(CodeBusy, "queue full (%d waiting)", n)
	}
	// Under mu, so that deliver (which stops it) cannot run before it is set.
	l.stop = context.AfterFunc(ctx, func() { s.withdraw(j) })
	s.queue = append(s.queue, j)
	s.mu.Unlock()
	s.log.Debug("local request queued", "id", req.ID, "session", req.Session)
	select {
	case s.wake <- struct{}{}:
	default:
	}
	s.markDirty()
	return l.out, nil
}

// checkLocal validates an in-process request and fills in its defaults.
func (s *Service) checkLocal(r *Request, now time.Time) *Error {
	lim := s.cfg.Limits
	if r.ID == "" {
		r.ID, r.Generated = NewID(), true
	} else if e := checkID("id", r.ID); e != nil {
		return e
	}
	if r.ReplyTo != "" {
		if e := checkTopic(r.ReplyTo); e != nil {
			return e
		}
	}
	if r.Session != "" {
		if e := checkID("session", r.Session); e != nil {
			return e
		}
	}
	switch {
	case len(r.Messages) > 0:
		if r.Text != "" {
			return errorf(CodeBadRequest, "give either text or messages, not both")
		}
		for i, m := range r.Messages {
			if !utf8.ValidString(m.Content) {
				return errorf(CodeBadRequest, "messages[%d].content is not valid UTF-8", i)
			}
		}
	case strings.TrimSpace(r.Text) == "":
		return errorf(CodeBadRequest, "empty text")
	case !utf8.ValidString(r.Text):
		return errorf(CodeBadRequest, "text is not valid UTF-8")
	}
	if r.MaxTokens <= 0 || r.MaxTokens > lim.MaxTokens {
		r.MaxTokens = lim.MaxTokens
	}
	if r.TTL <= 0 {
		r.TTL = lim.DefaultTTL
	}
	r.Received = now
	return nil
}

// withdraw ends j because its submitter's context ended: a queued job is
// taken out and answered cancelled at once, a running one is cancelled.
func (s *Service) withdraw(j *job) {
	s.mu.Lock()
	queued := false
	for i, q := range s.queue {
		if q == j {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			queued = true
			break
		}
	}
	running := s.running == j
	s.mu.Unlock()
	switch {
	case queued:
		j.cancel(errCancelled)
		s.log.Info("queued local request withdrawn", "id", j.req.ID)
		s.reply(j, nil, errorf(CodeCancelled, "cancelled while queued"))
		s.markDirty()
	case running:
		j.cancel(errCancelled)
	}
}

// CancelRunning cancels the running request, whichever way it came (MQTT
// or Submit); queued requests stay queued. It reports whether one ran.
func (s *Service) CancelRunning() bool {
	s.mu.Lock()
	j := s.running
	s.mu.Unlock()
	if j == nil {
		return false
	}
	s.log.Info("running request cancelled", "id", j.req.ID)
	j.cancel(errCancelled)
	return true
}

// DefaultSession is the conversation of the Home Assistant dashboard
// ("dashboard-N"), which in-process askers such as buttons share when
// they name no session of their own.
func (s *Service) DefaultSession() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return dashboardSession(s.dashboard)
}

// NewConversation starts a new conversation. With an empty session it is
// the dashboard's (DefaultSession changes at once, as with Home
// Assistant's new-conversation button); otherwise the named session's
// history is forgotten through the Generator (when it is a Forgetter), on
// the worker after the work already queued.
func (s *Service) NewConversation(session string) {
	if session == "" {
		s.mu.Lock()
		s.dashboard++
		d := s.dashboard
		s.mu.Unlock()
		s.log.Info("new dashboard conversation", "session", dashboardSession(d))
		s.markDirty()
		return
	}
	f, ok := s.gen.(Forgetter)
	if !ok {
		s.log.Warn("new conversation: the generator keeps no sessions", "session", session)
		return
	}
	j := &job{req: Request{Session: session}, do: func() {
		if err := f.Forget(session); err != nil {
			s.log.Error("new conversation", "session", session, "err", err)
			return
		}
		s.log.Info("new conversation", "session", session)
	}}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return
	}
	s.queue = append(s.queue, j) // control work is not bound by QueueLen
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Publish sends payload on topic without waiting for the broker (for
// events such as button presses); nothing happens offline or while
// disconnected.
func (s *Service) Publish(topic string, qos byte, retain bool, payload []byte) {
	if s.offline || !s.connected.Load() {
		return
	}
	s.client.Publish(topic, qos, retain, payload)
}

func dashboardSession(n int) string { return "dashboard-" + strconv.Itoa(n) }

// waitingLocked counts the queued requests (not control work); s.mu held.
func (s *Service) waitingLocked() int {
	n := 0
	for _, j := range s.queue {
		if j.do == nil {
			n++
		}
	}
	return n
}
