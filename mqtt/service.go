package mqtt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/sentence"
	"github.com/geisten/geist/mqtt/guard"
)

// Config configures a Service. Zero values take the defaults noted.
type Config struct {
	// Broker is mqtt://host (port 1883), mqtts://host (TLS, 8883),
	// tcp:// and ssl:// alike, or ws://host:9001/mqtt, wss://; the
	// default port is filled in (NormalizeBroker). Required (without a
	// broker there is no MQTT front end at all: the core, buttons and
	// voice work without one).
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
	// Buttons are the device's buttons: each gets a Home Assistant event
	// entity fed by PublishPress.
	Buttons []Button
	// OnCancel, when set, is called (from the MQTT client's goroutine; it
	// must return promptly) after Home Assistant's Cancel button cancelled
	// the running request, so the daemon can also stop what else it does
	// for an answer (speech).
	OnCancel func()

	MaxPayload int // largest ask payload in bytes (64 KiB); larger ones are too_long
	// ReplyPrefix confines reply_to (geist/<device>/reply/); requests
	// naming another topic are refused. With Pool, geist/pool/reply/ is
	// accepted too. It must end in "/" and cover none of geist's own
	// topics nor Home Assistant's discovery tree.
	ReplyPrefix string
	// RefusalRate and RefusalBurst bound the refusals answered (and
	// logged one by one) per topic: a token bucket (1 per second, 20 at
	// once); the rest are counted and logged once per RefusalReport (10 s).
	RefusalRate   float64
	RefusalBurst  int
	RefusalReport time.Duration
	// RepublishInterval is the least time between two republications of
	// discovery and state that Home Assistant's birth messages ask for
	// (30 s); births meanwhile are coalesced into one pending republication.
	RepublishInterval time.Duration
	ChunkInterval     time.Duration // streamed chunk batching (50 ms)
	ShutdownGrace     time.Duration // how long answers still being generated are waited for at shutdown (10 s)
	BirthDelay        time.Duration // republish on HA birth after a random delay up to this (3 s)
	StateInterval     time.Duration // least time between state publications (250 ms)

	ConnectTimeout       time.Duration // per attempt (10 s)
	MaxReconnectInterval time.Duration // reconnect back-off cap (30 s); attempts wait 1 s, 2 s, 4 s ... up to it
	SlowConnect          time.Duration // an attempt still unanswered after this is logged (4 s)
	PublishTimeout       time.Duration // wait for the broker to take a QoS 1 message (5 s)

	Logger *slog.Logger // slog.Default() when nil
}

func (c *Config) defaults() error {
	if err := checkDevice(c.Device); err != nil {
		return err
	}
	b, err := NormalizeBroker(c.Broker)
	if err != nil {
		return err
	}
	c.Broker = b
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("mqtt: a client certificate needs both a cert file and a key file")
	}
	for _, b := range c.Buttons {
		if err := checkButton(b.Name); err != nil {
			return err
		}
	}
	if c.DiscoveryPrefix == "" {
		c.DiscoveryPrefix = "homeassistant"
	}
	if c.MaxPayload <= 0 {
		c.MaxPayload = 64 << 10
	}
	t := TopicsFor(c.Device, c.DiscoveryPrefix)
	if c.ReplyPrefix == "" {
		c.ReplyPrefix = t.Reply
	}
	if err := checkReplyPrefix(c.ReplyPrefix, t); err != nil {
		return err
	}
	if c.RefusalRate <= 0 {
		c.RefusalRate = 1
	}
	if c.RefusalBurst <= 0 {
		c.RefusalBurst = 20
	}
	setDur := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	setDur(&c.ChunkInterval, 50*time.Millisecond)
	setDur(&c.ShutdownGrace, 10*time.Second)
	setDur(&c.BirthDelay, 3*time.Second)
	setDur(&c.StateInterval, 250*time.Millisecond)
	setDur(&c.RefusalReport, 10*time.Second)
	setDur(&c.RepublishInterval, 30*time.Second)
	setDur(&c.ConnectTimeout, 10*time.Second)
	setDur(&c.MaxReconnectInterval, 30*time.Second)
	setDur(&c.SlowConnect, 4*time.Second)
	setDur(&c.PublishTimeout, 5*time.Second)
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

