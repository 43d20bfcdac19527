package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/firmware"
	"github.com/geisten/geist/firmware/voice"
	"github.com/geisten/geist/mqtt"
	"github.com/geisten/geist/mqtt/hermes"
)

// mqttButtons describes the configured buttons whose pins were found to
// the MQTT front end, for their Home Assistant event entities.
func mqttButtons(cfg firmware.Config, dev *firmware.Device) []mqtt.Button {
	if dev == nil {
		return nil
	}
	names := dev.Buttons()
	var out []mqtt.Button
	for _, b := range cfg.Buttons {
		if slices.Contains(names, b.Name) {
			out = append(out, mqtt.Button{Name: b.Name, EventTypes: firmware.EventTypes(b)})
		}
	}
	return out
}

// hermesOptions returns the paho options of the Hermes bridge's own
// client: on [hermes] broker when set (Rhasspy's internal broker), else
// on geist's broker with geist's credentials and a client id of its own.
func hermesOptions(c *Config, h *hermesSection, broker, clientID string) (*paho.ClientOptions, error) {
	o := paho.NewClientOptions()
	switch {
	case h.Broker != "":
		o.AddBroker(h.Broker)
		o.SetUsername(h.Username)
		o.SetPassword(h.Password)
		if h.CAFile != "" || h.CertFile != "" {
			tc, err := mqtt.TLSConfig(h.CAFile, h.CertFile, h.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("hermes: %w", err)
			}
			o.SetTLSConfig(tc)
		}
	case broker == "":
		return nil, errors.New("hermes: no broker: set [hermes] broker (--hermes-broker) or geist's [mqtt] broker")
	default:
		o.AddBroker(broker)
		o.SetUsername(c.MQTT.Username)
		o.SetPassword(c.MQTT.Password)
		if c.MQTT.CAFile != "" || c.MQTT.CertFile != "" {
			tc, err := mqtt.TLSConfig(c.MQTT.CAFile, c.MQTT.CertFile, c.MQTT.KeyFile)
			if err != nil {
				return nil, err
			}
			o.SetTLSConfig(tc)
		}
	}
	id := h.ClientID
	if id == "" {
		id = clientID + "-hermes"
	}
	if len(id) > 64 {
		id = id[:64]
	}
	o.SetClientID(id)
	o.SetCleanSession(true)
	o.SetConnectRetryInterval(2 * time.Second)
	o.SetMaxReconnectInterval(30 * time.Second)
	o.SetConnectTimeout(10 * time.Second)
	o.SetKeepAlive(30 * time.Second)
	return o, nil
}

// describeDevice is one log line about what the device triggers do.
func describeDevice(c *Config, dev *firmware.Device) string {
	var parts []string
	if dev != nil {
		parts = append(parts, fmt.Sprintf("buttons %v", dev.Buttons()))
	}
	if c.Voice.Talk != nil {
		parts = append(parts, "push-to-talk")
	}
	if c.Voice.Speech != nil {
		parts = append(parts, "speech "+c.Voice.Speech.Command[0])
	}
	if c.Hermes != nil {
		parts = append(parts, "hermes")
	}
	if len(parts) == 0 {
		return "none"
	}
	return fmt.Sprint(parts)
}

// GPIOConfigured reports whether [gpio] names any pin.
func GPIOConfigured(g firmware.Config) bool {
	l := g.LEDs
	return len(g.Buttons) > 0 || l.Ready != "" || l.Busy != "" || l.Error != "" || l.Red != "" || l.Green != "" || l.Blue != ""
}

// deviceFront is the device itself: its buttons and LEDs (when [gpio]
// names pins), the speaker and push-to-talk, and the triggers that turn
// presses and voice into requests to the core.
type deviceFront struct {
	dev      *firmware.Device // nil: no pins configured
	unfollow func()           // the LEDs stop following the core
	speaker  *voice.Speaker   // nil: answers are not spoken
	triggers *firmware.Triggers
	ptt      *voice.PushToTalk // nil: no push-to-talk
}

