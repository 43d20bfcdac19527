// Package appliance is geist's core: every front end (MQTT, HTTP,
// Wyoming, the buttons, push-to-talk, Hermes, the command line) enters
// through it. It owns the bounded request queue and the worker that runs
// the engine, admission (bad request, too long, busy, time to live),
// cancellation, request ids and deduplication, sessions (loaded, fitted
// into the context by the engine, saved), the prompt cache wiring and
// the counters the state and metrics report. Its API is plain Go: it
// speaks no protocol and touches no network or GPIO.
//
// A front end translates its protocol into a Request, calls Submit with
// a Sink for the streamed text, and delivers the Ticket's Outcome. Watch
// reports what happens (for state publishers, LEDs, metrics); Snapshot
// returns the State.
//
// The package lives below engine, beside what it drives, so that every
// front end (mqtt, firmware, cmd/internal/httpapi, cmd/internal/wyoming)
// imports it downward, none reaching up into cmd. Like the rest of the
// engine it imports no storage: the session store and the prompt cache
// come in as interfaces (SessionStore, PromptCache, Storage), which the
// daemon fills with sessions.db and cache.db.
package appliance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/chat"
	"github.com/geisten/geist/engine/constraint"
	"github.com/geisten/geist/engine/sample"
)

// Engine generates; *engine.Engine implements it. It is not safe for
// concurrent use: the core calls it from one worker at a time.
type Engine interface {
	Generate(ctx context.Context, req engine.Request) (engine.Stats, error)
	// ModelID names the model in the prompt cache's keys;
	// ConversationPrefix is the token prefix the chat template renders
	// msgs to (deleting a conversation drops its prompt-cache entries by
	// them).
	ModelID() []byte
	ConversationPrefix(msgs []chat.Message) ([]int32, error)
}

// DefaultThink is the default thinking policy: the sources whose answers
// are spoken do not think.
func DefaultThink() map[Source]bool {
	return map[Source]bool{SourceVoice: false, SourceButton: false, SourceWyoming: false, SourceHermes: false}
}

// thinks says whether r has the model think.
func (c *Core) thinks(r *Request) bool {
	if r.Think != nil {
		return *r.Think
	}
	if on, ok := c.cfg.Think[r.Source]; ok {
		return on
	}
	return true
}

// Config configures a Core; zero values take the defaults noted.
type Config struct {
	Engine   Engine
	Sessions SessionStore // nil: in memory (64 sessions of 20 messages)
	Limits   Limits
	Dedup    Dedup
	// System is the default system message; Defaults the default
	// generation options (MaxTokens aside: Limits.MaxTokens).
	System   string
	Defaults Options
	// ShutdownGrace is how long the running request may finish once Run's
	// context ends (10 s); then it is cancelled.
	ShutdownGrace time.Duration
	Model         string // model name, reported in the State
	Version       string // geist's version, reported in the State
	// ModelLoad is how long loading the model took, reported in the
	// State (metrics).
	ModelLoad time.Duration
	// Storage, if set, reports its prompt cache in the State (it does not
	// replace Sessions); deleting a conversation deletes what its prompt
	// cache keeps of it.
	Storage *Storage
	Logger  *slog.Logger

	// Think is the thinking policy per source: whether a request that
	// does not say (Request.Think) has the model think. Sources it does
	// not name think, but voice, button, Wyoming and Hermes, which are
	// spoken and wait for no reasoning (DefaultThink).
	Think map[Source]bool

	// ToolFormat is how the model writes tool calls (its template's
	// chat.Template.ToolFormat; zero: both forms are read): the core
	// parses them out of the answers of requests offering tools.
	ToolFormat chat.ToolFormat
	// ThinkMarks are the texts around the model's thinking block (its
	// template's chat.Template.ThinkMarks; zero: <think> and </think>):
	// the core splits a leading block from the answer's content.
	ThinkMarks chat.ThinkMarks
	// NoTools says why the model cannot call tools (NoTools of its
	// template); empty: it can. Every front end's request offering tools
	// is then refused, naming the model and this reason, as Ollama
	// answers 400 "does not support tools": answering as if none were
	// sent would leave the user waiting for an action that never comes.
	NoTools string

	// RecentText keeps each finished request's question and answer (a
	// few KiB each) in Recent, for a status page allowed to show them.
	RecentText bool

	// Models, if set, answers the requests naming another model
	// (Request.Model) with that model's core; nil: a request naming a
	// model other than Model is refused.
	Models Models
}

// NoTools returns why a model with template t cannot call tools (for
// Config.NoTools), or "" when its template renders them.
func NoTools(t *chat.Template) string {
	switch {
	case t.SupportsTools():
		return ""
	case t == nil || t.Source() == chat.ChatML:
		return "it has no chat template (geist falls back to ChatML, which has no tools)"
	}
	return "its chat template cannot render tool definitions"
}