// checkReplyPrefix refuses reply prefixes that would let a client make
// geist publish to its own command topics (an answer on geist/<dev>/ask
// would be asked again) or into Home Assistant's discovery tree.
func checkReplyPrefix(p string, t Topics) error {
	if !strings.HasSuffix(p, "/") || strings.HasPrefix(p, "$") || strings.ContainsAny(p, "+#\x00") || len(p) > maxTopicLen/2 {
		return fmt.Errorf("mqtt: reply prefix %q: want a topic prefix ending in / without wildcards or a leading $", p)
	}
	for _, own := range []string{t.Ask, t.PoolAsk, t.Cancel, t.CmdAsk, t.CmdCancel, t.CmdNewConversation, t.Status, t.State, t.Discovery, t.HAStatus} {
		if strings.HasPrefix(own, p) {
			return fmt.Errorf("mqtt: reply prefix %q covers geist's own topic %s", p, own)
		}
	}
	if dp := t.HAStatus[:strings.LastIndexByte(t.HAStatus, '/')+1]; strings.HasPrefix(p, dp) {
		return fmt.Errorf("mqtt: reply prefix %q is inside Home Assistant's discovery tree %s", p, dp)
	}
	return nil
}

// Core is what the MQTT front end asks of the appliance core
// (*appliance.Core implements it).
type Core interface {
	Submit(ctx context.Context, r appliance.Request, sink appliance.Sink) (*appliance.Ticket, error)
	Cancel(id string) bool
	CancelRunning() bool
	NewConversation(session string)
	DefaultSession() string
	Snapshot() appliance.State
	Watch(fn func(appliance.Event)) (stop func())
	Reject(src appliance.Source, code appliance.Code)
	Limits() appliance.Limits
	// SetLink and SetDegraded hear of the broker link: the State reports
	// it as Links["mqtt"] and, while it is down, as the degraded part
	// "broker".
	SetLink(name string, l appliance.Link)
	SetDegraded(p appliance.Part, reason string)
}

// Service is the MQTT front end of one device.
type Service struct {
	cfg    Config
	core   Core
	lim    Limits
	log    *slog.Logger
	t      Topics
	client paho.Client

	mu      sync.Mutex
	closing bool

	refusals *guard.Refusals
	// retainedSeen are the command topics a retained message was
	// reported on (once each).
	retainedSeen sync.Map
	askers       *guard.Refusals // refusals of well-formed requests, per asker
	// Home Assistant's birth messages: one republication pending at a
	// time, at least RepublishInterval apart (mu guards).
	republishPending bool
	lastRepublish    time.Time
	births           atomic.Int64 // birth messages received
	republished      atomic.Int64 // republications they caused

	dirty     chan struct{}
	stop      chan struct{} // closed when the service stops
	lost      chan struct{} // the connection was lost: connect again
	connected atomic.Bool
	link      LinkState      // under mu
	replies   sync.WaitGroup // goroutines waiting for an answer to publish
	bg        sync.WaitGroup
	unwatch   func()
}

