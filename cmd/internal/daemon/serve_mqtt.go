package daemon

import (
	"context"
	"log/slog"
	"sync"

	"github.com/geisten/geist/firmware"
	"github.com/geisten/geist/mqtt"
)

// mqttFront is the MQTT front end and the embedded broker under it;
// either may be absent.
type mqttFront struct {
	broker string         // the broker's URL; "" when MQTT is off
	emb    *mqtt.Embedded // nil: no embedded broker
	svc    *mqtt.Service  // nil: MQTT is off
}

// startMQTT starts the embedded broker when configured and connects the
// MQTT front end to [mqtt] broker (or the embedded one) on core (the
// group of every model's cores, whose state it publishes). onCancel runs
// when Home Assistant's Cancel button is pressed; others says whether
// another network front end serves, for the log line when MQTT is off.
func startMQTT(c *Config, core mqtt.Core, buttons []mqtt.Button, onCancel func(), others bool, log *slog.Logger) (*mqttFront, error) {
	f := &mqttFront{broker: c.MQTT.Broker}
	if c.MQTT.Embedded {
		var emb *mqtt.Embedded
		if c.early != nil {
			emb = take(&c.early.emb)
		}
		if emb == nil {
			var err error
			if emb, err = mqtt.StartEmbedded(c.MQTT.EmbeddedAddr, c.MQTT.Username, c.MQTT.Password, log); err != nil {
				return nil, err
			}
			log.Info("embedded MQTT broker listening", "addr", emb.Addr())
		}
		f.emb = emb
		if f.broker == "" {
			f.broker = emb.URL()
		}
	}
	switch {
	case f.broker == "" && others:
		log.Info("no MQTT broker configured (--broker or [mqtt] broker): MQTT is off", "http", c.HTTP.Addr, "wyoming", c.Wyoming.Addr)
		return f, nil
	case f.broker == "":
		log.Warn("no MQTT broker configured (--broker or [mqtt] broker), no HTTP API and no Wyoming: serving nothing over the network until restarted with one (buttons and voice keep working)")
		return f, nil
	}
	mc := c.mqttConfig(f.broker, buttons, log)
	mc.OnCancel = onCancel
	svc, err := mqtt.New(mc, core)
	if err != nil {
		f.close()
		return nil, err
	}
	f.svc = svc
	return f, nil
}

// publishPress tells Home Assistant about a button press (nothing while
// MQTT is off).
func (f *mqttFront) publishPress(button string, kind firmware.Press) {
	if f != nil && f.svc != nil {
		f.svc.PublishPress(button, kind.String())
	}
}

// run serves until drain ends: after the core stopped, so that the last
// answers and then "offline" are published.
func (f *mqttFront) run(_, drain context.Context, wg *sync.WaitGroup) {
	if f.svc != nil {
		wg.Go(func() { f.svc.Run(drain) })
	}
}

func (f *mqttFront) wait() {}

// close stops the embedded broker (after the service said goodbye).
func (f *mqttFront) close() {
	if f.emb != nil {
		f.emb.Close()
	}
}
