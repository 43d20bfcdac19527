package mqtt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// Config configures a Service. Zero values take the defaults noted.
type Config struct {
	// Broker is tcp://host:1883, ssl://host:8883, ws://host:9001/mqtt;
	// empty runs the service offline: no MQTT at all, only the worker for
	// in-process requests (Submit), so buttons and voice keep working.
	Broker   string
	Username string
	Password string
	CAFile   string // PEM roots for ssl:// (system roots when empty)
	CertFile string // client certificate (PEM), with KeyFile
	KeyFile  string
	ClientID string // derived from the machine id and Device when empty

	Device          string // device name, [a-zA-Z0-9_-]; required
	Discovery       bool   // announce the device to Home Assistant
	DiscoveryPrefix string // "homeassistant"
	Pool            bool   // also serve $share/geist/geist/pool/ask
	Version         string // reported in discovery and state
	Model           string // model name, reported in discovery and state
	// Components are further Home Assistant discovery components (such as
	// the button event entities of package firmware), merged into the
	// device's "cmps" by key; each gets the device's availability unless
	// it sets its own.
	Components map[string]map[string]any
	// OnCancel, when set, is called (from the MQTT client's goroutine; it
	// must return promptly) after Home Assistant's Cancel button cancelled
	// the running request, so the daemon can also stop what else it does
	// for an answer (speech).
	OnCancel func()

	QueueLen      int           // requests waiting behind the running one (8)
	Limits        Limits        // MaxPayload 64 KiB, MaxTokens 512, DefaultTTL 5 min, MaxTTL 24 h
	ChunkInterval time.Duration // streamed chunk batching (50 ms)
	DedupSize     int           // ids remembered (4096)
	DedupTTL      time.Duration // how long (10 min)
	ShutdownGrace time.Duration // how long the running request may finish at shutdown (10 s)
	BirthDelay    time.Duration // republish on HA birth after a random delay up to this (3 s)
	StateInterval time.Duration // least time between state publications (250 ms)

	ConnectTimeout       time.Duration // per attempt (10 s)
	MaxReconnectInterval time.Duration // reconnect back-off cap (30 s)
	PublishTimeout       time.Duration // wait for the broker to take a QoS 1 message (5 s)

	Logger *slog.Logger // slog.Default() when nil
}

