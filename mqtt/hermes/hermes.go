// Package hermes bridges geist to voice pipelines that speak the Hermes
// MQTT protocol (Rhasspy 2.5 and compatibles): transcripts come in on
// hermes/asr/textCaptured, or, with a dialogue manager, on
// hermes/dialogueManager/intentNotRecognized; answers go out on
// hermes/tts/say one sentence at a time while they are generated, so speech
// starts before generation ends; dialogue sessions are ended with
// hermes/dialogueManager/endSession.
//
// Paho handlers only decode, filter and enqueue; answers are generated and
// spoken by Run's goroutine.
package hermes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/sentence"
	"github.com/geisten/geist/mqtt/guard"
)

// Hermes topics.
const (
	TopicTextCaptured        = "hermes/asr/textCaptured"
	TopicIntentNotRecognized = "hermes/dialogueManager/intentNotRecognized"
	TopicEndSession          = "hermes/dialogueManager/endSession"
	TopicSessionEnded        = "hermes/dialogueManager/sessionEnded"
	TopicSay                 = "hermes/tts/say"
	TopicSayFinished         = "hermes/tts/sayFinished"
)

// Where transcripts come from.
const (
	// ModeASR answers every hermes/asr/textCaptured: for setups without a
	// dialogue manager, or where geist should answer everything.
	ModeASR = "asr"
	// ModeDialogue answers what the dialogue manager reports as
	// hermes/dialogueManager/intentNotRecognized (start sessions with
	// sendIntentNotRecognized: true), so recognized intents stay with
	// their handlers; the session is ended after the answer.
	ModeDialogue = "dialogue"
)

// Config configures the bridge.
type Config struct {
	// Broker is the Hermes broker's URL for the caller to connect to with
	// Connect (Rhasspy's internal broker, tcp://host:12183); empty means
	// the daemon's own MQTT client (Subscribe and Run).
	Broker string `json:"broker,omitempty" yaml:"broker,omitempty" toml:"broker,omitempty"`
	// Mode is ModeASR (default) or ModeDialogue.
	Mode string `json:"mode,omitempty" yaml:"mode,omitempty" toml:"mode,omitempty"`
	// Sites lists the siteIds to answer; empty answers every site.
	Sites []string `json:"sites,omitempty" yaml:"sites,omitempty" toml:"sites,omitempty"`
	// Lang is sent with tts/say when set ("en", "de", …).
	Lang string `json:"lang,omitempty" yaml:"lang,omitempty" toml:"lang,omitempty"`
	// SessionPrefix prefixes geist session names (default "hermes"): a
	// Hermes session "abc" is the geist session "hermes-abc"; without a
	// Hermes session id, the site is used ("hermes-kitchen").
	SessionPrefix string `json:"session_prefix,omitempty" yaml:"session_prefix,omitempty" toml:"session_prefix,omitempty"`
	// PerSite keeps one geist session per site across Hermes sessions, so
	// follow-up questions after a new wake word keep their context.
	PerSite bool `json:"per_site,omitempty" yaml:"per_site,omitempty" toml:"per_site,omitempty"`
	// NoPacing sends every sentence as soon as it is complete instead of
	// waiting for the previous one's hermes/tts/sayFinished.
	NoPacing bool `json:"no_pacing,omitempty" yaml:"no_pacing,omitempty" toml:"no_pacing,omitempty"`
	// SayTimeout bounds the wait for sayFinished (default 30s); after one
	// timeout the rest of that answer is sent without waiting.
	SayTimeout time.Duration `json:"say_timeout,omitempty" yaml:"say_timeout,omitempty" toml:"say_timeout,omitempty"`
	// AnswerInEndSession (dialogue mode) speaks the whole answer through
	// endSession's text instead of streaming tts/say sentences: simpler
	// for dialogue managers that must speak everything themselves, but
	// speech starts only when generation ends.
	AnswerInEndSession bool `json:"answer_in_end_session,omitempty" yaml:"answer_in_end_session,omitempty" toml:"answer_in_end_session,omitempty"`
	// Queue bounds the transcripts waiting to be answered (default 8).
	Queue int `json:"queue,omitempty" yaml:"queue,omitempty" toml:"queue,omitempty"`
	// QoS for subscriptions and publications (default 1).
	QoS *byte `json:"qos,omitempty" yaml:"qos,omitempty" toml:"qos,omitempty"`
	// MaxPayload bounds a transcript message (textCaptured,
	// intentNotRecognized) in bytes (default 64 KiB: a minute of speech
	// with Rhasspy's per-token details is a few KiB); larger ones are
	// dropped unread. Other Hermes messages are bounded to 4 KiB.
	MaxPayload int `json:"max_payload,omitempty" yaml:"max_payload,omitempty" toml:"max_payload,omitempty"`
}

