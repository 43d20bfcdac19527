package firmware

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"periph.io/x/conn/v3/gpio"
)

// State is what the status LEDs show.
type State int

// LED states.
const (
	StateOff   State = iota // before Run and after it ends
	StateReady              // idle, waiting for work
	StateBusy               // a generation is running
	StateError              // blinking for ErrorFor after a failure
)

func (s State) String() string {
	switch s {
	case StateReady:
		return "ready"
	case StateBusy:
		return "busy"
	case StateError:
		return "error"
	}
	return "off"
}

// LEDs is the status LED state machine: busy while at least one generation
// runs (Begin … end), ready otherwise; a failure blinks the error LED for
// ErrorFor, then the LEDs return to busy or ready. A new Begin ends the
// error display early. Methods are safe for concurrent use and never block
// on hardware.
type LEDs struct {
	cfg  LEDConfig
	pins [3]gpio.PinIO // ready/busy/error, or red/green/blue
	log  *slog.Logger
	wake chan struct{}

	mu       sync.Mutex
	running  bool
	active   int
	errFrom  time.Time
	errUntil time.Time
}

func (c LEDConfig) pinNames() [3]string {
	if c.rgb() {
		return [3]string{c.Red, c.Green, c.Blue}
	}
	return [3]string{c.Ready, c.Busy, c.Error}
}

func newLEDs(cfg LEDConfig, pins [3]gpio.PinIO, log *slog.Logger) *LEDs {
	if cfg.ErrorFor <= 0 {
		cfg.ErrorFor = DefaultErrorFor
	}
	if cfg.Blink <= 0 {
		cfg.Blink = DefaultBlink
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &LEDs{cfg: cfg, pins: pins, log: log, wake: make(chan struct{}, 1)}
}

// Begin marks a generation as running and returns the function to call
// when it ends, with its error (nil, or a context cancellation, is not a
// failure). The returned function is idempotent.
func (l *LEDs) Begin() (end func(err error)) {
	l.mu.Lock()
	l.active++
	l.errUntil = time.Time{}
	l.mu.Unlock()
	l.poke()
	var once sync.Once
	return func(err error) {
		once.Do(func() {
			l.mu.Lock()
			l.active--
			l.mu.Unlock()
			if err != nil && !errors.Is(err, context.Canceled) {
				l.Fail(err)
				return
			}
			l.poke()
		})
	}
}

// Fail shows an error for ErrorFor.
func (l *LEDs) Fail(err error) {
	l.mu.Lock()
	l.errFrom = time.Now()
	l.errUntil = l.errFrom.Add(l.cfg.ErrorFor)
	l.mu.Unlock()
	l.log.Debug("leds: error", "err", err)
	l.poke()
}

// State returns what the LEDs show now.
func (l *LEDs) State() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stateLocked(time.Now())
}

func (l *LEDs) stateLocked(now time.Time) State {
	switch {
	case !l.running:
		return StateOff
	case now.Before(l.errUntil):
		return StateError
	case l.active > 0:
		return StateBusy
	}
	return StateReady
}

func (l *LEDs) poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Run drives the pins until ctx is done, then turns them off.
func (l *LEDs) Run(ctx context.Context) {
	l.mu.Lock()
	l.running = true
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.running = false
		l.mu.Unlock()
		_ = l.set(l.pattern(StateOff, true))
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var last [3]bool
	first := true
	for {
		now := time.Now()
		l.mu.Lock()
		s := l.stateLocked(now)
		errFrom, errUntil := l.errFrom, l.errUntil
		l.mu.Unlock()
		wait := time.Hour
		phase := true
		if s == StateError {
			n := now.Sub(errFrom)
			phase = (n/l.cfg.Blink)%2 == 0
			wait = min(l.cfg.Blink-n%l.cfg.Blink, errUntil.Sub(now))
		}
		p := l.pattern(s, phase)
		if first || p != last {
			if err := l.set(p); err != nil {
				l.log.Warn("leds: cannot drive pin", "err", err)
			}
			last, first = p, false
		}
		timer.Reset(max(wait, time.Millisecond))
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-timer.C:
		}
	}
}

// pattern returns which of the three pins are lit in state s; phase is the
// blink phase (true = on) for blinking states.
func (l *LEDs) pattern(s State, phase bool) [3]bool {
	var p [3]bool
	if l.cfg.rgb() {
		switch s { // red, green, blue
		case StateReady:
			p[1] = true
		case StateBusy:
			p[2] = true
		case StateError:
			p[0] = phase
		}
		return p
	}
	switch s { // ready, busy, error
	case StateReady:
		p[0] = true
	case StateBusy:
		p[1] = true
	case StateError:
		p[2] = phase
	}
	return p
}

func (l *LEDs) set(p [3]bool) error {
	var errs []error
	for i, pin := range l.pins {
		if pin == nil {
			continue
		}
		lvl := gpio.Level(p[i] != l.cfg.ActiveLow)
		if err := pin.Out(lvl); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
