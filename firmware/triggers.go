package firmware

import (
	"context"
	"log/slog"
	"sync"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/firmware/voice"
)

// Core is what the device asks of the appliance core (*appliance.Core
// implements it).
type Core interface {
	Submit(ctx context.Context, r appliance.Request, sink appliance.Sink) (*appliance.Ticket, error)
	CancelRunning() bool
	NewConversation(session string)
	DefaultSession() string
	Watch(fn func(appliance.Event)) (stop func())
}

// EventTypes returns the press kinds a button reports as events: press
// and long_press, and double_press when double presses are detected; none
// for a push-to-talk button.
func EventTypes(b Button) []string {
	if b.Talk {
		return nil
	}
	t := []string{ShortPress.String(), LongPress.String()}
	if b.DoubleEnabled() {
		t = append(t, DoublePress.String())
	}
	return t
}

// TriggersConfig configures Triggers.
type TriggersConfig struct {
	Core    Core
	Speaker *voice.Speaker // speaks the answers; nil: not spoken
	LEDs    *LEDs          // blink the error of a refused ask; nil: none
	// OnPress, when set, hears every button press (the MQTT front end
	// publishes them for Home Assistant's event entities). It must return
	// promptly.
	OnPress func(button string, kind Press)
	Logger  *slog.Logger
}

// Triggers carry out the device's triggers on the appliance core: button
// presses (it implements Actions) and push-to-talk transcripts (Voice).
// Answers are spoken sentence by sentence while they are generated;
// every asker shares the core's queue, so a full queue refuses a press
// like any request (the error LED blinks).
type Triggers struct {
	cfg   TriggersConfig
	log   *slog.Logger
	mu    sync.Mutex
	stops []func()
	wg    sync.WaitGroup // goroutines waiting for answers
}

// NewTriggers returns Triggers for cfg.
func NewTriggers(cfg TriggersConfig) *Triggers {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Triggers{cfg: cfg, log: log}
}

// OnCancel adds outputs that a cancel press stops besides the running
// generation and the speech (a push-to-talk recording, the Hermes
// answer being spoken).
func (t *Triggers) OnCancel(stop ...func()) {
	t.mu.Lock()
	t.stops = append(t.stops, stop...)
	t.mu.Unlock()
}

// Ask implements Actions: it asks prompt in session (empty: the core's
// default, the dashboard's conversation) as a button and returns at once.
func (t *Triggers) Ask(ctx context.Context, session, prompt string) {
	t.ask(ctx, appliance.SourceButton, session, prompt)
}

// Voice returns the asker for push-to-talk transcripts (voice.Asker).
func (t *Triggers) Voice() voice.Asker { return voiceAsker{t} }

type voiceAsker struct{ t *Triggers }

func (v voiceAsker) Ask(ctx context.Context, session, prompt string) {
	v.t.ask(ctx, appliance.SourceVoice, session, prompt)
}

func (t *Triggers) ask(ctx context.Context, src appliance.Source, session, prompt string) {
	core := t.cfg.Core
	if session == "" {
		session = core.DefaultSession()
	}
	var st *voice.Stream
	var sink appliance.Sink
	if t.cfg.Speaker != nil {
		st = t.cfg.Speaker.Stream()
		sink = func(p appliance.Piece) { st.Write([]byte(p.Content)) } // spoken: content only
	}
	tk, err := core.Submit(ctx, appliance.Request{Source: src, Text: prompt, Session: session}, sink)
	if err != nil {
		t.log.Warn("ask refused", "source", src, "session", session, "err", err)
		if t.cfg.LEDs != nil {
			t.cfg.LEDs.Fail(err)
		}
		return
	}
	t.log.Info("ask", "source", src, "session", session, "prompt", prompt)
	t.wg.Go(func() {
		o := tk.Outcome()
		if o.Err != nil {
			t.log.Info("ask ended without an answer", "source", src, "session", session, "code", o.Err.Code, "err", o.Err.Message)
			return
		}
		t.log.Info("answer", "source", src, "session", session, "text", o.Text)
		if st != nil {
			st.Close() // speak the rest
		}
	})
}

// Cancel implements Actions: it cancels the running generation (from any
// source), the speech and the outputs added with OnCancel.
func (t *Triggers) Cancel(context.Context) {
	ran := t.cfg.Core.CancelRunning()
	t.StopOutputs()
	t.log.Info("cancel", "was_running", ran)
}

// StopOutputs stops the speech and the outputs added with OnCancel, not
// the generation (for Home Assistant's Cancel button, which cancels that
// itself).
func (t *Triggers) StopOutputs() {
	if t.cfg.Speaker != nil {
		t.cfg.Speaker.Cancel()
	}
	t.mu.Lock()
	stops := append([]func(){}, t.stops...)
	t.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
}

// NewConversation implements Actions: it forgets session (empty: starts
// a new dashboard conversation).
func (t *Triggers) NewConversation(_ context.Context, session string) {
	t.cfg.Core.NewConversation(session)
}

// Event implements Actions: it logs the press and passes it to OnPress.
func (t *Triggers) Event(_ context.Context, button string, kind Press) {
	t.log.Info("button", "button", button, "press", kind.String())
	if t.cfg.OnPress != nil {
		t.cfg.OnPress(button, kind)
	}
}

// Wait waits for the answers being waited for.
func (t *Triggers) Wait() { t.wg.Wait() }

// Follow shows every generation of core, whichever front end asked, on
// the LEDs: busy while it runs, then ready, or a blinking error when it
// failed (a cancellation is no failure). Call stop to end it.
func (l *LEDs) Follow(core interface {
	Watch(fn func(appliance.Event)) (stop func())
}) (stop func()) {
	var mu sync.Mutex
	ends := map[string]func(error){}
	return core.Watch(func(ev appliance.Event) {
		switch ev.Kind {
		case appliance.EventStarted:
			end := l.Begin()
			mu.Lock()
			ends[ev.ID] = end
			mu.Unlock()
		case appliance.EventFinished:
			mu.Lock()
			end, ok := ends[ev.ID]
			delete(ends, ev.ID)
			mu.Unlock()
			if !ok {
				return
			}
			var err error
			if e := ev.Outcome.Err; e != nil && e.Code != appliance.CodeCancelled {
				err = e
			}
			end(err)
		}
	})
}
