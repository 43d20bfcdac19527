package firmware_test

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/geisten/geist/firmware"
)

// daemon stands for geist serve: it implements firmware.Actions (and,
// with the same Ask, voice.Asker).
type daemon struct{ log *slog.Logger }

func (d *daemon) Ask(ctx context.Context, session, prompt string) {
	// Enqueue a request like an MQTT ask (answer published, spoken);
	// never wait for the answer here.
}
func (d *daemon) Cancel(ctx context.Context)                          {}
func (d *daemon) NewConversation(ctx context.Context, session string) {}
func (d *daemon) Event(ctx context.Context, button string, kind firmware.Press) {
	// publish firmware.EventPayload(button, kind) on
	// firmware.EventTopic(device, button), QoS 0, not retained.
}

// Example shows how the daemon wires buttons and LEDs: a board without
// GPIO is logged, not fatal.
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
	dev, err := firmware.Open(cfg, log)
	if errors.Is(err, firmware.ErrUnavailable) {
		log.Warn(err.Error()) // "firmware: GPIO unavailable: pins not found: ..."
	} else if err != nil {
		log.Error("bad GPIO configuration", "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	go dev.Run(ctx, &daemon{log}, nil)

	// Around every generation (from any source):
	end := dev.LEDs().Begin()
	end(nil) // or the generation's error: the LEDs blink it
	<-ctx.Done()
}
