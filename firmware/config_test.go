package firmware

import (
	"testing"
	"time"

	"github.com/BurntSushi/toml"
)

// TestConfigTOML decodes the example configuration as geist serve's TOML
// loader does: durations as strings, actions as inline tables.
func TestConfigTOML(t *testing.T) {
	var c struct {
		GPIO Config `toml:"gpio"`
	}
	md, err := toml.DecodeFile("testdata/device.toml", &c)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range md.Undecoded() {
		if k[0] == "gpio" {
			t.Errorf("unknown key %s", k)
		}
	}
	g := c.GPIO
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	if g.Timing.LongPress != 800*time.Millisecond || g.LEDs.ErrorFor != 5*time.Second || g.LEDs.Blue != "GPIO13" {
		t.Errorf("timing/LEDs: %+v %+v", g.Timing, g.LEDs)
	}
	if len(g.Buttons) != 2 || g.Buttons[0].Press.Prompt != "Tell me a short story." ||
		g.Buttons[0].LongPress.Do != ActionCancel || !g.Buttons[0].DoubleEnabled() || !g.Buttons[1].Talk {
		t.Errorf("buttons: %+v", g.Buttons)
	}
}