func (c *Config) defaults() error {
	if err := checkDevice(c.Device); err != nil {
		return err
	}
	switch {
	case c.Broker == "": // offline
	case strings.HasPrefix(c.Broker, "tcp://"), strings.HasPrefix(c.Broker, "ssl://"),
		strings.HasPrefix(c.Broker, "tls://"), strings.HasPrefix(c.Broker, "ws://"),
		strings.HasPrefix(c.Broker, "wss://"), strings.HasPrefix(c.Broker, "mqtt://"),
		strings.HasPrefix(c.Broker, "mqtts://"):
	default:
		return fmt.Errorf("mqtt: broker URL %q: want tcp://, ssl://, ws:// or wss://", c.Broker)
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("mqtt: a client certificate needs both a cert file and a key file")
	}
	if c.DiscoveryPrefix == "" {
		c.DiscoveryPrefix = "homeassistant"
	}
	if c.QueueLen <= 0 {
		c.QueueLen = 8
	}
	if c.Limits.MaxPayload <= 0 {
		c.Limits.MaxPayload = 64 << 10
	}
	if c.Limits.MaxTokens <= 0 {
		c.Limits.MaxTokens = 512
	}
	if c.Limits.DefaultTTL < 0 {
		c.Limits.DefaultTTL = 0
	} else if c.Limits.DefaultTTL == 0 {
		c.Limits.DefaultTTL = 5 * time.Minute
	}
	if c.Limits.MaxTTL <= 0 {
		c.Limits.MaxTTL = maxTTLDefault
	}
	setDur := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	setDur(&c.ChunkInterval, 50*time.Millisecond)
	setDur(&c.DedupTTL, 10*time.Minute)
	setDur(&c.ShutdownGrace, 10*time.Second)
	setDur(&c.BirthDelay, 3*time.Second)
	setDur(&c.StateInterval, 250*time.Millisecond)
	setDur(&c.ConnectTimeout, 10*time.Second)
	setDur(&c.MaxReconnectInterval, 30*time.Second)
	setDur(&c.PublishTimeout, 5*time.Second)
	if c.DedupSize <= 0 {
		c.DedupSize = 4096
	}
	if c.ClientID == "" {
		c.ClientID = ClientID(c.Device)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

func checkDevice(dev string) error {
	if dev == "" {
		return errors.New("mqtt: no device name")
	}
	if len(dev) > 64 {
		return fmt.Errorf("mqtt: device name %q is longer than 64 bytes", dev)
	}
	for _, r := range dev {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("mqtt: device name %q: only letters, digits, _ and - are allowed (Home Assistant ids)", dev)
		}
	}
	return nil
}

// Causes of a job's end other than success.
var (
	errCancelled = errors.New("cancelled by request")
	errShutdown  = errors.New("geist is shutting down")
	errTTL       = errors.New("time to live expired")
)

type job struct {
	req    Request
	topic  string
	ctx    context.Context
	cancel context.CancelCauseFunc
	local  *localJob // set for in-process requests (Submit)
	do     func()    // set for control work run on the worker (NewConversation)
}

// Stats count what a Service did.
type Stats struct {
	Served, Refused, Failed, Duplicates int64
}

// Service answers requests over MQTT with one worker.
type Service struct {
	cfg    Config
	gen    Generator
	log    *slog.Logger
	t      Topics
	client paho.Client
	seen   *seenSet

	mu        sync.Mutex
	queue     []*job
	running   *job
	closing   bool
	dashboard int // dashboard conversation number, bumped by "new conversation"
	lastTokS  float64
	drafted   int64
	accepted  int64
	prompt    int64
	cached    int64
	lastErr   string

	wake      chan struct{}
	dirty     chan struct{}
	stop      chan struct{} // closed when the worker must exit
	workCtx   context.Context
	workStop  context.CancelCauseFunc
	connected atomic.Bool
	stats     struct{ served, refused, failed, dups atomic.Int64 }
	bg        sync.WaitGroup
	offline   bool // no broker: nothing is published
}

// New returns a Service for gen. It does not connect until Run.
func New(cfg Config, gen Generator) (*Service, error) {
	if gen == nil {
		return nil, errors.New("mqtt: nil generator")
	}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	s := &Service{
		cfg:   cfg,
		gen:   gen,
		log:   cfg.Logger.With("device", cfg.Device),
		t:     TopicsFor(cfg.Device, cfg.DiscoveryPrefix),
		seen:  newSeenSet(cfg.DedupSize, cfg.DedupTTL),
		wake:  make(chan struct{}, 1),
		dirty: make(chan struct{}, 1),
		stop:  make(chan struct{}),
	}
	s.offline = cfg.Broker == ""
	s.workCtx, s.workStop = context.WithCancelCause(context.Background())
	opts, err := s.clientOptions()
	if err != nil {
		return nil, err
	}
	s.client = paho.NewClient(opts)
	return s, nil
}

// Topics returns the service's topics.
func (s *Service) Topics() Topics { return s.t }

// ClientID returns the MQTT client id in use.
func (s *Service) ClientID() string { return s.cfg.ClientID }

// Connected reports whether the service is connected to the broker now.
func (s *Service) Connected() bool { return s.connected.Load() }

// Stats returns the counters.
func (s *Service) Stats() Stats {
	return Stats{s.stats.served.Load(), s.stats.refused.Load(), s.stats.failed.Load(), s.stats.dups.Load()}
}

func (s *Service) clientOptions() (*paho.ClientOptions, error) {
	c := &s.cfg
	o := paho.NewClientOptions()
	o.AddBroker(c.Broker)
	o.SetClientID(c.ClientID)
	o.SetUsername(c.Username)
	o.SetPassword(c.Password)
	if c.CAFile != "" || c.CertFile != "" {
		tc, err := tlsConfig(c.CAFile, c.CertFile, c.KeyFile)
		if err != nil {
			return nil, err
		}
		o.SetTLSConfig(tc)
	}
	o.SetWill(s.t.Status, "offline", 1, true)
	o.SetCleanSession(true)
	// Handlers run in arrival order on paho's router goroutine (so the
	// queue keeps the order requests came in); they never wait on a token.
	o.SetOrderMatters(true)
	o.SetAutoReconnect(true)
	o.SetConnectRetry(true)
	o.SetConnectRetryInterval(min(2*time.Second, c.MaxReconnectInterval))
	o.SetMaxReconnectInterval(c.MaxReconnectInterval)
	o.SetConnectTimeout(c.ConnectTimeout)
	o.SetKeepAlive(30 * time.Second)
	o.SetPingTimeout(10 * time.Second)
	o.SetWriteTimeout(c.PublishTimeout)
	o.SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) { s.onMessage(m.Topic(), m.Payload()) })
	o.SetOnConnectHandler(func(paho.Client) { s.onConnect() })
	o.SetConnectionLostHandler(func(_ paho.Client, err error) {
		s.connected.Store(false)
		s.log.Warn("mqtt connection lost, reconnecting", "broker", c.Broker, "err", err)
	})
	o.SetReconnectingHandler(func(paho.Client, *paho.ClientOptions) {
		s.log.Info("mqtt reconnecting", "broker", c.Broker)
	})
	return o, nil
}

