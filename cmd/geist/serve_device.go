package main

import (
	"errors"
	"fmt"
	"slices"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/geisten/geist/firmware"
	"github.com/geisten/geist/mqtt"
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
func hermesOptions(c *serveConfig, h *hermesSection, broker, clientID string) (*paho.ClientOptions, error) {
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