// New returns a Service for core. It does not connect until Run.
func New(cfg Config, core Core) (*Service, error) {
	if core == nil {
		return nil, errors.New("mqtt: nil core")
	}
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	cl := core.Limits()
	t := TopicsFor(cfg.Device, cfg.DiscoveryPrefix)
	prefixes := []string{cfg.ReplyPrefix}
	if cfg.Pool {
		prefixes = append(prefixes, t.PoolReply)
	}
	log := cfg.Logger.With("device", cfg.Device)
	s := &Service{
		cfg:      cfg,
		core:     core,
		lim:      Limits{MaxPayload: cfg.MaxPayload, MaxTokens: cl.MaxTokens, DefaultTTL: cl.DefaultTTL, MaxTTL: cl.MaxTTL, ReplyPrefixes: prefixes},
		log:      log,
		t:        t,
		refusals: guard.NewRefusals(cfg.RefusalRate, cfg.RefusalBurst, cfg.RefusalReport, log),
		askers:   guard.NewAskerRefusals(1.0/60, 1, 4096, cfg.RefusalReport, log),
		dirty:    make(chan struct{}, 1),
		stop:     make(chan struct{}),
		lost:     make(chan struct{}, 1),
	}
	s.link = LinkState{Broker: cfg.Broker, Since: time.Now(), Reason: ReasonConnecting}
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
	// The service connects and reconnects itself (connectLoop): paho's
	// own retry loops keep the reason of a failure to themselves (a
	// debug line at most), so a wrong password looked like silence.
	o.SetAutoReconnect(false)
	o.SetConnectRetry(false)
	o.SetConnectTimeout(c.ConnectTimeout)
	o.SetKeepAlive(30 * time.Second)
	o.SetPingTimeout(10 * time.Second)
	o.SetWriteTimeout(c.PublishTimeout)
	// Every publication is bounded by its topic before paho reads it.
	o.SetCustomOpenConnectionFn(guard.Open(s.payloadLimit))
	o.SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) { s.onMessage(m.Topic(), m.Payload(), m.Retained()) })
	o.SetOnConnectHandler(func(paho.Client) { s.onConnect() })
	o.SetConnectionLostHandler(func(_ paho.Client, err error) {
		s.connected.Store(false)
		s.setLink(LinkState{Reason: ReasonLost, Err: errText(err)})
		s.log.Warn("mqtt connection lost, reconnecting", "broker", c.Broker, "err", err)
		select {
		case s.lost <- struct{}{}:
		default:
		}
	})
	return o, nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Link returns the state of the connection to the broker.
func (s *Service) Link() LinkState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.link
}

// setLink records the link's state (Broker and Since filled in) and
// tells the core.
func (s *Service) setLink(l LinkState) {
	l.Broker = s.cfg.Broker
	s.mu.Lock()
	if l.Connected != s.link.Connected || s.link.Since.IsZero() {
		l.Since = time.Now()
	} else {
		l.Since = s.link.Since
	}
	s.link = l
	s.mu.Unlock()
	detail := l.Reason
	if l.Err != "" {
		detail += ": " + l.Err
	}
	s.core.SetLink("mqtt", appliance.Link{Up: l.Connected, Since: l.Since, Target: l.Broker, Reason: l.Reason, Detail: detail, NextRetry: l.NextRetry})
	switch {
	case l.Reason == ReasonStopped: // shutting down: no news for the state
	case l.Connected:
		s.core.SetDegraded(appliance.PartBroker, "")
	case l.Reason != ReasonConnecting || l.Attempts > 0:
		// The reason in a few words only: safe for any client.
		s.core.SetDegraded(appliance.PartBroker, "not connected: "+l.Reason)
	}
}

// connectLoop connects to the broker and, whenever the connection is
// lost, again, until ctx ends. A failed attempt is logged at WARN with
// the reason the broker or the network gave and the time of the next
// one; attempts back off from 1 s to MaxReconnectInterval. An attempt
// that the broker leaves unanswered for SlowConnect is logged too, so a
// broker that drops packets shows within seconds of the start.
func (s *Service) connectLoop(ctx context.Context) {
	failed := 0
	for {
		select {
		case <-s.lost: // a loss already handled by connecting again
		default:
		}
		tok := s.client.Connect()
		slow := time.NewTimer(s.cfg.SlowConnect)
		select {
		case <-tok.Done():
		case <-slow.C:
			s.setLink(LinkState{Reason: ReasonConnecting, Attempts: failed})
			s.log.Warn("mqtt broker not answering yet, still trying", "broker", s.cfg.Broker, "waited", s.cfg.SlowConnect, "timeout", s.cfg.ConnectTimeout)
			select {
			case <-tok.Done():
			case <-ctx.Done():
				return
			}
		case <-ctx.Done():
			slow.Stop()
			return
		}
		slow.Stop()
		if err := tok.Error(); err != nil {
			failed++
			wait := backoff(failed, s.cfg.MaxReconnectInterval)
			next := time.Now().Add(wait)
			reason := classifyFor(s.cfg.Broker, err)
			s.setLink(LinkState{Reason: reason, Err: err.Error(), Attempts: failed, NextRetry: next})
			args := []any{"broker", s.cfg.Broker, "reason", reason, "err", err, "attempt", failed,
				"retry_in", wait.String(), "next_retry", next.Format("15:04:05")}
			if h := hint(reason); h != "" {
				args = append(args, "hint", h)
			}
			s.log.Warn("mqtt broker connection failed", args...)
			select {
			case <-time.After(wait):
				continue
			case <-ctx.Done():
				return
			}
		}
		// Connected (onConnect subscribed and announced); wait until the
		// connection is lost, then connect again at once.
		failed = 0
		select {
		case <-s.lost:
		case <-ctx.Done():
			return
		}
	}
}