// Run connects (retrying in the background until the broker answers),
// serves until ctx ends, then shuts down gracefully: it stops taking work,
// refuses what is queued, lets the running request finish within
// ShutdownGrace (then cancels it), publishes offline and disconnects.
func (s *Service) Run(ctx context.Context) error {
	if s.offline {
		s.log.Info("mqtt off (no broker): serving in-process requests only")
	} else {
		s.log.Info("mqtt connecting", "broker", s.cfg.Broker, "client_id", s.cfg.ClientID)
		s.client.Connect() // with ConnectRetry the token completes only once connected
	}
	workerDone := make(chan struct{})
	go func() {
		defer close(workerDone)
		s.worker()
	}()
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		s.statePublisher()
	}()
	<-ctx.Done()
	s.shutdown(workerDone)
	return nil
}

func (s *Service) shutdown(workerDone chan struct{}) {
	s.log.Info("mqtt shutting down: no new work")
	s.mu.Lock()
	s.closing = true
	queued := s.queue
	s.queue = nil
	running := s.running
	s.mu.Unlock()
	if s.connected.Load() {
		filters := []string{s.t.Ask, s.t.CmdAsk}
		if s.cfg.Pool {
			filters = append(filters, s.t.PoolShared)
		}
		s.client.Unsubscribe(filters...).WaitTimeout(s.cfg.PublishTimeout)
	}
	for _, j := range queued {
		if j.do != nil {
			continue // control work is dropped with the rest
		}
		j.cancel(errShutdown)
		s.reply(j, nil, errorf(CodeCancelled, "%v", errShutdown))
	}
	if running != nil {
		s.log.Info("waiting for the running request", "id", running.req.ID, "grace", s.cfg.ShutdownGrace)
	}
	close(s.stop)
	select {
	case <-workerDone:
	case <-time.After(s.cfg.ShutdownGrace):
		s.workStop(errShutdown)
		<-workerDone
	}
	s.workStop(errShutdown)
	if s.connected.Load() {
		s.publishState()
		s.client.Publish(s.t.Status, 1, true, "offline").WaitTimeout(s.cfg.PublishTimeout)
	}
	if !s.offline {
		s.client.Disconnect(250)
	}
	s.connected.Store(false)
	s.bg.Wait()
	s.log.Info("mqtt stopped", "served", s.stats.served.Load(), "refused", s.stats.refused.Load())
}

