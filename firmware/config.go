// Package firmware drives the appliance's buttons and status LEDs through
// periph.io: pins are looked up by their kernel line name ("GPIO17" on a
// Raspberry Pi 4 or 5, "PQ.05" on a Jetson), buttons are debounced in
// software and classified as short, long and double presses, and each press
// kind is mapped by the configuration to an action that the daemon performs
// (see [Actions]). LEDs show ready, busy and error (see [LEDs]).
//
// The package never blocks forever on a pin: edge waits always carry a
// finite timeout (periph/host issue #78) and fall back to polling when a pin
// cannot report edges. A board without GPIO is not fatal: [Open] returns an
// [*UnavailableError] naming what is missing together with a [Device] that
// runs with whatever pins were found (possibly none).
package firmware

import (
	"fmt"
	"time"
)

// Action kinds a press can be mapped to.
const (
	ActionAsk             = "ask"              // ask Prompt in Session
	ActionCancel          = "cancel"           // cancel the running generation
	ActionNewConversation = "new_conversation" // forget the history of Session
	ActionEvent           = "event"            // publish the press event only
)

// Action is what a press kind does.
type Action struct {
	// Do is one of ActionAsk, ActionCancel, ActionNewConversation or
	// ActionEvent. Empty means ActionEvent.
	Do string `json:"do" yaml:"do" toml:"do"`
	// Prompt is the question asked by ActionAsk.
	Prompt string `json:"prompt,omitempty" yaml:"prompt,omitempty" toml:"prompt,omitempty"`
	// Session names the conversation for ActionAsk and
	// ActionNewConversation; empty means the daemon's default session.
	Session string `json:"session,omitempty" yaml:"session,omitempty" toml:"session,omitempty"`
}

// Pull settings for a button pin.
const (
	PullUp   = "up"   // internal pull-up, button to ground: pressed reads low (the default)
	PullDown = "down" // internal pull-down, button to 3.3 V: pressed reads high
	PullNone = "none" // external resistor: ActiveHigh says which level is pressed
)

// Button configures one push button.
type Button struct {
	// Name identifies the button in events and in Home Assistant
	// ("button_1"); it must match [a-zA-Z0-9_-].
	Name string `json:"name" yaml:"name" toml:"name"`
	// Pin is the GPIO line name, e.g. "GPIO17".
	Pin string `json:"pin" yaml:"pin" toml:"pin"`
	// Pull is PullUp (default), PullDown or PullNone.
	Pull string `json:"pull,omitempty" yaml:"pull,omitempty" toml:"pull,omitempty"`
	// ActiveHigh, with PullNone, says the button reads high when pressed.
	ActiveHigh bool `json:"active_high,omitempty" yaml:"active_high,omitempty" toml:"active_high,omitempty"`
	// Press, LongPress and DoublePress map press kinds to actions. A nil
	// DoublePress turns double-press detection off, so short presses are
	// reported at release without waiting for a second one.
	Press       *Action `json:"press,omitempty" yaml:"press,omitempty" toml:"press,omitempty"`
	LongPress   *Action `json:"long_press,omitempty" yaml:"long_press,omitempty" toml:"long_press,omitempty"`
	DoublePress *Action `json:"double_press,omitempty" yaml:"double_press,omitempty" toml:"double_press,omitempty"`
	// Talk makes this a push-to-talk button: holding it calls
	// Talker.StartTalk, releasing it Talker.StopTalk; it reports no presses.
	Talk bool `json:"talk,omitempty" yaml:"talk,omitempty" toml:"talk,omitempty"`
}

// DoubleEnabled reports whether double presses are detected on b.
func (b Button) DoubleEnabled() bool { return b.DoublePress != nil && !b.Talk }

// Timing holds the press-detection durations. Zero fields take defaults.
type Timing struct {
	// Debounce is how long a level must hold before it counts (default 30ms).
	Debounce time.Duration `json:"debounce,omitempty" yaml:"debounce,omitempty" toml:"debounce,omitempty"`
	// LongPress is the hold time of a long press (default 800ms); it fires
	// while the button is still held.
	LongPress time.Duration `json:"long_press,omitempty" yaml:"long_press,omitempty" toml:"long_press,omitempty"`
	// DoubleGap is the longest release between the two presses of a double
	// press (default 300ms).
	DoubleGap time.Duration `json:"double_gap,omitempty" yaml:"double_gap,omitempty" toml:"double_gap,omitempty"`
	// Poll is the sampling interval when a pin cannot report edges
	// (default 10ms).
	Poll time.Duration `json:"poll,omitempty" yaml:"poll,omitempty" toml:"poll,omitempty"`
}