// Run connects (retrying in the background until the broker answers) and
// serves until ctx ends, then shuts down: it stops taking asks, waits
// (up to ShutdownGrace) for the answers still being generated and
// publishes them, publishes the final state and offline, and
// disconnects. Stop the core first (or together): it ends the queued and
// running requests.
func (s *Service) Run(ctx context.Context) error {
	s.log.Info("mqtt connecting", "broker", s.cfg.Broker, "client_id", s.cfg.ClientID)
	s.setLink(LinkState{Reason: ReasonConnecting})
	s.unwatch = s.core.Watch(s.onEvent)
	s.bg.Add(2)
	go func() {
		defer s.bg.Done()
		s.connectLoop(ctx)
	}()
	go func() {
		defer s.bg.Done()
		s.statePublisher()
	}()
	<-ctx.Done()
	s.shutdown()
	return nil
}

func (s *Service) shutdown() {
	s.log.Info("mqtt shutting down: no new asks")
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	if s.connected.Load() {
		filters := []string{s.t.Ask, s.t.CmdAsk}
		if s.cfg.Pool {
			filters = append(filters, s.t.PoolShared)
		}
		s.client.Unsubscribe(filters...).WaitTimeout(s.cfg.PublishTimeout)
	}
	replied := make(chan struct{})
	go func() { s.replies.Wait(); close(replied) }()
	select {
	case <-replied:
	case <-time.After(s.cfg.ShutdownGrace):
		s.log.Warn("mqtt: answers still being generated are not published", "grace", s.cfg.ShutdownGrace)
	}
	s.unwatch()
	close(s.stop)
	if s.connected.Load() {
		s.publishState()
		s.client.Publish(s.t.Status, 1, true, "offline").WaitTimeout(s.cfg.PublishTimeout)
	}
	s.client.Disconnect(250)
	s.connected.Store(false)
	s.setLink(LinkState{Reason: ReasonStopped})
	s.bg.Wait()
	s.log.Info("mqtt stopped")
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
			// Connect again (connectLoop), which subscribes again.
			s.client.Disconnect(100)
			s.setLink(LinkState{Reason: "subscribe failed", Err: errText(tok.Error())})
			select {
			case s.lost <- struct{}{}:
			default:
			}
			return
		}
		select {
		case <-time.After(time.Second):
		case <-s.stop:
			return
		}
	}
	s.connected.Store(true)
	s.setLink(LinkState{Connected: true})
	s.log.Info("mqtt connected", "broker", s.cfg.Broker, "subscriptions", len(subs))
	s.publish(s.t.Status, 1, true, []byte("online"))
	s.announce()
}

