package firmware

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpiotest"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
	"github.com/geisten/geist/firmware/voice"
)

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestTriggersWithoutBroker is issue 11's button walk with no MQTT at
// all: a press on a gpiotest pin asks the appliance core as a button,
// the answer is spoken (a stub speech command) and logged, the busy LED
// goes back to ready; a generation from another front end lights the busy
// LED too; a long press cancels it (no error blink).
func TestTriggersWithoutBroker(t *testing.T) {
	eng := &appliancetest.Engine{Words: 6, Delay: 2 * time.Millisecond}
	logFile := filepath.Join(t.TempDir(), "log")
	f, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	log := slog.New(slog.NewTextHandler(f, nil))
	logs := func() string { b, _ := os.ReadFile(logFile); return string(b) }
	core := appliancetest.Start(t, appliance.Config{Engine: eng, Logger: log})
	spoken := filepath.Join(t.TempDir(), "spoken.txt")
	speaker, err := voice.NewSpeaker(voice.SpeakerConfig{Command: []string{"sh", "-c", "cat >> " + spoken}}, log)
	if err != nil {
		t.Fatal(err)
	}
	btn := newPin("GPIO17")
	busy, ready := &gpiotest.Pin{N: "GPIO6"}, &gpiotest.Pin{N: "GPIO5"}
	cfg := Config{
		Buttons: []Button{{Name: "main", Pin: "GPIO17",
			Press:     &Action{Do: ActionAsk, Prompt: "Once upon a time", Session: "kitchen"},
			LongPress: &Action{Do: ActionCancel}}},
		LEDs:   LEDConfig{Ready: "GPIO5", Busy: "GPIO6"},
		Timing: Timing{LongPress: 300 * time.Millisecond},
	}
	dev, err := OpenWith(cfg, lookupIn(btn, busy, ready), 3, log)
	if err != nil {
		t.Fatal(err)
	}
	var presses []string
	var mu sync.Mutex
	trig := NewTriggers(TriggersConfig{Core: core, Speaker: speaker, LEDs: dev.LEDs(), Logger: log,
		OnPress: func(b string, k Press) { mu.Lock(); presses = append(presses, b+" "+k.String()); mu.Unlock() }})
	core.Serve(func(ctx context.Context) error { speaker.Run(ctx); return nil })
	stop := dev.LEDs().Follow(core)
	core.Serve(func(ctx context.Context) error { return dev.Run(ctx, trig, nil) })
	defer func() {
		core.Stop()
		stop()
	}()
	waitUntil(t, "the ready LED", func() bool { return ready.Read() == gpio.High })

	// A short press: asked as a button in its session, answered, spoken, logged.
	press(btn, 50*time.Millisecond)
	waitUntil(t, "the answer", func() bool { return strings.Contains(logs(), `msg=answer source=button session=kitchen`) })
	waitUntil(t, "the speech", func() bool {
		b, _ := os.ReadFile(spoken)
		return strings.Join(strings.Fields(string(b)), " ") == "w0 w1 w2 w3 w4 w5."
	})
	st := core.Snapshot()
	if st.Requests[appliance.SourceButton]["answered"] != 1 {
		t.Errorf("counters %+v", st.Requests)
	}
	if r := eng.Requests(); len(r) != 1 || appliancetest.Prompt(r[0]) != "Once upon a time" {
		t.Errorf("engine requests %+v", r)
	}
	waitUntil(t, "the ready LED after the answer", func() bool { return ready.Read() == gpio.High && busy.Read() == gpio.Low })

	// Another front end's generation lights the busy LED too.
	eng.Hold()
	tk, err := core.Submit(context.Background(), appliance.Request{Source: appliance.SourceHTTP, Text: "x"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the busy LED for an HTTP request", func() bool { return busy.Read() == gpio.High })
	// A long press cancels it; a cancel is no failure.
	press(btn, 400*time.Millisecond)
	if o := tk.Outcome(); o.Err == nil || o.Err.Code != appliance.CodeCancelled {
		t.Errorf("after a long press: %+v", o)
	}
	eng.Release()
	waitUntil(t, "the ready LED after the cancel", func() bool { return ready.Read() == gpio.High })
	if s := dev.LEDs().State(); s != StateReady {
		t.Errorf("LEDs %v after a cancel", s)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(presses, ",") != "main press,main long_press" {
		t.Errorf("presses %q", presses)
	}
	t.Logf("log:\n%s", logs())
}

// TestButtonThinkingNotSpoken: a button's ask goes out with
// enable_thinking false, and of a model that thinks all the same only the
// content reaches the speaker.
func TestButtonThinkingNotSpoken(t *testing.T) {
	eng := &appliancetest.Engine{Script: appliancetest.Thinker}
	log := slog.New(slog.DiscardHandler)
	core := appliancetest.Start(t, appliance.Config{Engine: eng, Logger: log})
	spoken := filepath.Join(t.TempDir(), "spoken.txt")
	speaker, err := voice.NewSpeaker(voice.SpeakerConfig{Command: []string{"sh", "-c", "cat >> " + spoken}}, log)
	if err != nil {
		t.Fatal(err)
	}
	core.Serve(func(ctx context.Context) error { speaker.Run(ctx); return nil })
	trig := NewTriggers(TriggersConfig{Core: core, Speaker: speaker, Logger: log})
	trig.Ask(context.Background(), "kitchen", "what is it?")
	waitUntil(t, "the speech", func() bool {
		b, _ := os.ReadFile(spoken)
		return strings.Join(strings.Fields(string(b)), " ") == appliancetest.ThinkerContent
	})
	trig.Wait()
	if r := eng.Requests(); len(r) != 1 || r[0].TemplateVars["enable_thinking"] != false {
		t.Errorf("asked with template variables %v, want enable_thinking false", r[0].TemplateVars)
	}
}
