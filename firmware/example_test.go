package firmware_test

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
	"github.com/geisten/geist/firmware"
)

// Example shows how the daemon wires buttons and LEDs to the appliance
// core: presses ask through the core, the LEDs follow every generation
// of the core (whichever front end asked), and a board without GPIO is
// logged, not fatal.
func Example() {
	cfg := firmware.Config{
		Buttons: []firmware.Button{{
			Name:        "main",
			Pin:         "GPIO17",
			Press:       &firmware.Action{Do: firmware.ActionAsk, Prompt: "Tell me a story.", Session: "kitchen"},
			LongPress:   &firmware.Action{Do: firmware.ActionCancel},
			DoublePress: &firmware.Action{Do: firmware.ActionNewConversation, Session: "kitchen"},
		}},
		LEDs: firmware.LEDConfig{Red: "GPIO5", Green: "GPIO6", Blue: "GPIO13"},
	}
	log := slog.Default()
	core, err := appliance.New(appliance.Config{Engine: &appliancetest.Engine{}}) // the model, in geist serve
	if err != nil {
		log.Error("core", "err", err)
		return
	}
	dev, err := firmware.Open(cfg, log)
	if errors.Is(err, firmware.ErrUnavailable) {
		log.Warn(err.Error()) // "firmware: GPIO unavailable: pins not found: ..."
	} else if err != nil {
		log.Error("bad GPIO configuration", "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	go core.Run(ctx)
	stop := dev.LEDs().Follow(core)
	defer stop()
	trig := firmware.NewTriggers(firmware.TriggersConfig{Core: core, LEDs: dev.LEDs(), Logger: log})
	dev.Run(ctx, trig, nil)
}