// announce publishes discovery (when enabled) and the state.
func (s *Service) announce() {
	if s.cfg.Discovery {
		p, err := DiscoveryPayload(DiscoveryInfo{Device: s.cfg.Device, Version: s.cfg.Version,
			Model: s.cfg.Model, Prefix: s.cfg.DiscoveryPrefix, Buttons: s.cfg.Buttons})
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

// Payload limits of the topics other than the ask topics (MaxPayload).
const (
	maxCmdAsk   = 4 << 10 // Home Assistant's text entity: at most 255 characters
	maxCancel   = 1 << 10 // {"id": ...} with an id of at most 128 bytes
	maxCommand  = 64      // PRESS
	maxHAStatus = 64      // online, offline
)

// payloadLimit is the largest payload taken on topic: anything larger
// reaches onMessage as mqtt/guard's stand-in, never whole.
func (s *Service) payloadLimit(topic string) int {
	switch topic {
	case s.t.Ask, s.t.PoolAsk:
		return s.cfg.MaxPayload
	case s.t.CmdAsk:
		return min(maxCmdAsk, s.cfg.MaxPayload)
	case s.t.Cancel:
		return maxCancel
	case s.t.HAStatus:
		return maxHAStatus
	}
	return maxCommand
}

// onMessage runs on paho's goroutines: it decodes, enqueues and returns.
// A retained message on a command topic is old (it was stored by the
// broker before geist subscribed): it is not run, so a restart does not
// ask, cancel or republish again.
func (s *Service) onMessage(topic string, payload []byte, retained bool) {
	if retained {
		switch topic {
		case s.t.Ask, s.t.PoolAsk, s.t.Cancel, s.t.CmdAsk, s.t.CmdCancel, s.t.CmdNewConversation:
			// Once per topic: the broker sends it again on every
			// (re)subscription, and one line says all there is.
			if _, seen := s.retainedSeen.LoadOrStore(topic, true); !seen && s.refusals.Allow(topic) {
				s.log.Warn("retained message on a command topic ignored (clear it: mosquitto_pub -r -n -t "+topic+")", "topic", topic, "bytes", len(payload))
			}
			return
		case s.t.HAStatus:
			return // geist announces itself on every connect anyway
		}
	}
	if len(payload) == 0 {
		switch topic {
		case s.t.Ask, s.t.PoolAsk, s.t.Cancel, s.t.CmdAsk:
			// An empty publication clears a retained message (the hint
			// above): nothing was asked.
			s.log.Debug("empty message on a command topic ignored (a retained message cleared)", "topic", topic)
			return
		}
	}
	if size, _, over := guard.Oversized(payload); over && topic != s.t.Ask && topic != s.t.PoolAsk && topic != s.t.CmdAsk {
		s.core.Reject(appliance.SourceMQTT, appliance.CodeTooLong)
		if s.refusals.Allow(topic) {
			s.log.Info("message refused: payload too large", "topic", topic, "bytes", size, "limit", s.payloadLimit(topic))
			if topic == s.t.Cancel {
				s.reply("", s.t.Error, nil, errorf(CodeTooLong, "cancel: payload of %d bytes exceeds the limit of %d bytes", size, maxCancel), false)
			}
		}
		return
	}
	switch topic {
	case s.t.Ask:
		s.handleAsk(topic, payload, nil)
	case s.t.PoolAsk:
		s.handleAsk(topic, payload, nil)
	case s.t.Cancel:
		s.handleCancel(payload)
	case s.t.CmdAsk:
		sess := s.core.DefaultSession()
		s.handleAsk(topic, payload, func(r *Request) { r.Session = sess })
	case s.t.CmdCancel:
		s.log.Info("cancel button")
		s.core.CancelRunning()
		if s.cfg.OnCancel != nil {
			s.cfg.OnCancel()
		}
	case s.t.CmdNewConversation:
		s.core.NewConversation("")
	case s.t.HAStatus:
		if string(bytes.TrimSpace(payload)) == "online" {
			s.births.Add(1)
			s.scheduleRepublish()
		}
	default:
		s.log.Debug("mqtt message on an unexpected topic", "topic", topic)
	}
}

// scheduleRepublish republishes discovery and the state after Home
// Assistant's birth message, after a random delay (up to BirthDelay, so a
// room of devices does not answer at once) and at least
// RepublishInterval after the last one. Births while one is pending join
// it: a flood of them costs one republication per interval.
func (s *Service) scheduleRepublish() {
	s.mu.Lock()
	if s.closing || s.republishPending {
		s.mu.Unlock()
		return
	}
	s.republishPending = true
	d := time.Duration(rand.Int64N(int64(s.cfg.BirthDelay)))
	if wait := time.Until(s.lastRepublish.Add(s.cfg.RepublishInterval)); wait > d {
		d = wait
	}
	s.bg.Add(1) // under mu: shutdown sets closing before it waits on bg
	s.mu.Unlock()
	s.log.Info("home assistant is online: republishing discovery", "after", d.Round(time.Millisecond))
	go func() {
		defer s.bg.Done()
		select {
		case <-time.After(d):
			s.mu.Lock()
			s.republishPending, s.lastRepublish = false, time.Now()
			s.mu.Unlock()
			s.republished.Add(1)
			s.announce()
		case <-s.stop:
		}
	}()
}

// Births returns how many Home Assistant birth messages arrived and how
// many republications they caused.
func (s *Service) Births() (births, republished int64) {
	return s.births.Load(), s.republished.Load()
}

func (s *Service) handleAsk(topic string, payload []byte, adjust func(*Request)) {
	var req Request
	var perr *Error
	if size, head, over := guard.Oversized(payload); over {
		lim := s.lim
		lim.MaxPayload = s.payloadLimit(topic)
		req, perr = TooLong(head, size, lim)
	} else {
		req, perr = Parse(payload, s.lim, time.Now())
	}
	if perr != nil {
		s.refuse(topic, req, perr)
		return
	}
	if adjust != nil {
		adjust(&req)
	}
	s.mu.Lock()
	closing := s.closing
	if !closing {
		s.replies.Add(1) // under mu: shutdown sets closing before it waits
	}
	s.mu.Unlock()
	if closing {
		s.refuse(topic, req, errorf(CodeBusy, "geist is shutting down"))
		return
	}
	answer := s.answerTopic(req)
	var ch *chunker
	var sink appliance.Sink
	if req.Stream {
		stream := answer + "/stream"
		ch = newChunker(s.cfg.ChunkInterval, time.Now, func(c Chunk) {
			c.ID = req.ID
			b, _ := json.Marshal(c)
			s.send(stream, 0, false, b)
		})
		sink = ch.add
	}
	tk, err := s.core.Submit(context.Background(), req.core(), sink)
	if err != nil {
		s.replies.Done()
		// The core counted it. Every asker hears it (busy above all), up
		// to one refusal a minute each; the log line stays per topic.
		if s.refusals.Allow(topic) {
			s.log.Info("request refused", "id", req.ID, "err", err)
		}
		if s.allowRefusal(topic, req) {
			s.reply(req.ID, answer, nil, contractError(err), false)
		}
		return
	}
	s.log.Debug("request queued", "id", req.ID, "stream", req.Stream)
	// Handlers never block: the answer is published when it is complete.
	go func() {
		defer s.replies.Done()
		o := tk.Outcome()
		if ch != nil && o.Err == nil && !o.Replayed {
			ch.flush()
		}
		s.deliver(answer, o)
	}()
}

// refuse counts a request refused before it reached the core and answers
// it, within the refusal rate of its topic.
func (s *Service) refuse(topic string, req Request, e *Error) {
	s.core.Reject(appliance.SourceMQTT, appliance.Code(e.Code))
	if !s.refusals.Allow(topic) {
		return
	}
	s.log.Info("request refused", "topic", topic, "id", req.ID, "code", e.Code, "err", e.Message)
	s.reply(req.ID, s.answerTopic(req), nil, e, false)
}

// allowRefusal says whether the core's refusal of a well-formed req (busy
// above all) is answered: a request with an id of its own once a minute
// per answer topic (issue 22: of 1180 asks at 20/s, 956 were refused busy
// and 79 answered); one without shares its topic's bucket. Malformed
// messages keep their topic's rate (refuse).
func (s *Service) allowRefusal(topic string, req Request) bool {
	if req.ID == "" || req.Generated {
		return s.refusals.Allow(topic + "\x00answer")
	}
	return s.askers.Allow(s.answerTopic(req))
}

// core is req as a request of the appliance core.
func (r *Request) core() appliance.Request {
	a := appliance.Request{ID: r.ID, Generated: r.Generated, Source: appliance.SourceMQTT, Text: r.Text,
		System: r.System, Session: r.Session, TTL: r.TTL, Constraint: r.Constraint, Tools: r.Tools, Model: r.Model}
	a.MaxTokens = r.MaxTokens
	a.Temperature, a.Think = r.Temperature, r.Think
	for _, m := range r.Messages {
		a.Messages = append(a.Messages, appliance.Message{Role: m.Role, Content: m.Content, ToolCalls: m.ToolCalls, ToolName: m.ToolName})
	}
	return a
}

func (s *Service) handleCancel(payload []byte) {
	id, e := ParseCancel(payload)
	if e != nil {
		s.refuseCancel(e)
		return
	}
	s.core.Cancel(id)
}

func (s *Service) refuseCancel(e *Error) {
	if s.refusals.Allow(s.t.Cancel) {
		s.log.Info("cancel refused", "err", e.Message)
		s.reply("", s.t.Error, nil, e, false)
	}
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

// onEvent follows the core: every change may change the state, and the
// answers to the device's own triggers (buttons, push-to-talk) are
// published on the answer topic, as answer events and as the last answer.
func (s *Service) onEvent(ev appliance.Event) {
	s.markDirty()
	if ev.Kind != appliance.EventFinished {
		return
	}
	if src := ev.Outcome.Source; src != appliance.SourceButton && src != appliance.SourceVoice {
		return
	}
	// Watchers return promptly: the publication waits for the broker on
	// a goroutine of its own.
	o := *ev.Outcome
	s.mu.Lock()
	closing := s.closing
	if !closing {
		s.replies.Add(1) // under mu: shutdown sets closing before it waits
	}
	s.mu.Unlock()
	if closing {
		return
	}
	go func() {
		defer s.replies.Done()
		s.deliver(s.t.Answer, o)
	}()
}

// deliver publishes an outcome on topic, waiting (up to PublishTimeout)
// for the broker to take it.
func (s *Service) deliver(topic string, o appliance.Outcome) {
	if o.Err != nil {
		s.reply(o.ID, topic, nil, &Error{Code: string(o.Err.Code), Message: o.Err.Message}, true)
		return
	}
	a := &Answer{ID: o.ID, Text: o.Text, Thinking: o.Thinking, ToolCalls: o.Calls, Done: true, Session: o.Session, Usage: usageOf(o.Usage), ServedBy: s.cfg.Device}
	if w := o.Warning; w != nil {
		a.Warning = &Error{Code: string(w.Code), Message: w.Message}
	}
	s.reply(o.ID, topic, a, nil, true)
}

// reply publishes the answer a or the error e of request id on topic,
// and for answers the last-answer sensor and the answer event. With
// wait it waits for the broker to take them (up to PublishTimeout); paho
// handlers never wait.
func (s *Service) reply(id, topic string, a *Answer, e *Error, wait bool) {
	pub := func(topic string, payload []byte) {
		if wait {
			s.publish(topic, 1, false, payload)
		} else {
			s.send(topic, 1, false, payload)
		}
	}
	if e != nil {
		b, _ := json.Marshal(ErrorReply{ID: id, Error: e, ServedBy: s.cfg.Device})
		pub(topic, b)
		if id != "" {
			ev, _ := json.Marshal(map[string]any{"event_type": "error", "id": id, "code": e.Code, "message": e.Message})
			s.send(s.t.Event, 0, false, ev)
		}
		return
	}
	b, _ := json.Marshal(a)
	pub(topic, b)
	last, _ := json.Marshal(map[string]any{"id": a.ID, "text": a.Text, "session": a.Session})
	s.send(s.t.LastAnswer, 0, true, last)
	ev, _ := json.Marshal(map[string]any{"event_type": "answer", "id": a.ID, "text": sentence.Cut(a.Text, 1024), "session": a.Session})
	s.send(s.t.Event, 0, false, ev)
}

// send publishes without waiting.
func (s *Service) send(topic string, qos byte, retain bool, payload []byte) {
	s.client.Publish(topic, qos, retain, payload)
}

// PublishPress publishes a press of one of Config.Buttons (event type
// "press", "long_press", "double_press") for its Home Assistant event
// entity, without waiting; nothing happens while disconnected.
func (s *Service) PublishPress(button, eventType string) {
	if !s.connected.Load() {
		return
	}
	s.client.Publish(ButtonTopic(s.cfg.Device, button), 0, false, ButtonPayload(button, eventType))
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
	State          string  `json:"state"` // idle, generating, thinking (in a thinking block), stopping
	Busy           bool    `json:"busy"`
	Queue          int     `json:"queue"`
	Model          string  `json:"model"`
	TokS           float64 `json:"tok_s"`
	AcceptanceRate float64 `json:"acceptance_rate"`
	// Speculative decoding over all answers: tokens per model pass, the
	// mean size and accepted depth of the drafted trees, and each
	// drafter's acceptance.
	TokensPerPass     float64            `json:"tokens_per_pass"`
	TreeSize          float64            `json:"tree_size"`
	AcceptedDepth     float64            `json:"accepted_depth"`
	DrafterAcceptance map[string]float64 `json:"drafter_acceptance,omitempty"`
	CacheHitRate      float64            `json:"cache_hit_rate"`
	Served            int64              `json:"served"`
	Refused           int64              `json:"refused"`
	Cancelled         int64              `json:"cancelled"`
	Failed            int64              `json:"failed"`
	Session           string             `json:"session"` // the dashboard conversation
	Version           string             `json:"version"`
	// Degraded names the parts working less than configured (storage,
	// broker, gpio) and why; absent when everything works.
	Degraded map[string]string `json:"degraded,omitempty"`
	// GeneratedTokens counts the tokens of all answers; ThinkingTokens
	// those of them in a thinking block (never in an answer's text).
	GeneratedTokens int64 `json:"generated_tokens"`
	ThinkingTokens  int64 `json:"thinking_tokens"`
	// RefusalsHeld counts the refusals not answered (rate limits per
	// topic and per asker) since the start: above 0, some senders heard
	// nothing back.
	RefusalsHeld int64 `json:"refusals_held"`
	// While a request's prompt is read (before its first token):
	// prompt_done of its prompt_total tokens; absent otherwise.
	PromptDone  int `json:"prompt_done,omitempty"`
	PromptTotal int `json:"prompt_total,omitempty"`
}

// CurrentState returns the state as it would be published now.
func (s *Service) CurrentState() State {
	c := s.core.Snapshot()
	st := State{State: c.State, Busy: c.Busy, Queue: c.Queue, Model: s.cfg.Model, TokS: appliance.Round1(c.LastTokS),
		AcceptanceRate: c.AcceptanceRate, TokensPerPass: round2(c.TokensPerPass), TreeSize: round2(c.MeanTreeSize),
		AcceptedDepth: round2(c.MeanAcceptedDepth), CacheHitRate: c.CacheHitRate, Served: c.Served, Refused: c.Refused,
		Cancelled: c.Cancelled, Failed: c.Failed, Session: c.Session, Version: s.cfg.Version, Degraded: degraded(c.Degraded),
		GeneratedTokens: c.GeneratedTokens, ThinkingTokens: c.ThinkingTokens, RefusalsHeld: s.askers.Held()}
	for _, j := range c.Jobs {
		if j.State == "running" && j.Tokens == 0 && j.PromptTotal > 0 {
			st.PromptDone, st.PromptTotal = j.PromptDone, j.PromptTotal
			break
		}
	}
	for name, d := range c.Drafters {
		if d.Drafted == 0 {
			continue
		}
		if st.DrafterAcceptance == nil {
			st.DrafterAcceptance = map[string]float64{}
		}
		st.DrafterAcceptance[name] = round2(float64(d.Accepted) / float64(d.Drafted))
	}
	return st
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

func degraded(m map[appliance.Part]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for p, why := range m {
		out[string(p)] = why
	}
	return out
}

func (s *Service) publishState() {
	b, _ := json.Marshal(s.CurrentState())
	s.publish(s.t.State, 1, true, b)
}