func (s *Service) onConnect() {
	subs := map[string]byte{s.t.Ask: 1, s.t.Cancel: 1, s.t.CmdAsk: 1, s.t.CmdCancel: 1, s.t.CmdNewConversation: 1}
	if s.cfg.Pool {
		subs[s.t.PoolShared] = 1
	}
	if s.cfg.Discovery {
		subs[s.t.HAStatus] = 1
	}
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		return
	}
	for attempt := 1; ; attempt++ {
		tok := s.client.SubscribeMultiple(subs, nil)
		if tok.WaitTimeout(s.cfg.PublishTimeout) && tok.Error() == nil {
			break
		}
		s.log.Error("mqtt subscribe failed", "attempt", attempt, "err", tok.Error())
		if attempt == 5 || !s.client.IsConnectionOpen() {
			return // the next (re)connect subscribes again
		}
		select {
		case <-time.After(time.Second):
		case <-s.stop:
			return
		}
	}
	s.connected.Store(true)
	s.log.Info("mqtt connected", "broker", s.cfg.Broker, "subscriptions", len(subs))
	s.publish(s.t.Status, 1, true, []byte("online"))
	s.announce()
}

// announce publishes discovery (when enabled) and the state.
func (s *Service) announce() {
	if s.cfg.Discovery {
		p, err := DiscoveryPayload(DiscoveryInfo{Device: s.cfg.Device, Version: s.cfg.Version,
			Model: s.cfg.Model, Prefix: s.cfg.DiscoveryPrefix, Components: s.cfg.Components})
		if err != nil {
			s.log.Error("discovery payload", "err", err)
		} else {
			s.publish(s.t.Discovery, 1, true, p)
		}
	}
	s.publishState()
}

// publish sends without waiting long: QoS 0 not at all, QoS 1 up to
// PublishTimeout (a token is not a delivery receipt anyway).
func (s *Service) publish(topic string, qos byte, retain bool, payload []byte) {
	if s.offline {
		return
	}
	tok := s.client.Publish(topic, qos, retain, payload)
	if qos == 0 {
		return
	}
	if !tok.WaitTimeout(s.cfg.PublishTimeout) {
		s.log.Warn("mqtt publish not acknowledged in time", "topic", topic)
	} else if err := tok.Error(); err != nil {
		s.log.Warn("mqtt publish failed", "topic", topic, "err", err)
	}
}

// onMessage runs on paho's goroutines: it decodes, enqueues and returns.
func (s *Service) onMessage(topic string, payload []byte) {
	switch topic {
	case s.t.Ask:
		s.handleAsk(payload, nil)
	case s.t.PoolAsk:
		s.handleAsk(payload, nil)
	case s.t.Cancel:
		s.handleCancel(payload)
	case s.t.CmdAsk:
		s.mu.Lock()
		sess := fmt.Sprintf("dashboard-%d", s.dashboard)
		s.mu.Unlock()
		s.handleAsk(payload, func(r *Request) { r.Session = sess })
	case s.t.CmdCancel:
		s.log.Info("cancel button")
		s.CancelRunning()
		if s.cfg.OnCancel != nil {
			s.cfg.OnCancel()
		}
	case s.t.CmdNewConversation:
		s.NewConversation("")
	case s.t.HAStatus:
		if string(bytes.TrimSpace(payload)) == "online" {
			d := time.Duration(rand.Int64N(int64(s.cfg.BirthDelay)))
			s.log.Info("home assistant is online: republishing discovery", "after", d)
			s.mu.Lock()
			closing := s.closing
			if !closing {
				s.bg.Add(1) // under mu: shutdown sets closing before it waits on bg
			}
			s.mu.Unlock()
			if closing {
				return
			}
			go func() {
				defer s.bg.Done()
				select {
				case <-time.After(d):
					s.announce()
				case <-s.stop:
				}
			}()
		}
	default:
		s.log.Debug("mqtt message on an unexpected topic", "topic", topic)
	}
}