// startDevice opens the GPIO pins (open, or firmware.Open when nil), the
// speaker and push-to-talk. A board without the pins is not fatal: the
// error says what is missing and the rest keeps serving. onPress sees
// every button press.
func startDevice(c *Config, core *appliance.Core, open func(firmware.Config, *slog.Logger) (*firmware.Device, error), onPress func(string, firmware.Press), log *slog.Logger) (*deviceFront, error) {
	f := &deviceFront{}
	tc := firmware.TriggersConfig{Core: core, OnPress: onPress, Logger: log.With("component", "triggers")}
	if GPIOConfigured(c.GPIO) && open == nil && !HasGPIOChip() {
		// Not an error: the sample configuration names pins, and most
		// machines it is tried on have none.
		log.Info("GPIO off: this machine has no GPIO chip (no " + gpioChipGlob + "); the buttons and LEDs of [gpio] are ignored (leave [gpio] out, or --gpio=false, to skip them without this line)")
	} else if GPIOConfigured(c.GPIO) {
		if open == nil {
			open = firmware.Open
		}
		d, err := open(c.GPIO, log.With("component", "gpio"))
		switch {
		case d == nil && err != nil: // an invalid configuration
			return nil, fmt.Errorf("gpio: %w", err)
		case errors.Is(err, firmware.ErrUnavailable):
			log.Warn(strings.ReplaceAll(cli.OneLine(err.Error()), "firmware: ", "")+"; serving on without them", "buttons_found", d.Buttons())
			core.SetDegraded(appliance.PartGPIO, "the configured buttons and LEDs are unavailable on this board")
		case err != nil: // pins found but not all usable: not fatal either
			log.Warn("GPIO: "+strings.ReplaceAll(cli.OneLine(err.Error()), "firmware: ", "")+"; serving on", "buttons_found", d.Buttons())
			core.SetDegraded(appliance.PartGPIO, fmt.Sprintf("some configured pins are unusable (buttons working: %s)", strings.Join(d.Buttons(), ", ")))
		}
		f.dev = d
		f.unfollow = d.LEDs().Follow(core) // every generation, whichever front end asked
		tc.LEDs = d.LEDs()
	}
	if c.Voice.Speech != nil {
		var err error
		if tc.Speaker, err = voice.NewSpeaker(*c.Voice.Speech, log.With("component", "speech")); err != nil {
			f.close()
			return nil, err
		}
		f.speaker = tc.Speaker
	}
	f.triggers = firmware.NewTriggers(tc)
	if c.Voice.Talk != nil {
		var err error
		if f.ptt, err = voice.NewPushToTalk(*c.Voice.Talk, f.triggers.Voice(), log.With("component", "push-to-talk")); err != nil {
			f.close()
			return nil, err
		}
		f.triggers.OnCancel(f.ptt.Cancel)
	}
	return f, nil
}

// stopOutputs stops speech and the LEDs' answer (Home Assistant's Cancel
// button stops speech too).
func (f *deviceFront) stopOutputs() { f.triggers.StopOutputs() }

// warn logs what the device triggers do, and a push-to-talk no button
// starts.
func (f *deviceFront) warn(c *Config, log *slog.Logger) {
	if c.Voice.Talk != nil && !slices.ContainsFunc(c.GPIO.Buttons, func(b firmware.Button) bool { return b.Talk }) {
		log.Warn("[voice.talk] is configured but no button has talk = true: push-to-talk is unused")
	}
	log.Info("device triggers", "on", describeDevice(c, f.dev))
}

// run speaks and reads the buttons until stop ends.
func (f *deviceFront) run(stop, _ context.Context, wg *sync.WaitGroup) {
	if f.speaker != nil {
		wg.Go(func() { f.speaker.Run(stop) })
	}
	if f.dev != nil {
		var talker firmware.Talker
		if f.ptt != nil {
			talker = f.ptt
		}
		wg.Go(func() { f.dev.Run(stop, f.triggers, talker) })
	}
}

// wait waits for push-to-talk and the asks in flight.
func (f *deviceFront) wait() {
	if f.ptt != nil {
		f.ptt.Wait()
	}
	f.triggers.Wait()
}

func (f *deviceFront) close() {
	if f.unfollow != nil {
		f.unfollow()
	}
}

// hermesFront is the Hermes bridge (Rhasspy's MQTT protocol) on its own
// client.
type hermesFront struct {
	bridge *hermes.Bridge
	opts   *paho.ClientOptions
}

// startHermes sets up the bridge of [hermes]; nil when it is not
// configured or has no broker (which it logs: the rest serves on).
func startHermes(c *Config, core *appliance.Core, broker string, dev *deviceFront, log *slog.Logger) (*hermesFront, error) {
	if c.Hermes == nil {
		return nil, nil
	}
	bridge, err := hermes.New(c.Hermes.Config, hermes.CoreAnswerer(core), log)
	if err != nil {
		return nil, err
	}
	clientID := c.MQTT.ClientID
	if clientID == "" {
		clientID = mqtt.ClientID(c.Device)
	}
	opts, err := hermesOptions(c, c.Hermes, broker, clientID)
	if err != nil {
		log.Error(err.Error() + "; the Hermes bridge is off")
		return nil, nil
	}
	dev.triggers.OnCancel(bridge.Cancel)
	return &hermesFront{bridge: bridge, opts: opts}, nil
}

// run connects until stop ends.
func (f *hermesFront) run(stop, _ context.Context, wg *sync.WaitGroup) {
	wg.Go(func() { f.bridge.Connect(stop, f.opts) })
}

func (f *hermesFront) wait()  {}
func (f *hermesFront) close() {}

// gpioChipGlob finds the machine's GPIO character devices.
var gpioChipGlob = "/dev/gpiochip*"

// HasGPIOChip reports whether the machine has a GPIO chip.
func HasGPIOChip() bool {
	m, _ := filepath.Glob(gpioChipGlob)
	return len(m) > 0
}