// maxControl bounds the Hermes messages that carry no transcript
// (sayFinished, sessionEnded).
const maxControl = 4 << 10

// logText bounds the transcript text a log line shows.
const logText = 200

// Answerer generates an answer to question in the geist session, passing
// the answer's text to onText as it streams, and returns when the answer
// is complete (or ctx is cancelled). It is called from Run's goroutine,
// never from a paho handler. CoreAnswerer asks the appliance core.
type Answerer interface {
	Answer(ctx context.Context, session, question string, onText func([]byte) error) error
}

// Core is what the bridge asks of the appliance core (*appliance.Core
// implements it).
type Core interface {
	Submit(ctx context.Context, r appliance.Request, sink appliance.Sink) (*appliance.Ticket, error)
}

// CoreAnswerer returns an Answerer that asks core, as requests of the
// Hermes source: they share the core's queue with every other front end,
// and their answers are spoken by the voice pipeline, not published on
// geist's answer topic.
func CoreAnswerer(core Core) Answerer { return coreAnswerer{core} }

type coreAnswerer struct{ core Core }

func (a coreAnswerer) Answer(ctx context.Context, session, question string, onText func([]byte) error) error {
	tk, err := a.core.Submit(ctx, appliance.Request{Source: appliance.SourceHermes, Session: session, Text: question},
		func(p appliance.Piece) { // spoken: content only
			if p.Content != "" {
				onText([]byte(p.Content))
			}
		})
	if err != nil {
		return err
	}
	if o := tk.Outcome(); o.Err != nil {
		return o.Err
	}
	return nil
}

// Bridge is a Hermes bridge. Create it with New, subscribe with Subscribe
// (from the client's on-connect handler) and answer with Run.
type Bridge struct {
	cfg  Config
	ans  Answerer
	log  *slog.Logger
	qos  byte
	jobs chan job

	refused *guard.Refusals // warnings about dropped messages, per topic

	mu       sync.Mutex
	finished map[string]chan struct{} // say id → closed on sayFinished
	cancel   context.CancelFunc       // cancels the answer in progress
	current  string                   // its Hermes session id (dialogue mode)
	seq      int
}

type job struct {
	text, siteID, sessionID string
	dialogue                bool
}

// New checks cfg and returns a Bridge that answers through a.
func New(cfg Config, a Answerer, log *slog.Logger) (*Bridge, error) {
	if a == nil {
		return nil, errors.New("hermes: nil answerer")
	}
	switch cfg.Mode {
	case "":
		cfg.Mode = ModeASR
	case ModeASR, ModeDialogue:
	default:
		return nil, fmt.Errorf("hermes: mode %q (want %q or %q)", cfg.Mode, ModeASR, ModeDialogue)
	}
	if cfg.SessionPrefix == "" {
		cfg.SessionPrefix = "hermes"
	}
	if cfg.SayTimeout <= 0 {
		cfg.SayTimeout = 30 * time.Second
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 8
	}
	if cfg.MaxPayload <= 0 {
		cfg.MaxPayload = 64 << 10
	}
	qos := byte(1)
	if cfg.QoS != nil {
		if *cfg.QoS > 2 {
			return nil, fmt.Errorf("hermes: qos %d", *cfg.QoS)
		}
		qos = *cfg.QoS
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "hermes")
	return &Bridge{cfg: cfg, ans: a, log: log, qos: qos, refused: guard.NewRefusals(1, 10, 10*time.Second, log),
		jobs: make(chan job, cfg.Queue), finished: map[string]chan struct{}{}}, nil
}

// PayloadLimit is the largest payload the bridge takes on topic; Connect
// applies it before paho reads a message (mqtt/guard).
func (b *Bridge) PayloadLimit(topic string) int {
	switch topic {
	case TopicTextCaptured, TopicIntentNotRecognized:
		return b.cfg.MaxPayload
	}
	return maxControl
}

// Topics returns the topics the bridge subscribes to.
func (b *Bridge) Topics() []string {
	t := []string{TopicSayFinished}
	if b.cfg.Mode == ModeDialogue {
		return append(t, TopicIntentNotRecognized, TopicSessionEnded)
	}
	return append(t, TopicTextCaptured)
}

// Subscribe subscribes c to the bridge's topics. Call it from the client's
// on-connect handler so that subscriptions survive reconnects (with a
// clean session the broker forgets them). It does not block.
func (b *Bridge) Subscribe(c paho.Client) {
	filters := map[string]byte{}
	for _, t := range b.Topics() {
		filters[t] = b.qos
	}
	tok := c.SubscribeMultiple(filters, b.handle)
	go func() {
		if !tok.WaitTimeout(10 * time.Second) {
			b.log.Warn("subscribe: no answer from the broker", "topics", b.Topics())
		} else if err := tok.Error(); err != nil {
			b.log.Error("subscribe failed", "err", err)
		}
	}()
}