func (s *Service) handleAsk(payload []byte, adjust func(*Request)) {
	now := time.Now()
	req, perr := Parse(payload, s.cfg.Limits, now)
	if perr != nil {
		if req.ID != "" && !req.Generated && !s.seen.add(req.ID, now) {
			s.stats.dups.Add(1)
			return // a redelivery of a request already refused
		}
		s.stats.refused.Add(1)
		s.log.Info("request refused", "id", req.ID, "code", perr.Code, "err", perr.Message)
		s.refuse(&job{req: req, topic: s.answerTopic(req)}, perr)
		return
	}
	if !req.Generated && !s.seen.add(req.ID, now) {
		s.stats.dups.Add(1)
		s.log.Info("duplicate request ignored", "id", req.ID)
		return
	}
	if adjust != nil {
		adjust(&req)
	}
	j := s.newJob(req, now)
	s.mu.Lock()
	switch {
	case s.closing:
		s.mu.Unlock()
		j.cancel(errShutdown)
		s.stats.refused.Add(1)
		s.refuse(j, errorf(CodeBusy, "%v", errShutdown))
		return
	case s.waitingLocked() >= s.cfg.QueueLen:
		n := s.waitingLocked()
		s.mu.Unlock()
		j.cancel(errCancelled)
		s.stats.refused.Add(1)
		s.log.Info("queue full", "id", req.ID, "queued", n)
		s.refuse(j, errorf(CodeBusy, "queue full (%d waiting); retry later or ask another device", n))
		return
	}
	s.queue = append(s.queue, j)
	s.mu.Unlock()
	s.log.Debug("request queued", "id", req.ID, "stream", req.Stream)
	select {
	case s.wake <- struct{}{}:
	default:
	}
	s.markDirty()
}

func (s *Service) handleCancel(payload []byte) {
	id := string(bytes.TrimSpace(payload))
	if strings.HasPrefix(id, "{") {
		var c struct {
			ID string `json:"id"`
		}
		dec := json.NewDecoder(bytes.NewReader(payload))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			s.refuse(&job{topic: s.t.Error}, errorf(CodeBadRequest, "cancel: %s", describeJSONError(err)))
			return
		}
		id = c.ID
	}
	if e := checkID("id", id); e != nil {
		s.refuse(&job{topic: s.t.Error}, errorf(CodeBadRequest, "cancel: %s", e.Message))
		return
	}
	s.mu.Lock()
	var found *job
	for i, j := range s.queue {
		if j.req.ID == id {
			found = j
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			break
		}
	}
	running := s.running
	s.mu.Unlock()
	switch {
	case found != nil:
		found.cancel(errCancelled)
		s.log.Info("queued request cancelled", "id", id)
		s.refuse(found, errorf(CodeCancelled, "cancelled while queued"))
		s.markDirty()
	case running != nil && running.req.ID == id:
		s.log.Info("running request cancelled", "id", id)
		running.cancel(errCancelled)
	default:
		s.log.Debug("cancel for an unknown or finished request", "id", id)
	}
}

// newJob returns the job for req with its context: cancelled by the
// service's shutdown and, with a TTL, at req's deadline.
func (s *Service) newJob(req Request, now time.Time) *job {
	j := &job{req: req, topic: s.answerTopic(req)}
	if req.TTL > 0 {
		var cancel context.CancelFunc
		j.ctx, cancel = context.WithDeadlineCause(s.workCtx, now.Add(req.TTL), errTTL)
		inner, cancelCause := context.WithCancelCause(j.ctx)
		j.ctx = inner
		j.cancel = func(err error) { cancelCause(err); cancel() }
	} else {
		j.ctx, j.cancel = context.WithCancelCause(s.workCtx)
	}
	return j
}

func (s *Service) answerTopic(r Request) string {
	switch {
	case r.ReplyTo != "":
		return r.ReplyTo
	case r.ID == "":
		return s.t.Error
	case r.Generated:
		return s.t.Answer
	}
	return s.t.Answer + "/" + r.ID
}

// worker runs jobs one at a time until stop is closed and the queue is
// empty.
func (s *Service) worker() {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			j := s.queue[0]
			s.queue[0] = nil
			s.queue = s.queue[1:]
			if j.do != nil {
				s.mu.Unlock()
				j.do()
				continue
			}
			s.running = j
			s.mu.Unlock()
			s.markDirty()
			s.run(j)
			s.mu.Lock()
			s.running = nil
			s.mu.Unlock()
			s.markDirty()
			continue
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-s.stop:
			return
		}
	}
}