// Default timings.
const (
	DefaultDebounce  = 30 * time.Millisecond
	DefaultLongPress = 800 * time.Millisecond
	DefaultDoubleGap = 300 * time.Millisecond
	DefaultPoll      = 10 * time.Millisecond
	DefaultErrorFor  = 5 * time.Second
	DefaultBlink     = 250 * time.Millisecond
)

func (t Timing) withDefaults() Timing {
	if t.Debounce <= 0 {
		t.Debounce = DefaultDebounce
	}
	if t.LongPress <= 0 {
		t.LongPress = DefaultLongPress
	}
	if t.DoubleGap <= 0 {
		t.DoubleGap = DefaultDoubleGap
	}
	if t.Poll <= 0 {
		t.Poll = DefaultPoll
	}
	return t
}

// LEDConfig names the status LED pins: either up to three single LEDs
// (Ready, Busy, Error) or one RGB LED (Red, Green, Blue; ready is green,
// busy blue, error blinking red). Empty names are simply not driven.
type LEDConfig struct {
	Ready string `json:"ready,omitempty" yaml:"ready,omitempty" toml:"ready,omitempty"`
	Busy  string `json:"busy,omitempty" yaml:"busy,omitempty" toml:"busy,omitempty"`
	Error string `json:"error,omitempty" yaml:"error,omitempty" toml:"error,omitempty"`
	Red   string `json:"red,omitempty" yaml:"red,omitempty" toml:"red,omitempty"`
	Green string `json:"green,omitempty" yaml:"green,omitempty" toml:"green,omitempty"`
	Blue  string `json:"blue,omitempty" yaml:"blue,omitempty" toml:"blue,omitempty"`
	// ActiveLow drives the pins low to light the LEDs (common-anode wiring).
	ActiveLow bool `json:"active_low,omitempty" yaml:"active_low,omitempty" toml:"active_low,omitempty"`
	// ErrorFor is how long an error blinks before the LEDs return to ready
	// or busy (default 5s); Blink is the blink half-period (default 250ms).
	ErrorFor time.Duration `json:"error_for,omitempty" yaml:"error_for,omitempty" toml:"error_for,omitempty"`
	Blink    time.Duration `json:"blink,omitempty" yaml:"blink,omitempty" toml:"blink,omitempty"`
}

func (c LEDConfig) rgb() bool { return c.Red != "" || c.Green != "" || c.Blue != "" }

// Config is the GPIO part of the daemon's configuration.
type Config struct {
	Buttons []Button  `json:"buttons,omitempty" yaml:"buttons,omitempty" toml:"buttons,omitempty"`
	LEDs    LEDConfig `json:"leds" yaml:"leds" toml:"leds"`
	Timing  Timing    `json:"timing" yaml:"timing" toml:"timing"`
}

// Validate checks names, pulls and actions; it does not touch hardware.
func (c Config) Validate() error {
	names := map[string]bool{}
	pins := map[string]string{}
	for i, b := range c.Buttons {
		if !validID(b.Name) {
			return fmt.Errorf("firmware: button %d: name %q must be non-empty [a-zA-Z0-9_-]", i, b.Name)
		}
		if names[b.Name] {
			return fmt.Errorf("firmware: button %q: duplicate name", b.Name)
		}
		names[b.Name] = true
		if b.Pin == "" {
			return fmt.Errorf("firmware: button %q: no pin", b.Name)
		}
		if o, ok := pins[b.Pin]; ok {
			return fmt.Errorf("firmware: button %q: pin %s already used by %q", b.Name, b.Pin, o)
		}
		pins[b.Pin] = b.Name
		switch b.Pull {
		case "", PullUp, PullDown, PullNone:
		default:
			return fmt.Errorf("firmware: button %q: pull %q (want up, down or none)", b.Name, b.Pull)
		}
		for kind, a := range map[string]*Action{"press": b.Press, "long_press": b.LongPress, "double_press": b.DoublePress} {
			if a == nil {
				continue
			}
			switch a.Do {
			case "", ActionEvent, ActionCancel, ActionNewConversation:
			case ActionAsk:
				if a.Prompt == "" {
					return fmt.Errorf("firmware: button %q: %s: ask needs a prompt", b.Name, kind)
				}
			default:
				return fmt.Errorf("firmware: button %q: %s: unknown action %q (want ask, cancel, new_conversation or event)", b.Name, kind, a.Do)
			}
		}
	}
	for _, p := range c.LEDs.pinNames() {
		if p == "" {
			continue
		}
		if o, ok := pins[p]; ok {
			return fmt.Errorf("firmware: LED pin %s already used by button %q", p, o)
		}
	}
	if c.LEDs.rgb() && (c.LEDs.Ready != "" || c.LEDs.Busy != "" || c.LEDs.Error != "") {
		return fmt.Errorf("firmware: LEDs: configure either ready/busy/error or red/green/blue, not both")
	}
	return nil
}

func validID(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
