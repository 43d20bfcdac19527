package voice

import (
	"slices"
	"testing"

	"github.com/BurntSushi/toml"
)

func TestConfigTOML(t *testing.T) {
	var c struct {
		Voice Config `toml:"voice"`
	}
	md, err := toml.DecodeFile("../testdata/device.toml", &c)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range md.Undecoded() {
		if k[0] == "voice" {
			t.Errorf("unknown key %s", k)
		}
	}
	if c.Voice.Talk == nil || c.Voice.Speech == nil {
		t.Fatalf("%+v", c.Voice)
	}
	if c.Voice.Talk.Capture[0] != "arecord" || !slices.Contains(c.Voice.Talk.STT, FilePlaceholder) || c.Voice.Talk.Session != "kitchen" {
		t.Errorf("talk: %+v", c.Voice.Talk)
	}
	if _, err := NewPushToTalk(*c.Voice.Talk, &fakeAsker{}, nil); err != nil {
		t.Error(err)
	}
	if _, err := NewSpeaker(*c.Voice.Speech, nil); err != nil {
		t.Error(err)
	}
}
