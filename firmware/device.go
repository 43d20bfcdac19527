package firmware

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"periph.io/x/conn/v3/gpio"
)

// Actions is what the daemon does for button presses (Triggers, on the
// appliance core). Every method must return promptly: Ask starts a
// generation (or queues it) and returns; it must not wait for the answer.
// Methods are called from one goroutine, in press order.
type Actions interface {
	// Ask asks prompt in session (empty: the default session); the answer
	// is spoken (and published, with a broker) as for any other request.
	Ask(ctx context.Context, session, prompt string)
	// Cancel cancels the running generation, if any.
	Cancel(ctx context.Context)
	// NewConversation forgets the history of session.
	NewConversation(ctx context.Context, session string)
	// Event reports a press (the MQTT front end publishes it for Home
	// Assistant's event entities). It is called for every press, before
	// the press's action.
	Event(ctx context.Context, button string, kind Press)
}

// Talker is driven by push-to-talk buttons (Button.Talk): StartTalk when
// the button goes down, StopTalk when it is released. Both must return
// promptly.
type Talker interface {
	StartTalk(ctx context.Context)
	StopTalk()
}

// ErrUnavailable is matched (errors.Is) by every *UnavailableError.
var ErrUnavailable = errors.New("firmware: GPIO unavailable")

// UnavailableError reports that GPIO could not be initialized or that
// configured pins do not exist on this board. It is not fatal: the daemon
// logs it and keeps serving.
type UnavailableError struct {
	Init    error    // host.Init failure, if any
	Missing []string // configured pin names that were not found
	Board   int      // number of GPIO lines the board offers
}

func (e *UnavailableError) Error() string {
	var b strings.Builder
	b.WriteString("firmware: GPIO unavailable: ")
	var parts []string
	if e.Init != nil {
		parts = append(parts, "host init: "+e.Init.Error())
	}
	if len(e.Missing) > 0 {
		parts = append(parts, "pins not found: "+strings.Join(e.Missing, ", "))
	}
	if e.Board == 0 {
		parts = append(parts, "this machine offers no GPIO lines (no /dev/gpiochip*, or no permission to open them)")
	} else if len(e.Missing) > 0 {
		parts = append(parts, fmt.Sprintf("the board offers %d lines ('geist gpio list' shows their names)", e.Board))
	}
	b.WriteString(strings.Join(parts, "; "))
	return b.String()
}

func (e *UnavailableError) Unwrap() error { return e.Init }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

func asUnavailable(err error) (*UnavailableError, bool) {
	var ue *UnavailableError
	ok := errors.As(err, &ue)
	return ue, ok
}

// Device is the set of buttons and LEDs that were found.
type Device struct {
	cfg     Config
	buttons []*button
	leds    *LEDs
	log     *slog.Logger
}

type button struct {
	cfg Button
	pin gpio.PinIO
}

// Lookup finds a pin by line name; gpioreg.ByName is the production one.
type Lookup func(name string) gpio.PinIO

// OpenWith builds a Device from cfg, finding pins with lookup and
// configuring them (inputs with their pulls, LED outputs off). Missing pins
// are left out and reported in an *UnavailableError; the Device is usable
// (never nil) whenever the configuration itself is valid. boardLines is
// the number of lines the board offers (for the error message).
func OpenWith(cfg Config, lookup Lookup, boardLines int, log *slog.Logger) (*Device, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.Timing = cfg.Timing.withDefaults()
	d := &Device{cfg: cfg, log: log}
	var missing []string
	var errs []error
	for _, b := range cfg.Buttons {
		p := lookup(b.Pin)
		if p == nil {
			missing = append(missing, b.Pin)
			continue
		}
		d.buttons = append(d.buttons, &button{cfg: b, pin: p})
	}
	var pins [3]gpio.PinIO
	for i, name := range cfg.LEDs.pinNames() {
		if name == "" {
			continue
		}
		p := lookup(name)
		if p == nil {
			missing = append(missing, name)
			continue
		}
		pins[i] = p
	}
	d.leds = newLEDs(cfg.LEDs, pins, log)
	if err := d.leds.set(d.leds.pattern(StateOff, true)); err != nil {
		errs = append(errs, err)
	}
	if len(missing) > 0 {
		errs = append(errs, &UnavailableError{Missing: missing, Board: boardLines})
	}
	return d, errors.Join(errs...)
}

// LEDs returns the status LEDs (never nil; without LED pins it only keeps
// the state).
func (d *Device) LEDs() *LEDs { return d.leds }

