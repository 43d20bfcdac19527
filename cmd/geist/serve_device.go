package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/geisten/geist/firmware"
	"github.com/geisten/geist/firmware/voice"
	"github.com/geisten/geist/mqtt"
	"github.com/geisten/geist/mqtt/hermes"
)

// The device triggers of geist serve (issue 7): buttons, status LEDs,
// push-to-talk, speech out and the Hermes bridge. Every generation, from
// whichever trigger, runs on the mqtt service's one worker (Submit), so
// the engine is never used concurrently and the LEDs see all of them.

// ledGenerator shows every generation on the status LEDs: busy while it
// runs, then ready, or a blinking error when it failed (a cancellation is
// not a failure).
type ledGenerator struct {
	mqtt.Generator
	leds *firmware.LEDs
}

func (g ledGenerator) Generate(ctx context.Context, req mqtt.Request, onDelta func(string)) (mqtt.Result, error) {
	end := g.leds.Begin()
	res, err := g.Generator.Generate(ctx, req, onDelta)
	end(err)
	return res, err
}

// Forget passes new conversations through to the wrapped generator.
func (g ledGenerator) Forget(session string) error {
	if f, ok := g.Generator.(mqtt.Forgetter); ok {
		return f.Forget(session)
	}
	return errors.New("the generator keeps no sessions")
}

// triggers implements firmware.Actions (buttons), voice.Asker
// (push-to-talk) and hermes.Answerer (the Hermes bridge) on top of the
// mqtt service.
type triggers struct {
	svc     *mqtt.Service
	device  string
	log     *slog.Logger
	leds    *firmware.LEDs    // nil without GPIO configuration
	speaker *voice.Speaker    // nil: answers are not spoken
	ptt     *voice.PushToTalk // nil: no push-to-talk
	bridge  *hermes.Bridge    // nil: no Hermes bridge
	wg      sync.WaitGroup    // goroutines waiting for answers
}

// Ask asks prompt in session (empty: the dashboard's conversation): the
// answer is published on geist/<dev>/answer and as an answer event, and
// spoken when speech is configured. It returns at once.
func (t *triggers) Ask(ctx context.Context, session, prompt string) {
	if session == "" {
		session = t.svc.DefaultSession()
	}
	var st *voice.Stream
	var onDelta func(string)
	if t.speaker != nil {
		st = t.speaker.Stream()
		onDelta = func(d string) { st.Write([]byte(d)) }
	}
	ch, err := t.svc.Submit(ctx, mqtt.Request{Text: prompt, Session: session}, onDelta, true)
	if err != nil {
		t.log.Warn("ask refused", "session", session, "err", err)
		if t.leds != nil {
			t.leds.Fail(err)
		}
		return
	}
	t.log.Info("ask", "session", session, "prompt", prompt)
	t.wg.Go(func() {
		o := <-ch
		if o.Err != nil {
			t.log.Info("ask ended without an answer", "session", session, "code", o.Err.Code, "err", o.Err.Message)
			return
		}
		if st != nil {
			st.Close() // speak the rest
		}
	})
}

// Cancel cancels the running generation (from any source), the speech
// queue, a push-to-talk recording and the Hermes answer in progress.
func (t *triggers) Cancel(context.Context) {
	ran := t.svc.CancelRunning()
	t.stopOutputs()
	t.log.Info("cancel", "was_running", ran)
}

// stopOutputs stops the speech queue, a push-to-talk recording and the
// Hermes answer in progress.
func (t *triggers) stopOutputs() {
	if t.speaker != nil {
		t.speaker.Cancel()
	}
	if t.ptt != nil {
		t.ptt.Cancel()
	}
	if t.bridge != nil {
		t.bridge.Cancel()
	}
}

// NewConversation forgets session (empty: starts a new dashboard
// conversation).
func (t *triggers) NewConversation(_ context.Context, session string) {
	t.svc.NewConversation(session)
}

// Event publishes a press for Home Assistant's event entity.
func (t *triggers) Event(_ context.Context, button string, kind firmware.Press) {
	t.log.Info("button", "button", button, "press", kind.String())
	t.svc.Publish(firmware.EventTopic(t.device, button), 0, false, firmware.EventPayload(button, kind))
}

// Answer runs a Hermes question on the service's worker and returns when
// the answer is complete. The answer is spoken by the voice pipeline
// (hermes/tts/say), not published on geist's answer topic.
func (t *triggers) Answer(ctx context.Context, session, question string, onText func([]byte) error) error {
	ch, err := t.svc.Submit(ctx, mqtt.Request{Text: question, Session: session}, func(d string) { onText([]byte(d)) }, false)
	if err != nil {
		return err
	}
	if o := <-ch; o.Err != nil {
		return o.Err
	}
	return nil
}

// foundButtons returns the configured buttons whose pins were found.
func foundButtons(cfg firmware.Config, dev *firmware.Device) []firmware.Button {
	if dev == nil {
		return nil
	}
	names := dev.Buttons()
	var out []firmware.Button
	for _, b := range cfg.Buttons {
		if slices.Contains(names, b.Name) {
			out = append(out, b)
		}
	}
	return out
}

// discoveryComponents turns the button event entities into the mqtt
// package's component maps.
func discoveryComponents(device string, buttons []firmware.Button) map[string]map[string]any {
	if len(buttons) == 0 {
		return nil
	}
	return firmware.DiscoveryComponents(device, buttons)
}

// hermesOptions returns the paho options of the Hermes bridge's own
// client: on [hermes] broker when set (Rhasspy's internal broker), else
// on geist's broker with geist's credentials and a client id of its own.
func hermesOptions(c *serveConfig, h *hermesSection, broker, clientID string) (*paho.ClientOptions, error) {
	o := paho.NewClientOptions()
	switch {
	case h.Broker != "":
		o.AddBroker(h.Broker)
		o.SetUsername(h.Username)
		o.SetPassword(h.Password)
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
func describeDevice(c *serveConfig, dev *firmware.Device) string {
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

// gpioConfigured reports whether [gpio] names any pin.
func gpioConfigured(g firmware.Config) bool {
	l := g.LEDs
	return len(g.Buttons) > 0 || l.Ready != "" || l.Busy != "" || l.Error != "" || l.Red != "" || l.Green != "" || l.Blue != ""
}
