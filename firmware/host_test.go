package firmware

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"periph.io/x/conn/v3/gpio/gpioreg"
)

// TestOpenWithoutGPIO: on a machine without the configured pins (CI),
// Open reports clearly that GPIO is unavailable and still returns a
// Device that runs and stops.
func TestOpenWithoutGPIO(t *testing.T) {
	cfg := testConfig()
	cfg.Buttons[0].Pin = "GEIST_NO_SUCH_PIN"
	dev, err := Open(cfg, nil)
	if gpioreg.ByName("GPIO27") != nil {
		t.Skip("this machine has GPIO27; the no-GPIO path cannot be shown here")
	}
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open: err = %v, want ErrUnavailable", err)
	}
	t.Logf("Open reports: %v", err)
	if !strings.Contains(err.Error(), "GPIO unavailable") || !strings.Contains(err.Error(), "GEIST_NO_SUCH_PIN") {
		t.Errorf("unclear error: %v", err)
	}
	if dev == nil {
		t.Fatal("no Device: the daemon could not keep running")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := dev.Run(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	if s := dev.LEDs().State(); s != StateOff {
		t.Errorf("LED state after Run %v", s)
	}
}

func TestListPins(t *testing.T) {
	pins, err := ListPins()
	if err != nil {
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("ListPins: %v", err)
		}
		t.Logf("ListPins: %v", err)
		return
	}
	if len(pins) == 0 {
		t.Fatal("no pins and no error")
	}
	t.Logf("%d pins, first %+v", len(pins), pins[0])
}
