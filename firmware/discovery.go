package firmware

import (
	"encoding/json"
	"strings"
)

// EventTopic is the MQTT topic a button's presses are published on:
// geist/<device>/button/<button>. It is the state topic of the button's
// Home Assistant event entity.
func EventTopic(device, button string) string {
	return "geist/" + device + "/button/" + button
}

// EventPayload is the JSON published on EventTopic for a press, as Home
// Assistant's MQTT event platform expects: {"event_type":"press"}.
func EventPayload(button string, kind Press) []byte {
	b, _ := json.Marshal(struct {
		EventType string `json:"event_type"`
		Button    string `json:"button"`
	}{kind.String(), button})
	return b
}

// EventTypes returns the event types a button can report: press and
// long_press, and double_press when double presses are detected.
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

// DiscoveryComponents returns the Home Assistant device-discovery
// components ("cmps" entries of homeassistant/device/geist_<device>/config)
// for the buttons: one event entity per button, keyed by component id. The
// device and availability blocks come from the device config they are
// merged into. Push-to-talk buttons report no events and get no entity.
func DiscoveryComponents(device string, buttons []Button) map[string]map[string]any {
	out := map[string]map[string]any{}
	dev := sanitize(device)
	for _, b := range buttons {
		types := EventTypes(b)
		if len(types) == 0 {
			continue
		}
		id := "button_" + sanitize(b.Name)
		uid := "geist_" + dev + "_" + id
		out[id] = map[string]any{
			"p":                 "event",
			"name":              "Button " + b.Name,
			"unique_id":         uid,
			"default_entity_id": "event." + strings.ReplaceAll(strings.ToLower(uid), "-", "_"),
			"device_class":      "button",
			"state_topic":       EventTopic(device, b.Name),
			"event_types":       types,
			"icon":              "mdi:gesture-tap-button",
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
