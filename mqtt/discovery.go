package mqtt

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Topics are the topics of one device.
type Topics struct {
	Ask, PoolAsk, PoolShared, Answer, Error, Cancel string
	Reply, PoolReply                                string // reply_to prefixes: geist/<dev>/reply/, geist/pool/reply/
	Status, State, LastAnswer, Event                string
	CmdAsk, CmdCancel, CmdNewConversation           string
	Discovery, HAStatus                             string
}

// TopicsFor returns the topics of device dev with Home Assistant's
// discovery prefix (usually "homeassistant").
func TopicsFor(dev, prefix string) Topics {
	b := "geist/" + dev + "/"
	return Topics{
		Ask:                b + "ask",
		PoolAsk:            "geist/pool/ask",
		PoolShared:         "$share/geist/geist/pool/ask",
		Answer:             b + "answer",
		Reply:              b + "reply/",
		PoolReply:          "geist/pool/reply/",
		Error:              b + "error",
		Cancel:             b + "cancel",
		Status:             b + "status",
		State:              b + "state",
		LastAnswer:         b + "last_answer",
		Event:              b + "event",
		CmdAsk:             b + "cmd/ask",
		CmdCancel:          b + "cmd/cancel",
		CmdNewConversation: b + "cmd/new_conversation",
		Discovery:          prefix + "/device/geist_" + dev + "/config",
		HAStatus:           prefix + "/status",
	}
}

// DiscoveryInfo describes the device for Home Assistant.
type DiscoveryInfo struct {
	Device   string // device name, [a-zA-Z0-9_-]
	Version  string // geist version (origin and device sw)
	Model    string // model file name, shown as the device's model id
	URL      string // origin url
	Prefix   string // discovery prefix, "homeassistant" when empty
	Hardware string // optional hardware description
	// Buttons get one event entity each, fed by ButtonTopic.
	Buttons []Button
}

// Button is one of the device's buttons as Home Assistant sees it: an
// event entity named after it, reporting EventTypes ("press",
// "long_press", "double_press"). A button without event types (a
// push-to-talk button) gets no entity.
type Button struct {
	Name       string
	EventTypes []string
}

// checkButton accepts button names that are safe as a topic level and in
// an entity id.
func checkButton(name string) error {
	if name == "" || strings.ContainsAny(name, "/+#") || strings.IndexFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return fmt.Errorf("mqtt: button name %q is not usable in a topic", name)
	}
	return nil
}

// ButtonTopic is the topic a button's presses are published on:
// geist/<device>/button/<button>, the state topic of its Home Assistant
// event entity.
func ButtonTopic(device, button string) string {
	return "geist/" + device + "/button/" + button
}

// ButtonPayload is the JSON published on ButtonTopic for a press, as Home
// Assistant's MQTT event platform expects: {"event_type":"press","button":"main"}.
func ButtonPayload(button, eventType string) []byte {
	b, _ := json.Marshal(struct {
		EventType string `json:"event_type"`
		Button    string `json:"button"`
	}{eventType, button})
	return b
}