// Buttons returns the names of the buttons that were found.
func (d *Device) Buttons() []string {
	var s []string
	for _, b := range d.buttons {
		s = append(s, b.cfg.Name)
	}
	return s
}

// Run watches the buttons and drives the LEDs until ctx is done. Presses
// go to actions; push-to-talk buttons go to talker (which may be nil when
// no button has Talk set). Run returns nil when ctx ends.
func (d *Device) Run(ctx context.Context, actions Actions, talker Talker) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type press struct {
		b    *button
		kind Press
	}
	queue := make(chan press, 32)
	var wg sync.WaitGroup
	wg.Go(func() { d.leds.Run(ctx) })
	for _, b := range d.buttons {
		wg.Go(func() {
			b.watch(ctx, d.cfg.Timing, d.log, func(k Press) {
				select {
				case queue <- press{b, k}:
				default:
					d.log.Warn("button press dropped: action queue full", "button", b.cfg.Name, "kind", k.String())
				}
			})
		})
	}
	for {
		select {
		case <-ctx.Done():
			cancel()
			wg.Wait()
			return nil
		case p := <-queue:
			d.dispatch(ctx, p.b.cfg, p.kind, actions, talker)
		}
	}
}

func (d *Device) dispatch(ctx context.Context, b Button, kind Press, actions Actions, talker Talker) {
	d.log.Debug("button", "button", b.Name, "kind", kind.String())
	switch kind {
	case Down:
		if talker != nil {
			talker.StartTalk(ctx)
		}
		return
	case Up:
		if talker != nil {
			talker.StopTalk()
		}
		return
	}
	if actions == nil {
		return
	}
	actions.Event(ctx, b.Name, kind)
	var a *Action
	switch kind {
	case ShortPress:
		a = b.Press
	case LongPress:
		a = b.LongPress
	case DoublePress:
		a = b.DoublePress
	}
	if a == nil {
		return
	}
	switch a.Do {
	case ActionAsk:
		actions.Ask(ctx, a.Session, a.Prompt)
	case ActionCancel:
		actions.Cancel(ctx)
	case ActionNewConversation:
		actions.NewConversation(ctx, a.Session)
	}
}

// maxWait bounds every edge wait, so that a backend that ignores Halt
// still notices a cancelled context.
const maxWait = time.Second

// watch samples one button until ctx is done, reporting presses to emit.
func (b *button) watch(ctx context.Context, t Timing, log *slog.Logger, emit func(Press)) {
	pull, pressedLevel := gpio.PullUp, gpio.Low
	switch b.cfg.Pull {
	case PullDown:
		pull, pressedLevel = gpio.PullDown, gpio.High
	case PullNone:
		pull, pressedLevel = gpio.Float, gpio.Level(b.cfg.ActiveHigh)
	}
	edges := true
	if err := b.pin.In(pull, gpio.BothEdges); err != nil {
		log.Info("button: no edge detection, polling", "button", b.cfg.Name, "pin", b.cfg.Pin, "err", err)
		edges = false
		if err := b.pin.In(pull, gpio.NoEdge); err != nil {
			log.Error("button: cannot configure pin as input", "button", b.cfg.Name, "pin", b.cfg.Pin, "err", err)
			return
		}
	}
	// Halt interrupts a pending WaitForEdge on the ioctl backend.
	stop := context.AfterFunc(ctx, func() { _ = b.pin.Halt() })
	defer stop()

	det := newDetector(t, b.cfg.DoubleEnabled(), b.cfg.Talk, time.Now())
	quick := 0 // consecutive edge waits that returned early without an edge
	for ctx.Err() == nil {
		now := time.Now()
		for _, k := range det.update(now, b.pin.Read() == pressedLevel) {
			emit(k)
		}
		wait := maxWait
		if at, ok := det.next(); ok {
			wait = max(at.Sub(now), 0)
		}
		if !edges {
			wait = min(wait, t.Poll)
			if !sleep(ctx, wait) {
				return
			}
			continue
		}
		if wait == 0 {
			continue
		}
		start := time.Now()
		if b.pin.WaitForEdge(wait) {
			quick = 0
			continue
		}
		// A timeout that comes back much too early means the backend does
		// not wait (periph/host #78 and similar): fall back to polling
		// rather than spin.
		if time.Since(start) < wait/2 && wait >= 4*t.Poll {
			quick++
			if quick >= 3 {
				log.Warn("button: edge wait returns at once; polling instead", "button", b.cfg.Name, "pin", b.cfg.Pin)
				edges = false
			}
		} else {
			quick = 0
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