// Causes of a job's end other than success.
var (
	errCancelled = errors.New("cancelled")
	errShutdown  = errors.New("geist is shutting down")
	errTTL       = errors.New("time to live expired")
	errStalled   = errors.New("no progress")
)

// ErrStuck is Run's error when the running request did not stop once
// cancelled near the end of the shutdown grace (work in the engine that
// does not look at its context): Run gave it its outcome and returned
// without it, and the engine must not be closed under it.
var ErrStuck = errors.New("the running request did not stop when cancelled at shutdown: exiting without it")

// stuckWait is how long Run waits for the worker once the running
// request is cancelled, stuckWait before the grace ends (half the grace
// when it is shorter than two of them), and the watchdog for a
// stalled request it cancelled before it answers it in its place.
const stuckWait = time.Second

// job is a request (or control work) in the queue.
type job struct {
	req      Request
	sink     Sink
	ticket   *Ticket
	ctx      context.Context
	cancel   context.CancelCauseFunc
	unwatch  func() bool // stops watching the submitter's context
	queued   time.Time
	params   sample.Params
	con      *constraint.Compiled // the request's Constraint, compiled (nil: free)
	do       func()               // control work run on the worker, in queue order
	finished bool
	// announced is closed once EventQueued is out: the job's later events
	// wait for it, so that watchers see queued, started, finished in order.
	announced chan struct{}
	started   time.Time // when the worker took it (Core.mu)
	progress  progress  // tokens generated so far
	stalled   time.Time // when the watchdog cancelled it (Core.mu)
	behind    bool      // it queued while others ran or waited (priorities order it)
}

// Core is the appliance core. Create it with New and run it with Run.
type Core struct {
	cfg      Config
	log      *slog.Logger
	sessions SessionStore

	mu    sync.Mutex
	queue []*job
	// exclusive: requests run under its read lock, control work under
	// its write lock (several workers: control work runs alone).
	exclusive sync.RWMutex
	running   []*job
	// working are the jobs the workers run (running ones, and those a
	// watchdog answered that have not returned yet).
	working   []*job
	closing   bool
	ran       bool
	dashboard int // the dashboard conversation's number
	seen      *seen
	stats     counters
	watchers  map[int]func(Event)
	nextWatch int
	degraded  map[Part]string // SetDegraded's
	saveErr   string          // why the last session save failed ("" once one works)
	links     map[string]Link
	// forwarded are the requests handed to another model's core
	// (Request.Model), by id: their cancels.
	forwarded map[string]context.CancelCauseFunc
	// recent holds the last finished requests.
	recent recentRing

	wake     chan struct{}
	stop     chan struct{} // closed when the workers must exit
	workCtx  context.Context
	workStop context.CancelCauseFunc
	done     chan struct{} // closed when Run returned
	started  time.Time
}

// counters feed the State; Core.mu guards them.
type counters struct {
	byOutcome                                                     map[Source]map[string]int64
	served, refused, cancelled, failed, duplicates                int64
	prompt, cached, restored, generated, thinking, drafted, accep int64
	passes, treePasses                                            int64
	drafters                                                      map[string]DrafterUsage
	lastTokS                                                      float64
	lastAt                                                        time.Time // when the last answer finished
}

// New returns a Core for cfg. Requests may be submitted at once; they run
// once Run is called.
func New(cfg Config) (*Core, error) {
	if cfg.Engine == nil {
		return nil, errors.New("appliance: no engine")
	}
	cfg.Limits.defaults()
	cfg.Dedup.defaults()
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 10 * time.Second
	}
	think := DefaultThink()
	maps.Copy(think, cfg.Think)
	cfg.Think = think
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if _, err := sampling(&cfg.Defaults, &Options{}); err != nil {
		return nil, fmt.Errorf("appliance: default options: %s", err.Message)
	}
	c := &Core{
		cfg:      cfg,
		log:      cfg.Logger,
		sessions: cfg.Sessions,
		seen:     newSeen(cfg.Dedup),
		watchers: map[int]func(Event){},
		degraded: map[Part]string{},
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		started:  time.Now(),
	}
	if c.sessions == nil {
		c.sessions = NewMemorySessions(64, 20)
	}
	c.dashboard = c.storedDashboard()
	c.stats.byOutcome = map[Source]map[string]int64{}
	c.workCtx, c.workStop = context.WithCancelCause(context.Background())
	return c, nil
}

// Limits returns the limits in force (defaults filled in).
func (c *Core) Limits() Limits { return c.cfg.Limits }

// Sessions returns the session store (to list and show conversations).
func (c *Core) Sessions() SessionStore { return c.sessions }

// Done is closed when Run has returned: every request has its outcome.
func (c *Core) Done() <-chan struct{} { return c.done }

