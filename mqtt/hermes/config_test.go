package hermes

import (
	"slices"
	"testing"

	"github.com/BurntSushi/toml"
)

func TestConfigTOML(t *testing.T) {
	var c struct {
		Hermes Config `toml:"hermes"`
	}
	md, err := toml.DecodeFile("../../firmware/testdata/device.toml", &c)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range md.Undecoded() {
		if k[0] == "hermes" {
			t.Errorf("unknown key %s", k)
		}
	}
	h := c.Hermes
	if h.Broker != "tcp://127.0.0.1:12183" || h.Mode != ModeDialogue || !slices.Equal(h.Sites, []string{"kitchen"}) || h.Lang != "en" {
		t.Errorf("%+v", h)
	}
	if _, err := New(h, &slowGen{}, nil); err != nil {
		t.Error(err)
	}
}