// buttonComponents returns the event entities of buttons, keyed by
// component id, with the device's availability.
func buttonComponents(device string, buttons []Button, avail []obj) obj {
	out := obj{}
	dev := sanitize(device)
	for _, b := range buttons {
		if len(b.EventTypes) == 0 {
			continue
		}
		id := "button_" + sanitize(b.Name)
		uid := "geist_" + dev + "_" + id
		out[id] = obj{
			"p":                 "event",
			"name":              "Button " + b.Name,
			"unique_id":         uid,
			"default_entity_id": "event." + strings.ReplaceAll(strings.ToLower(uid), "-", "_"),
			"device_class":      "button",
			"state_topic":       ButtonTopic(device, b.Name),
			"event_types":       b.EventTypes,
			"icon":              "mdi:gesture-tap-button",
			"availability":      avail,
		}
	}
	return out
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

type obj = map[string]any

// DiscoveryPayload returns the retained device-based discovery config
// (homeassistant/device/geist_<dev>/config): the device, the origin and
// every component, each bound to the device's availability topic, with
// stable unique ids and default_entity_id (never the removed object_id).
func DiscoveryPayload(d DiscoveryInfo) ([]byte, error) {
	prefix := d.Prefix
	if prefix == "" {
		prefix = "homeassistant"
	}
	t := TopicsFor(d.Device, prefix)
	id := "geist_" + d.Device
	avail := []obj{{"topic": t.Status, "payload_available": "online", "payload_not_available": "offline"}}
	comp := func(platform, key, name string, extra obj) obj {
		c := obj{
			"p":                 platform,
			"name":              name,
			"unique_id":         id + "_" + key,
			"default_entity_id": platform + "." + id + "_" + key,
			"availability":      avail,
		}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	dev := obj{
		"identifiers":  []string{id},
		"name":         "geist " + d.Device,
		"manufacturer": "geisten",
		"model":        "geist",
		"sw_version":   d.Version,
	}
	if d.Model != "" {
		dev["model_id"] = d.Model
	}
	if d.Hardware != "" {
		dev["hw_version"] = d.Hardware
	}
	url := d.URL
	if url == "" {
		url = "https://github.com/geisten/geist"
	}
	cmps := obj{
		id + "_state": comp("sensor", "state", "State", obj{
			"state_topic":           t.State,
			"value_template":        "{{ value_json.state }}",
			"json_attributes_topic": t.State,
			"icon":                  "mdi:head-cog-outline",
		}),
		id + "_tok_s": comp("sensor", "tok_s", "Tokens per second", obj{
			"state_topic":         t.State,
			"value_template":      "{{ value_json.tok_s | round(1) }}",
			"unit_of_measurement": "tok/s",
			"state_class":         "measurement",
			"icon":                "mdi:speedometer",
		}),
		id + "_acceptance": comp("sensor", "acceptance", "Draft acceptance rate", obj{
			"state_topic":         t.State,
			"value_template":      "{{ (value_json.acceptance_rate * 100) | round(1) }}",
			"unit_of_measurement": "%",
			"state_class":         "measurement",
			"entity_category":     "diagnostic",
		}),
		id + "_queue": comp("sensor", "queue", "Queue", obj{
			"state_topic":     t.State,
			"value_template":  "{{ value_json.queue }}",
			"state_class":     "measurement",
			"entity_category": "diagnostic",
			"icon":            "mdi:tray-full",
		}),
		id + "_last_answer": comp("sensor", "last_answer", "Last answer", obj{
			"state_topic":           t.LastAnswer,
			"value_template":        "{{ value_json.text[:255] }}",
			"json_attributes_topic": t.LastAnswer,
			"icon":                  "mdi:message-text-outline",
		}),
		id + "_busy": comp("binary_sensor", "busy", "Busy", obj{
			"state_topic":    t.State,
			"value_template": "{{ 'ON' if value_json.busy else 'OFF' }}",
			"device_class":   "running",
		}),
		// Degraded parts (storage, broker, gpio) with why, as attributes.
		id + "_problem": comp("binary_sensor", "problem", "Problem", obj{
			"state_topic":              t.State,
			"value_template":           "{{ 'ON' if value_json.degraded is defined else 'OFF' }}",
			"json_attributes_topic":    t.State,
			"json_attributes_template": "{{ value_json.degraded | default({}) | tojson }}",
			"device_class":             "problem",
			"entity_category":          "diagnostic",
		}),
		id + "_cancel": comp("button", "cancel", "Cancel", obj{
			"command_topic": t.CmdCancel,
			"payload_press": "PRESS",
			"icon":          "mdi:cancel",
		}),
		id + "_new_conversation": comp("button", "new_conversation", "New conversation", obj{
			"command_topic": t.CmdNewConversation,
			"payload_press": "PRESS",
			"icon":          "mdi:chat-plus-outline",
		}),
		id + "_ask": comp("text", "ask", "Ask", obj{
			"command_topic": t.CmdAsk,
			"min":           1,
			"max":           255,
			"mode":          "text",
			"icon":          "mdi:chat-question-outline",
		}),
		id + "_answer": comp("event", "answer", "Answer", obj{
			"state_topic": t.Event,
			"event_types": []string{"answer", "error"},
			"icon":        "mdi:message-reply-text-outline",
		}),
	}
	for k, c := range buttonComponents(d.Device, d.Buttons, avail) {
		cmps[k] = c
	}
	payload := obj{
		"dev":  dev,
		"o":    obj{"name": "geist", "sw": d.Version, "url": url},
		"cmps": cmps,
		"qos":  1,
	}
	return json.MarshalIndent(payload, "", "  ")
}