func (s *Service) run(j *job) {
	defer j.cancel(nil)
	if err := j.ctx.Err(); err != nil {
		s.reply(j, nil, s.ctxError(j))
		return
	}
	var onDelta func(string)
	var ch *chunker
	if j.req.Stream {
		stream := j.topic + "/stream"
		ch = newChunker(s.cfg.ChunkInterval, time.Now, func(seq int, delta string) {
			b, _ := json.Marshal(Chunk{ID: j.req.ID, Seq: seq, Delta: delta})
			s.send(stream, 0, false, b)
		})
		onDelta = ch.add
	} else {
		onDelta = func(string) {}
	}
	if j.local != nil && j.local.onDelta != nil {
		inner, local := onDelta, j.local.onDelta
		onDelta = func(d string) { inner(d); local(d) }
	}
	start := time.Now()
	res, err := s.safeGenerate(j, onDelta)
	if err != nil {
		var e *Error
		switch {
		case j.ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, j.ctx.Err())):
			e = s.ctxError(j)
		case errors.Is(err, ErrTooLong):
			e = errorf(CodeTooLong, "%v", strings.TrimPrefix(err.Error(), "mqtt: "))
		case errors.As(err, &e):
		default:
			s.log.Error("generation failed", "id", j.req.ID, "err", err)
			e = errorf(CodeInternal, "%v", err)
		}
		s.reply(j, nil, e)
		return
	}
	if ch != nil {
		ch.flush()
	}
	s.mu.Lock()
	s.lastTokS = res.Usage.TokS
	s.drafted += int64(res.Usage.Drafted)
	s.accepted += int64(res.Usage.Accepted)
	s.prompt += int64(res.Usage.PromptTokens)
	s.cached += int64(res.Usage.CachedTokens)
	s.mu.Unlock()
	s.log.Info("answered", "id", j.req.ID, "session", j.req.Session, "prompt_tokens", res.Usage.PromptTokens,
		"generated_tokens", res.Usage.GeneratedTokens, "tok_s", round1(res.Usage.TokS), "ms", time.Since(start).Milliseconds())
	s.reply(j, &res, nil)
}

// safeGenerate calls the generator, turning a panic into an internal error
// so one bad request does not take the appliance down.
func (s *Service) safeGenerate(j *job, onDelta func(string)) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("generator panic: %v", r)
		}
	}()
	return s.gen.Generate(j.ctx, j.req, onDelta)
}

func (s *Service) ctxError(j *job) *Error {
	switch cause := context.Cause(j.ctx); {
	case errors.Is(cause, errTTL) || errors.Is(cause, context.DeadlineExceeded):
		return errorf(CodeTimeout, "time to live of %gs expired", j.req.TTL.Seconds())
	case errors.Is(cause, errShutdown):
		return errorf(CodeCancelled, "%v", errShutdown)
	default:
		return errorf(CodeCancelled, "cancelled")
	}
}

// refuse answers j with e from a paho handler: it publishes without
// waiting for the broker, so the handler never blocks.
func (s *Service) refuse(j *job, e *Error) { s.respond(j, nil, e, false) }

// reply publishes the answer or the error of j from the worker, waiting
// (up to PublishTimeout) for the broker to take it.
func (s *Service) reply(j *job, res *Result, e *Error) { s.respond(j, res, e, true) }