// Run runs the worker until ctx ends, then shuts down gracefully: new
// requests are refused as busy, queued ones end cancelled ("geist is
// shutting down"), the running one may finish within ShutdownGrace and
// is cancelled after it. Run returns when every request has its outcome.
func (c *Core) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.ran {
		c.mu.Unlock()
		return errors.New("appliance: Run called twice")
	}
	c.ran = true
	c.mu.Unlock()
	defer close(c.done)
	workers := make(chan struct{})
	n := 1
	if p, ok := c.cfg.Engine.(Paralleler); ok {
		n = max(p.Parallel(), 1)
	}
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.worker(c.cfg.Engine)
		}()
	}
	go func() {
		wg.Wait()
		close(workers)
	}()
	if st := c.cfg.Limits.StallTimeout; st > 0 {
		go c.watchdog(st, workers)
	}
	<-ctx.Done()
	c.log.Info("shutting down: no new requests")
	c.mu.Lock()
	c.closing = true
	queued := c.queue
	c.queue = nil
	running := len(c.running)
	c.mu.Unlock()
	c.emit(Event{Kind: EventChanged})
	for _, j := range queued {
		if j.do == nil {
			j.cancel(errShutdown)
			c.finish(j, Outcome{Err: errorf(CodeCancelled, "%v", errShutdown)})
		}
	}
	if running > 0 {
		c.log.Info("waiting for the running request", "grace", c.cfg.ShutdownGrace)
	}
	close(c.stop)
	// Work the watchdog already answered in its place (stuck, deaf to
	// its cancel) gets no grace: it would not use it.
	grace := c.cfg.ShutdownGrace
	c.mu.Lock()
	for _, j := range c.working {
		if j.finished {
			grace = 0
		}
	}
	c.mu.Unlock()
	// The running request is cancelled stuckWait before the grace ends,
	// so that work deaf to its cancel is given up within the grace (the
	// grace is what a service manager waits before it kills us).
	cancelAt, wait := grace-stuckWait, stuckWait
	if grace < 2*stuckWait {
		cancelAt = grace / 2
		wait = grace - cancelAt
	}
	var err error
	select {
	case <-workers:
	case <-time.After(cancelAt):
		c.workStop(errShutdown)
		select {
		case <-workers:
		case <-time.After(wait):
			// The running work does not look at its context: answer it
			// and go, rather than outlive the grace (the process ends).
			c.mu.Lock()
			stuck := slices.Clone(c.working)
			c.mu.Unlock()
			for _, j := range stuck {
				c.log.Error("the running request did not stop when cancelled; exiting without it", "id", j.req.ID, "source", j.req.Source)
				if j.do == nil {
					c.finish(j, Outcome{Err: errorf(CodeCancelled, "%v", errShutdown)})
				}
			}
			err = ErrStuck
		}
	}
	c.workStop(errShutdown)
	st := c.Snapshot()
	c.log.Info("stopped", "served", st.Served, "refused", st.Refused, "cancelled", st.Cancelled, "failed", st.Failed)
	return err
}

// watchdog ends a running request that makes no progress for stall (no
// token, no prefill pass): it cancels it (a timeout naming the stall),
// and when it has not stopped stuckWait later, answers it in the
// worker's place, so that its client is not left waiting; Snapshot's
// Stuck reports the worker meanwhile. It returns when the workers do,
// or Run.
func (c *Core) watchdog(stall time.Duration, workers <-chan struct{}) {
	tick := time.NewTicker(min(max(stall/8, 10*time.Millisecond), time.Second))
	defer tick.Stop()
	for {
		select {
		case <-workers:
			return
		case <-c.done: // Run left a stuck worker behind
			return
		case now := <-tick.C:
			c.watch(stall, now)
		}
	}
}

func (c *Core) watch(stall time.Duration, now time.Time) {
	var cancel, answer []*job
	c.mu.Lock()
	for _, j := range c.working {
		switch {
		case j.do != nil || j.progress.since(j.started, now) < stall: // control work has no context
		case j.stalled.IsZero():
			j.stalled = now
			cancel = append(cancel, j)
		case !j.finished && now.Sub(j.stalled) >= min(stuckWait, stall):
			answer = append(answer, j)
		}
	}
	c.mu.Unlock()
	for _, j := range cancel {
		c.log.Error("no progress: the request is stopped", "id", j.req.ID, "source", j.req.Source, "tokens", j.progress.tokens.Load(), "stall_timeout", stall)
		j.cancel(errStalled)
	}
	for _, j := range answer {
		c.log.Error("the stalled request did not stop when cancelled: it is answered, the worker is stuck (restart geist)", "id", j.req.ID, "source", j.req.Source)
		c.finish(j, Outcome{Err: c.ctxError(j)})
	}
	if len(cancel)+len(answer) > 0 {
		c.emit(Event{Kind: EventChanged})
	}
}

