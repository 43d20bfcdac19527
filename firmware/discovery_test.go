package firmware

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestDiscoveryComponents(t *testing.T) {
	buttons := []Button{
		{Name: "main", Pin: "GPIO17", Press: &Action{Do: ActionAsk, Prompt: "hi"}, DoublePress: &Action{Do: ActionEvent}},
		{Name: "side-2", Pin: "GPIO22"},
		{Name: "talk", Pin: "GPIO27", Talk: true},
	}
	got := DiscoveryComponents("kitchen", buttons)
	want := map[string]map[string]any{
		"button_main": {
			"p": "event", "name": "Button main", "unique_id": "geist_kitchen_button_main",
			"default_entity_id": "event.geist_kitchen_button_main", "device_class": "button",
			"state_topic": "geist/kitchen/button/main", "event_types": []string{"press", "long_press", "double_press"},
			"icon": "mdi:gesture-tap-button",
		},
		"button_side-2": {
			"p": "event", "name": "Button side-2", "unique_id": "geist_kitchen_button_side-2",
			"default_entity_id": "event.geist_kitchen_button_side_2", "device_class": "button",
			"state_topic": "geist/kitchen/button/side-2", "event_types": []string{"press", "long_press"},
			"icon": "mdi:gesture-tap-button",
		},
	}
	if !reflect.DeepEqual(got, want) {
		a, _ := json.MarshalIndent(got, "", " ")
		t.Errorf("components:\n%s", a)
	}
	var ev map[string]string
	if err := json.Unmarshal(EventPayload("main", DoublePress), &ev); err != nil || ev["event_type"] != "double_press" || ev["button"] != "main" {
		t.Errorf("payload %v %v", ev, err)
	}
}