// respond publishes the answer or the error of j, and for answers the
// last-answer sensor and the answer event.
func (s *Service) respond(j *job, res *Result, e *Error, wait bool) {
	pub := func(topic string, payload []byte) {
		if wait {
			s.publish(topic, 1, false, payload)
		} else {
			s.send(topic, 1, false, payload)
		}
	}
	// A request whose outcome is out is no longer running: whoever hears
	// of it (an in-process submitter, an MQTT client) and then asks to
	// cancel the running request must not reach this one.
	s.mu.Lock()
	if s.running == j {
		s.running = nil
	}
	s.mu.Unlock()
	quiet := false // an in-process request that is not published
	if j.local != nil {
		j.local.deliver(res, e)
		quiet = !j.local.publish
	}
	if e != nil {
		if e.Code != CodeBusy && e.Code != CodeBadRequest && e.Code != CodeTooLong {
			s.stats.failed.Add(1)
		}
		s.mu.Lock()
		s.lastErr = e.Code
		s.mu.Unlock()
		if quiet {
			return
		}
		b, _ := json.Marshal(ErrorReply{ID: j.req.ID, Error: e, ServedBy: s.cfg.Device})
		pub(j.topic, b)
		if j.req.ID != "" {
			ev, _ := json.Marshal(map[string]any{"event_type": "error", "id": j.req.ID, "code": e.Code, "message": e.Message})
			s.send(s.t.Event, 0, false, ev)
		}
		return
	}
	s.stats.served.Add(1)
	if quiet {
		return
	}
	a := Answer{ID: j.req.ID, Text: res.Text, Done: true, Session: j.req.Session, Usage: res.Usage, ServedBy: s.cfg.Device}
	a.Usage.TokS = round1(a.Usage.TokS)
	a.Usage.TTFTms = round1(a.Usage.TTFTms)
	b, _ := json.Marshal(a)
	pub(j.topic, b)
	last, _ := json.Marshal(map[string]any{"id": a.ID, "text": a.Text, "session": a.Session})
	s.send(s.t.LastAnswer, 0, true, last)
	ev, _ := json.Marshal(map[string]any{"event_type": "answer", "id": a.ID, "text": truncate(a.Text, 1024), "session": a.Session})
	s.send(s.t.Event, 0, false, ev)
}

// send publishes without waiting (nothing when offline).
func (s *Service) send(topic string, qos byte, retain bool, payload []byte) {
	if !s.offline {
		s.client.Publish(topic, qos, retain, payload)
	}
}

func (s *Service) markDirty() {
	select {
	case s.dirty <- struct{}{}:
	default:
	}
}

// statePublisher publishes the state when it changed, at most once per
// StateInterval, until the service stops.
func (s *Service) statePublisher() {
	for {
		select {
		case <-s.dirty:
		case <-s.stop:
			return
		}
		if s.connected.Load() {
			s.publishState()
		}
		select {
		case <-time.After(s.cfg.StateInterval):
		case <-s.stop:
			return
		}
	}
}

// State is the retained JSON on geist/<dev>/state.
type State struct {
	State          string  `json:"state"` // idle, thinking, stopping
	Busy           bool    `json:"busy"`
	Queue          int     `json:"queue"`
	Model          string  `json:"model"`
	TokS           float64 `json:"tok_s"`
	AcceptanceRate float64 `json:"acceptance_rate"`
	CacheHitRate   float64 `json:"cache_hit_rate"`
	Served         int64   `json:"served"`
	Refused        int64   `json:"refused"`
	Failed         int64   `json:"failed"`
	Session        string  `json:"session"` // the dashboard conversation
	Version        string  `json:"version"`
}

// CurrentState returns the state as it would be published now.
func (s *Service) CurrentState() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := State{State: "idle", Busy: s.running != nil, Queue: s.waitingLocked(), Model: s.cfg.Model,
		TokS: round1(s.lastTokS), Served: s.stats.served.Load(), Refused: s.stats.refused.Load(),
		Failed: s.stats.failed.Load(), Session: fmt.Sprintf("dashboard-%d", s.dashboard), Version: s.cfg.Version}
	if st.Busy {
		st.State = "thinking"
	}
	if s.closing {
		st.State = "stopping"
	}
	if s.drafted > 0 {
		st.AcceptanceRate = float64(s.accepted) / float64(s.drafted)
	}
	if s.prompt > 0 {
		st.CacheHitRate = float64(s.cached) / float64(s.prompt)
	}
	return st
}

func (s *Service) publishState() {
	b, _ := json.Marshal(s.CurrentState())
	s.publish(s.t.State, 1, true, b)
}

func round1(x float64) float64 { return float64(int64(x*10+0.5)) / 10 }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !isRuneStart(s[i]) {
		i--
	}
	return s[:i]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