// Submit queues r and returns at once. sink (may be nil) receives the
// answer's text as it is generated. Ending ctx cancels the request: taken
// out of the queue (outcome cancelled at once) or cancelled while it runs.
//
// A request that cannot be queued gets an *Error and no Ticket: invalid
// (bad_request, too_long), the queue full or the core shutting down
// (busy), or its id still queued or running (duplicate, naming that
// request's State). None of these reserve the id. An id whose request
// finished within the dedup window gets a done Ticket with the stored
// outcome (Outcome.Replayed).
func (c *Core) Submit(ctx context.Context, r Request, sink Sink) (*Ticket, error) {
	now := time.Now()
	e := r.check(&c.cfg.Limits)
	if e == nil {
		// Another model's request is checked by its core.
		if t, e, ok := c.routed(ctx, &r, sink); ok {
			if e != nil {
				c.count(r.Source, string(e.Code))
				return nil, e
			}
			return t, nil
		}
	}
	if e == nil && len(r.Tools) > 0 && c.cfg.NoTools != "" {
		e = errorf(CodeBadRequest, "%s does not support tools: %s; use a model whose template renders tools (qwen2.5, qwen3 or llama3.2 from geist models catalog), or send no tools", cmp.Or(c.cfg.Model, "the model"), c.cfg.NoTools)
	}
	if e != nil {
		c.count(r.Source, string(e.Code))
		return nil, e
	}
	p, e := sampling(&c.cfg.Defaults, &r.Options)
	if e != nil {
		c.count(r.Source, string(e.Code))
		return nil, e
	}
	con, e := c.compile(ctx, &r)
	if e != nil {
		c.count(r.Source, string(e.Code))
		return nil, e
	}
	client := r.ID != "" && !r.Generated
	if r.ID == "" {
		r.ID, r.Generated = NewID(), true
	}
	j := &job{req: r, sink: sink, ticket: newTicket(&r), queued: now, params: p, con: con, announced: make(chan struct{})}
	j.ctx, j.cancel = c.jobContext(r.TTL, now)

	c.mu.Lock()
	if client {
		if en := c.seen.lookup(r.ID, now); en != nil {
			if en.out != nil {
				c.countLocked(r.Source, "replayed")
				c.mu.Unlock()
				j.cancel(nil)
				o := *en.out
				o.Replayed = true
				j.ticket.complete(o)
				c.log.Info("duplicate request: stored outcome", "id", r.ID, "source", r.Source)
				return j.ticket, nil
			}
			state := "queued"
			if !slices.Contains(c.queue, en.job) {
				state = "running"
			}
			c.countLocked(r.Source, string(CodeDuplicate))
			c.mu.Unlock()
			j.cancel(nil)
			c.log.Info("duplicate request refused", "id", r.ID, "source", r.Source, "first", state)
			return nil, &Error{Code: CodeDuplicate, Message: fmt.Sprintf("request %s is already %s", r.ID, state), State: state}
		}
	}
	switch n := c.waitingLocked(); {
	case c.closing:
		c.countLocked(r.Source, string(CodeBusy))
		c.mu.Unlock()
		j.cancel(errShutdown)
		return nil, errorf(CodeBusy, "%v", errShutdown)
	case n >= c.cfg.Limits.Queue:
		c.countLocked(r.Source, string(CodeBusy))
		c.mu.Unlock()
		j.cancel(errCancelled)
		c.log.Info("queue full", "id", r.ID, "source", r.Source, "queued", n)
		return nil, errorf(CodeBusy, "queue full (%d waiting); retry later or ask another device", n)
	}
	if client {
		c.seen.reserve(r.ID, j, now)
	}
	// Under mu, so that finish (which stops it) cannot run before it is set.
	j.unwatch = context.AfterFunc(ctx, func() { c.withdraw(j) })
	j.behind = len(c.running) > 0 || len(c.queue) > 0
	c.queue = append(c.queue, j)
	c.mu.Unlock()
	c.log.Debug("request queued", "id", r.ID, "source", r.Source, "session", r.Session)
	c.poke()
	c.emit(Event{Kind: EventQueued, ID: r.ID, Source: r.Source, Session: r.Session})
	close(j.announced)
	return j.ticket, nil
}

// jobContext returns a job's context: ended by shutdown (past the grace)
// and, with a ttl, at its deadline.
func (c *Core) jobContext(ttl time.Duration, now time.Time) (context.Context, context.CancelCauseFunc) {
	if ttl <= 0 {
		return context.WithCancelCause(c.workCtx)
	}
	dctx, cancelDeadline := context.WithDeadlineCause(c.workCtx, now.Add(ttl), errTTL)
	ctx, cancel := context.WithCancelCause(dctx)
	return ctx, func(err error) { cancel(err); cancelDeadline() }
}