// OnConnect returns an on-connect handler that subscribes and then calls
// next (if not nil): opts.SetOnConnectHandler(b.OnConnect(opts.OnConnect)).
func (b *Bridge) OnConnect(next paho.OnConnectHandler) paho.OnConnectHandler {
	return func(c paho.Client) {
		b.Subscribe(c)
		if next != nil {
			next(c)
		}
	}
}

// incoming is the union of the fields of textCaptured and
// intentNotRecognized.
type incoming struct {
	Text      string  `json:"text"`
	Input     string  `json:"input"`
	SiteID    string  `json:"siteId"`
	SessionID *string `json:"sessionId"`
	ID        *string `json:"id"`
	// sessionEnded
	Termination *struct {
		Reason string `json:"reason"`
	} `json:"termination"`
}

// handle runs in paho's goroutine: bound, decode, filter, enqueue, return.
// A retained transcript (stored by the broker before the bridge
// subscribed) is old: it is not answered.
func (b *Bridge) handle(_ paho.Client, m paho.Message) {
	topic, payload := m.Topic(), m.Payload()
	if size, _, over := guard.Oversized(payload); over || len(payload) > b.PayloadLimit(topic) {
		if !over {
			size = int64(len(payload))
		}
		if b.refused.Allow(topic) {
			b.log.Warn("message dropped: payload too large", "topic", topic, "bytes", size, "limit", b.PayloadLimit(topic))
		}
		return
	}
	if m.Retained() && topic != TopicSayFinished {
		if b.refused.Allow(topic) {
			b.log.Warn("retained message ignored (clear it: mosquitto_pub -r -n -t TOPIC)", "topic", topic)
		}
		return
	}
	var in incoming
	if err := json.Unmarshal(payload, &in); err != nil {
		if b.refused.Allow(topic) {
			b.log.Warn("undecodable message", "topic", topic, "bytes", len(payload), "err", err)
		}
		return
	}
	if m.Topic() == TopicSayFinished {
		if in.ID != nil {
			b.mu.Lock()
			if ch, ok := b.finished[*in.ID]; ok {
				close(ch)
				delete(b.finished, *in.ID)
			}
			b.mu.Unlock()
		}
		return
	}
	if m.Topic() == TopicSessionEnded {
		// The dialogue manager gave up on a session we are answering
		// (timeout, aborted by the user): stop generating for it.
		if in.SessionID != nil && in.Termination != nil && in.Termination.Reason != "nominal" {
			b.mu.Lock()
			if b.cancel != nil && b.current == *in.SessionID {
				b.log.Info("dialogue session ended by the dialogue manager; answer cancelled", "session", *in.SessionID, "reason", in.Termination.Reason)
				b.cancel()
			}
			b.mu.Unlock()
		}
		return
	}
	if in.SiteID == "" {
		in.SiteID = "default"
	}
	if len(b.cfg.Sites) > 0 && !slices.Contains(b.cfg.Sites, in.SiteID) {
		b.log.Debug("other site ignored", "site", in.SiteID)
		return
	}
	j := job{siteID: in.SiteID, dialogue: m.Topic() == TopicIntentNotRecognized}
	if in.SessionID != nil {
		j.sessionID = *in.SessionID
	}
	j.text = in.Text
	if j.dialogue {
		j.text = in.Input
	}
	select {
	case b.jobs <- j:
	default:
		if b.refused.Allow("busy") {
			b.log.Warn("busy: transcript dropped", "site", j.siteID, "text", clip(j.text))
		}
	}
}

// Session returns the geist session name for a Hermes site and session.
func (b *Bridge) Session(siteID, sessionID string) string {
	if b.cfg.PerSite || sessionID == "" {
		return b.cfg.SessionPrefix + "-" + siteID
	}
	return b.cfg.SessionPrefix + "-" + sessionID
}

// Cancel stops the answer in progress: generation is cancelled, sentences
// not yet sent are dropped (a dialogue session is still ended).
func (b *Bridge) Cancel() {
	b.mu.Lock()
	c := b.cancel
	b.mu.Unlock()
	if c != nil {
		c()
	}
}

// Run answers transcripts, publishing through c, until ctx is done.
func (b *Bridge) Run(ctx context.Context, c paho.Client) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case j := <-b.jobs:
			b.answer(ctx, c, j)
		}
	}
}