// Reject counts a request a front end refused before it reached the core
// (a payload too broken to be a Request), so that the counters cover
// every request.
func (c *Core) Reject(src Source, code Code) { c.count(src, string(code)) }

// Cancel cancels the request with id: taken out of the queue (outcome
// cancelled at once) or cancelled while it runs. It reports whether the
// request was queued or running.
func (c *Core) Cancel(id string) bool {
	c.mu.Lock()
	var found *job
	for i, j := range c.queue {
		if j.do == nil && j.req.ID == id {
			found = j
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			break
		}
	}
	var running *job
	for _, j := range c.running {
		if j.req.ID == id {
			running = j
		}
	}
	c.mu.Unlock()
	switch {
	case found != nil:
		found.cancel(errCancelled)
		c.log.Info("queued request cancelled", "id", id)
		c.finish(found, Outcome{Err: errorf(CodeCancelled, "cancelled while queued")})
		return true
	case running != nil:
		c.log.Info("running request cancelled", "id", id)
		running.cancel(errCancelled)
		return true
	}
	if c.cancelForwarded(id) {
		return true
	}
	c.log.Debug("cancel for an unknown or finished request", "id", id)
	return false
}

// CancelRunning cancels the running requests, whatever their source;
// queued ones stay queued. It reports whether one ran.
func (c *Core) CancelRunning() bool {
	c.mu.Lock()
	running := append([]*job(nil), c.running...)
	c.mu.Unlock()
	for _, j := range running {
		c.log.Info("running request cancelled", "id", j.req.ID, "source", j.req.Source)
		j.cancel(errCancelled)
	}
	return len(running) > 0
}

// withdraw ends j because its submitter's context ended.
func (c *Core) withdraw(j *job) {
	c.mu.Lock()
	queued := false
	for i, q := range c.queue {
		if q == j {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			queued = true
			break
		}
	}
	c.mu.Unlock()
	j.cancel(errCancelled)
	if queued {
		c.log.Info("queued request withdrawn", "id", j.req.ID, "source", j.req.Source)
		c.finish(j, Outcome{Err: errorf(CodeCancelled, "cancelled while queued")})
	}
}

// DefaultSession is the conversation of the Home Assistant dashboard
// ("dashboard-N"), which askers such as buttons share when they name no
// session of their own.
func (c *Core) DefaultSession() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return dashboardSession(c.dashboard)
}

func dashboardSession(n int) string { return fmt.Sprintf("dashboard-%d", n) }

// NewConversation starts a new conversation. With an empty session it is
// the dashboard's (DefaultSession changes at once); otherwise the named
// session's history is forgotten, on the worker after the work already
// queued, so a request queued before it still sees the history.
func (c *Core) NewConversation(session string) {
	if session == "" {
		d := c.nextDashboard()
		c.log.Info("new dashboard conversation", "session", dashboardSession(d))
		c.emit(Event{Kind: EventChanged})
		return
	}
	c.control(func() {
		if err := c.forget(session); err != nil {
			c.log.Error("new conversation", "session", session, "err", err)
			return
		}
		c.log.Info("new conversation", "session", session)
	})
}

// control queues fn to run on the worker after the work already queued
// (not bound by the queue length); false when the core is shutting down.
func (c *Core) control(fn func()) bool {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return false
	}
	c.queue = append(c.queue, &job{do: fn})
	c.mu.Unlock()
	c.poke()
	return true
}

// Warmer is an Engine that can bring its most recently used prompt-cache
// prefix back into memory (engine.Engine.Warm).
type Warmer interface {
	Warm() (tokens int, took time.Duration)
}

// Warm queues a warm-up of the engine on the worker, after the work
// queued: Ollama's "load the model" request (no messages), which Home
// Assistant sends before a conversation. False when the engine cannot
// warm or the core is shutting down.
func (c *Core) Warm() bool {
	w, ok := c.cfg.Engine.(Warmer)
	if !ok {
		return false
	}
	return c.control(func() {
		if n, took := w.Warm(); n > 0 {
			c.log.Info("prompt cache warmed", "tokens", n, "ms", took.Milliseconds(), "by", "load request")
		}
	})
}

// SetLink records the state of a front end's connection (name "mqtt" for
// the broker) for the State, and reports the change to the watchers. A
// front end calls it when the link comes up or goes down.
func (c *Core) SetLink(name string, l Link) {
	c.mu.Lock()
	if c.links == nil {
		c.links = map[string]Link{}
	}
	c.links[name] = l
	c.mu.Unlock()
	c.emit(Event{Kind: EventChanged})
}

// SetDegraded records that part works less than configured, and why, in
// words safe to show to any client (no file paths: the details belong in
// the log); an empty reason says it works again. The State reports it;
// watchers hear an EventChanged when it changes. Storage save failures
// the core notices itself (see Outcome.Warning).
func (c *Core) SetDegraded(p Part, reason string) {
	c.mu.Lock()
	old := c.degraded[p]
	if reason == "" {
		delete(c.degraded, p)
	} else {
		c.degraded[p] = reason
	}
	c.mu.Unlock()
	if old == reason {
		return
	}
	if reason == "" {
		c.log.Info("working again", "part", p)
	} else {
		c.log.Warn("degraded", "part", p, "reason", reason)
	}
	c.emit(Event{Kind: EventChanged})
}

// storageFailed records why the last session read or save failed, or
// with "" that a save worked again (the State's PartStorage).
func (c *Core) storageFailed(why string) {
	c.mu.Lock()
	old := c.saveErr
	c.saveErr = why
	c.mu.Unlock()
	if old == why {
		return
	}
	if why == "" {
		c.log.Info("sessions are saved again")
	}
	c.emit(Event{Kind: EventChanged})
}

// Watch calls fn for every Event until stop is called. fn runs on the
// goroutine where the change happened (a Submit caller, the worker) and
// must return promptly; it may call Snapshot.
func (c *Core) Watch(fn func(Event)) (stop func()) {
	c.mu.Lock()
	id := c.nextWatch
	c.nextWatch++
	c.watchers[id] = fn
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.watchers, id)
		c.mu.Unlock()
	}
}

func (c *Core) emit(ev Event) {
	c.mu.Lock()
	fns := make([]func(Event), 0, len(c.watchers))
	for _, id := range slices.Sorted(maps.Keys(c.watchers)) {
		fns = append(fns, c.watchers[id])
	}
	c.mu.Unlock()
	for _, fn := range fns {
		fn(ev)
	}
}

func (c *Core) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// waitingLocked counts the queued requests (not control work).
func (c *Core) waitingLocked() int {
	n := 0
	for _, j := range c.queue {
		if j.do == nil {
			n++
		}
	}
	return n
}

// Paralleler is an Engine that decodes several requests together
// (engine.Engine.Parallel: continuous batching): the core runs as many
// workers over its queue, each calling Generate concurrently.
type Paralleler interface {
	Parallel() int
}

// priority orders the queue: a request someone is waiting on by voice or
// by a button (the device's push-to-talk and buttons, Wyoming's voice
// pipeline) goes before the others; within one priority, the oldest
// first.
func priority(src Source) int {
	switch src {
	case SourceVoice, SourceButton, SourceWyoming:
		return 1
	}
	return 0
}

// nextLocked is the index in the queue of the job a free worker takes, -1
// for none now: control work once the work queued before it has been
// taken, otherwise the oldest queued request whose conversation has no
// answer running (its history would miss that answer) and, among the
// requests that queued behind others (busy when they came), the one of
// the highest priority. A request that found the engine idle is not
// passed.
func (c *Core) nextLocked() int {
	best := -1
	for i, j := range c.queue {
		if j.do != nil {
			if i == 0 {
				return 0
			}
			break
		}
		if j.req.Session != "" && slices.ContainsFunc(c.running, func(r *job) bool { return r.req.Session == j.req.Session }) {
			continue
		}
		switch {
		case best < 0:
			best = i
		case c.queue[best].behind && priority(j.req.Source) > priority(c.queue[best].req.Source):
			best = i
		}
	}
	return best
}

// worker runs jobs on eng one at a time until stop is closed; with a
// Paralleler engine several workers run over the same queue, their
// requests decoded together. Control work runs alone: it waits for the
// running requests, and requests wait for it (exclusive).
func (c *Core) worker(eng Engine) {
	for {
		c.mu.Lock()
		i := c.nextLocked()
		if i < 0 {
			c.mu.Unlock()
			select {
			case <-c.wake:
				continue
			case <-c.stop:
				return
			}
		}
		j := c.queue[i]
		c.queue = slices.Delete(c.queue, i, i+1)
		j.started = time.Now()
		c.working = append(c.working, j)
		if j.do == nil {
			c.running = append(c.running, j)
		}
		more := len(c.queue) > 0
		c.mu.Unlock()
		if more {
			c.poke() // another worker may take the next one
		}
		if j.do != nil {
			c.exclusive.Lock()
			j.do()
			c.exclusive.Unlock()
		} else {
			c.exclusive.RLock()
			c.run(eng, j)
			c.exclusive.RUnlock()
		}
		c.mu.Lock()
		c.working = slices.DeleteFunc(c.working, func(w *job) bool { return w == j })
		c.mu.Unlock()
		c.poke() // a request of the same conversation may run now
	}
}