// Connect creates a client from opts that subscribes on every connect,
// connects (retrying in the background when the broker is down), and
// answers until ctx is done; then it disconnects. Every message is
// bounded by PayloadLimit before paho reads it (Connect sets the options'
// connection function: mqtt/guard's).
func (b *Bridge) Connect(ctx context.Context, opts *paho.ClientOptions) error {
	opts.SetCustomOpenConnectionFn(guard.Open(b.PayloadLimit))
	opts.SetOnConnectHandler(b.OnConnect(opts.OnConnect))
	opts.SetConnectRetry(true).SetAutoReconnect(true)
	c := paho.NewClient(opts)
	tok := c.Connect()
	go func() {
		<-tok.Done()
		if err := tok.Error(); err != nil {
			b.log.Error("connect failed", "err", err)
		}
	}()
	defer c.Disconnect(250)
	return b.Run(ctx, c)
}

func (b *Bridge) answer(ctx context.Context, c paho.Client, j job) {
	if j.text == "" {
		if j.dialogue {
			b.publish(c, TopicEndSession, map[string]any{"sessionId": j.sessionID, "siteId": j.siteID})
		}
		return
	}
	session := b.Session(j.siteID, j.sessionID)
	b.log.Info("question", "site", j.siteID, "session", session, "text", clip(j.text))
	actx, cancel := context.WithCancel(ctx)
	b.mu.Lock()
	b.cancel = cancel
	if j.dialogue {
		b.current = j.sessionID
	}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.cancel, b.current = nil, ""
		b.mu.Unlock()
		cancel()
	}()

	whole := j.dialogue && b.cfg.AnswerInEndSession
	var full []byte
	sentences := make(chan string, 1024)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		pace := !b.cfg.NoPacing
		for s := range sentences {
			if actx.Err() != nil {
				continue // drain after a cancel
			}
			if !b.say(actx, c, j, s, pace) {
				pace = false
			}
		}
	}()
	var sp sentence.Splitter
	err := b.ans.Answer(actx, session, j.text, func(p []byte) error {
		if whole {
			full = append(full, p...)
			return nil
		}
		for _, s := range sp.Write(string(p)) {
			select {
			case sentences <- s:
			default:
				b.log.Warn("sentence queue full; sentence dropped")
			}
		}
		return nil
	})
	if rest := sp.Flush(); rest != "" && !whole {
		sentences <- rest
	}
	close(sentences)
	<-sent
	switch {
	case err == nil:
	case actx.Err() != nil:
		b.log.Info("answer cancelled", "session", session)
	default:
		b.log.Error("answer failed", "session", session, "err", err)
	}
	if j.dialogue {
		end := map[string]any{"sessionId": j.sessionID, "siteId": j.siteID}
		if whole && err == nil {
			end["text"] = string(full)
		}
		b.publish(c, TopicEndSession, end)
	}
}

// say publishes one sentence and, when pacing, waits for its sayFinished.
// It returns false when the wait timed out.
func (b *Bridge) say(ctx context.Context, c paho.Client, j job, text string, pace bool) bool {
	b.mu.Lock()
	b.seq++
	id := "geist-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.Itoa(b.seq)
	var done chan struct{}
	if pace {
		done = make(chan struct{})
		b.finished[id] = done
	}
	b.mu.Unlock()
	msg := map[string]any{"text": text, "id": id, "siteId": j.siteID}
	if j.sessionID != "" {
		msg["sessionId"] = j.sessionID
	}
	if b.cfg.Lang != "" {
		msg["lang"] = b.cfg.Lang
	}
	b.publish(c, TopicSay, msg)
	if !pace {
		return true
	}
	t := time.NewTimer(b.cfg.SayTimeout)
	defer t.Stop()
	defer func() {
		b.mu.Lock()
		delete(b.finished, id)
		b.mu.Unlock()
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return true
	case <-t.C:
		b.log.Warn("no sayFinished; sending the rest without waiting", "timeout", b.cfg.SayTimeout)
		return false
	}
}

func (b *Bridge) publish(c paho.Client, topic string, v any) {
	payload, err := json.Marshal(v)
	if err != nil {
		b.log.Error("encode", "topic", topic, "err", err)
		return
	}
	tok := c.Publish(topic, b.qos, false, payload)
	if !tok.WaitTimeout(5 * time.Second) {
		b.log.Warn("publish: no acknowledgement", "topic", topic)
	} else if err := tok.Error(); err != nil {
		b.log.Warn("publish failed", "topic", topic, "err", err)
	}
}

// clip shortens a transcript for a log line.
func clip(s string) string {
	if len(s) <= logText {
		return s
	}
	return sentence.Cut(s, logText) + fmt.Sprintf("…(%d bytes)", len(s))
}