// run generates j's answer and delivers its outcome.
func (c *Core) run(eng Engine, j *job) {
	defer j.cancel(nil)
	if j.ctx.Err() != nil {
		c.finish(j, Outcome{Err: c.ctxError(j)})
		return
	}
	<-j.announced
	c.emit(Event{Kind: EventStarted, ID: j.req.ID, Source: j.req.Source, Session: j.req.Session})
	o, err := c.safeGenerate(eng, j)
	if err != nil {
		var e *Error
		switch {
		case j.ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, j.ctx.Err())):
			e = c.ctxError(j)
		case errors.Is(err, engine.ErrPromptTooLong):
			e = errorf(CodeTooLong, "%s", strings.TrimPrefix(err.Error(), "engine: "))
		case errors.Is(err, chat.ErrBadTool):
			// A tool schema nested too deep: the client's request, not a
			// failure of the box (issue 22: it was a 500 and lit the error LED).
			e = errorf(CodeBadRequest, "%s", strings.TrimPrefix(err.Error(), "chat: "))
		case errors.Is(err, chat.ErrLimit):
			// The chat template blew up on this conversation (it passed
			// its trial renders at load): the request is too big for it.
			c.log.Warn("chat template limit", "id", j.req.ID, "source", j.req.Source, "err", err)
			e = errorf(CodeTooLong, "the conversation exceeds a limit of the model's chat template")
		case errors.As(err, &e):
		default:
			// The details (paths, internals) go to the log, not to clients.
			c.log.Error("generation failed", "id", j.req.ID, "source", j.req.Source, "err", err)
			e = errorf(CodeInternal, "generation failed (details in the device's log)")
		}
		o.Err = e
	} else {
		c.log.Info("answered", "id", j.req.ID, "source", j.req.Source, "session", j.req.Session, "prompt_tokens", o.Usage.PromptTokens,
			"generated_tokens", o.Usage.GeneratedTokens, "tok_s", Round1(o.Usage.TokS), "ms", o.Usage.Duration.Milliseconds())
	}
	c.finish(j, o)
}

// safeGenerate generates, turning a panic into an internal error so that
// one bad request does not take the appliance down.
func (c *Core) safeGenerate(eng Engine, j *job) (o Outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("generator panic: %v", r)
		}
	}()
	return c.generate(eng, j)
}

func (c *Core) ctxError(j *job) *Error {
	switch cause := context.Cause(j.ctx); {
	case errors.Is(cause, errTTL) || errors.Is(cause, context.DeadlineExceeded):
		return errorf(CodeTimeout, "time to live of %gs expired", j.req.TTL.Seconds())
	case errors.Is(cause, errShutdown):
		return errorf(CodeCancelled, "%v", errShutdown)
	case errors.Is(cause, errStalled):
		return errorf(CodeTimeout, "the generation made no progress for %gs and was stopped (limits: stall_timeout_s)", c.cfg.Limits.StallTimeout.Seconds())
	default:
		return errorf(CodeCancelled, "cancelled")
	}
}

// finish records j's outcome and delivers it: the job stops counting as
// running first, so that whoever hears of the outcome and then cancels
// "the running request" does not reach it.
func (c *Core) finish(j *job, o Outcome) {
	now := time.Now()
	o.ID, o.Source, o.Session = j.req.ID, j.req.Source, j.req.Session
	if o.Usage.Queued == 0 {
		o.Usage.Queued = now.Sub(j.queued)
	}
	c.mu.Lock()
	if j.finished {
		c.mu.Unlock()
		return
	}
	j.finished = true
	for i, r := range c.running {
		if r == j {
			c.running = append(c.running[:i], c.running[i+1:]...)
			break
		}
	}
	if o.Err != nil {
		c.countLocked(j.req.Source, string(o.Err.Code))
	} else {
		c.countLocked(j.req.Source, "answered")
		s := &c.stats
		s.lastTokS, s.lastAt = o.Usage.TokS, now
		s.prompt += int64(o.Usage.PromptTokens)
		s.cached += int64(o.Usage.CachedTokens)
		s.restored += int64(o.Usage.RestoredTokens)
		s.generated += int64(o.Usage.GeneratedTokens)
		s.thinking += int64(o.Usage.ThinkingTokens)
		s.drafted += int64(o.Usage.Drafted)
		s.accep += int64(o.Usage.Accepted)
		s.passes += int64(o.Usage.TargetPasses)
		s.treePasses += int64(o.Usage.TreePasses)
		for name, d := range o.Usage.Drafters {
			if s.drafters == nil {
				s.drafters = map[string]DrafterUsage{}
			}
			t := s.drafters[name]
			t.Drafted, t.Accepted, t.Steps = t.Drafted+d.Drafted, t.Accepted+d.Accepted, t.Steps+d.Steps
			s.drafters[name] = t
		}
	}
	if j.do == nil {
		c.recent.add(record(j, &o, now, c.cfg.RecentText))
	}
	if _, ok := c.seen.byID[j.req.ID]; ok {
		stored := o
		c.seen.finish(j.req.ID, &stored, now)
	}
	c.mu.Unlock()
	if j.unwatch != nil {
		j.unwatch()
	}
	if j.announced != nil {
		<-j.announced
	}
	c.emit(Event{Kind: EventFinished, ID: o.ID, Source: o.Source, Session: o.Session, Outcome: &o})
	j.ticket.complete(o)
}

func (c *Core) count(src Source, outcome string) {
	c.mu.Lock()
	c.countLocked(src, outcome)
	c.mu.Unlock()
}

func (c *Core) countLocked(src Source, outcome string) {
	m := c.stats.byOutcome[src]
	if m == nil {
		m = map[string]int64{}
		c.stats.byOutcome[src] = m
	}
	m[outcome]++
	switch Code(outcome) {
	case "answered":
		c.stats.served++
	case CodeBadRequest, CodeTooLong, CodeBusy:
		c.stats.refused++
	case CodeCancelled: // asked for: not a failure
		c.stats.cancelled++
	case CodeTimeout, CodeInternal:
		c.stats.failed++
	case CodeDuplicate, "replayed":
		c.stats.duplicates++
	}
}

// Snapshot returns the State now.
func (c *Core) Snapshot() State {
	// The stores have locks of their own: ask them before taking c.mu.
	sessions := c.sessions.Count()
	var cache *CacheStats
	if c.cfg.Storage != nil {
		if cs, ok := c.cfg.Storage.CacheStats(); ok {
			cache = &cs
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &c.stats
	st := State{State: "idle", Busy: len(c.running) > 0, Queue: c.waitingLocked(), Session: dashboardSession(c.dashboard),
		Model: c.cfg.Model, Version: c.cfg.Version, ModelLoad: c.cfg.ModelLoad, Started: c.started, LastTokS: s.lastTokS, LastAnswered: s.lastAt,
		Served: s.served, Refused: s.refused, Cancelled: s.cancelled, Failed: s.failed, Duplicates: s.duplicates,
		PromptTokens: s.prompt, CachedTokens: s.cached, RestoredTokens: s.restored, GeneratedTokens: s.generated, ThinkingTokens: s.thinking, Drafted: s.drafted, Accepted: s.accep,
		TargetPasses: s.passes, TreePasses: s.treePasses, Drafters: maps.Clone(s.drafters),
		Requests: make(map[Source]map[string]int64, len(s.byOutcome))}
	for _, j := range c.running {
		st.Running = append(st.Running, j.req.ID)
	}
	if stall := c.cfg.Limits.StallTimeout; stall > 0 {
		now := time.Now()
		for _, j := range c.working {
			if d := j.progress.since(j.started, now); d >= stall {
				what := "control work"
				if j.do == nil {
					what = "request " + j.req.ID
				}
				st.Stuck = fmt.Sprintf("the worker has made no progress for %s on %s (stall_timeout_s %g)", d.Round(time.Second), what, stall.Seconds())
			}
		}
	}
	st.Jobs = c.jobsLocked()
	for src, m := range s.byOutcome {
		st.Requests[src] = maps.Clone(m)
	}
	if len(c.degraded) > 0 || c.saveErr != "" {
		st.Degraded = maps.Clone(c.degraded)
		if st.Degraded == nil {
			st.Degraded = map[Part]string{}
		}
		if st.Degraded[PartStorage] == "" && c.saveErr != "" {
			st.Degraded[PartStorage] = c.saveErr
		}
	}
	if st.Busy {
		// "thinking" only while an answer is in its thinking block: a
		// model that does not think is generating, not thinking.
		st.State = "generating"
		for _, j := range c.running {
			if j.progress.thinking.Load() {
				st.State = "thinking"
			}
		}
	}
	if c.closing {
		st.State = "stopping"
	}
	if len(c.links) > 0 {
		st.Links = maps.Clone(c.links)
	}
	st.derive()
	st.Sessions, st.Cache = sessions, cache
	return st
}

// derive sets the rates of the State from its totals.
func (st *State) derive() {
	st.AcceptanceRate, st.TokensPerPass, st.MeanTreeSize, st.MeanAcceptedDepth, st.CacheHitRate = 0, 0, 0, 0, 0
	if st.Drafted > 0 {
		st.AcceptanceRate = float64(st.Accepted) / float64(st.Drafted)
	}
	if st.TargetPasses > 0 {
		st.TokensPerPass = float64(st.TargetPasses+st.Accepted) / float64(st.TargetPasses)
	}
	if st.TreePasses > 0 {
		st.MeanTreeSize = float64(st.Drafted) / float64(st.TreePasses)
		st.MeanAcceptedDepth = float64(st.Accepted) / float64(st.TreePasses)
	}
	if st.PromptTokens > 0 {
		st.CacheHitRate = float64(st.CachedTokens) / float64(st.PromptTokens)
	}
}

// Round1 rounds x to one decimal, for logs and payloads.
func Round1(x float64) float64 { return float64(int64(x*10+0.5)) / 10 }
