package firmware

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpioreg"
	"periph.io/x/conn/v3/gpio/gpiotest"
)

// fakeDaemon implements Actions and Talker, running a fake generation of
// genTime for every Ask with the LEDs busy, cancellable by Cancel.
type fakeDaemon struct {
	leds    *LEDs
	genTime time.Duration
	t0      time.Time

	mu     sync.Mutex
	calls  []string
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (f *fakeDaemon) record(format string, a ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("%dms ", time.Since(f.t0).Milliseconds())+fmt.Sprintf(format, a...))
}

func (f *fakeDaemon) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeDaemon) Ask(ctx context.Context, session, prompt string) {
	f.record("ask %s %q", session, prompt)
	f.mu.Lock()
	busy := f.cancel != nil
	f.mu.Unlock()
	if busy {
		f.record("busy")
		return
	}
	gctx, cancel := context.WithCancel(ctx)
	f.mu.Lock()
	f.cancel = cancel
	f.mu.Unlock()
	end := f.leds.Begin()
	f.wg.Go(func() {
		var err error
		select {
		case <-time.After(f.genTime):
			f.record("answered")
		case <-gctx.Done():
			err = gctx.Err()
			f.record("cancelled")
		}
		f.mu.Lock()
		f.cancel = nil
		f.mu.Unlock()
		cancel()
		end(err)
	})
}

func (f *fakeDaemon) Cancel(context.Context) {
	f.record("cancel")
	f.mu.Lock()
	c := f.cancel
	f.mu.Unlock()
	if c != nil {
		c()
	}
}

func (f *fakeDaemon) NewConversation(_ context.Context, session string) {
	f.record("new %s", session)
}
func (f *fakeDaemon) Event(_ context.Context, button string, kind Press) {
	f.record("event %s %s", button, kind)
}
func (f *fakeDaemon) StartTalk(context.Context) { f.record("talk start") }
func (f *fakeDaemon) StopTalk()                 { f.record("talk stop") }

func newPin(name string) *gpiotest.Pin {
	return &gpiotest.Pin{N: name, EdgesChan: make(chan gpio.Level)}
}

func lookupIn(pins ...gpio.PinIO) Lookup {
	return func(name string) gpio.PinIO {
		for _, p := range pins {
			if p.Name() == name {
				return p
			}
		}
		return nil
	}
}

// press holds an active-low button down for d (edges through EdgesChan).
func press(p *gpiotest.Pin, d time.Duration) {
	p.EdgesChan <- gpio.Low
	time.Sleep(d)
	p.EdgesChan <- gpio.High
}

// chatter presses with contact bounce on both edges.
func chatter(p *gpiotest.Pin, d time.Duration) {
	for range 3 {
		p.EdgesChan <- gpio.Low
		time.Sleep(time.Millisecond)
		p.EdgesChan <- gpio.High
		time.Sleep(time.Millisecond)
	}
	p.EdgesChan <- gpio.Low
	time.Sleep(d)
	for range 3 {
		p.EdgesChan <- gpio.High
		time.Sleep(time.Millisecond)
		p.EdgesChan <- gpio.Low
		time.Sleep(time.Millisecond)
	}
	p.EdgesChan <- gpio.High
}

func testConfig() Config {
	return Config{
		Buttons: []Button{{
			Name:        "main",
			Pin:         "GPIO17",
			Press:       &Action{Do: ActionAsk, Prompt: "Tell me a story.", Session: "kitchen"},
			LongPress:   &Action{Do: ActionCancel},
			DoublePress: &Action{Do: ActionNewConversation, Session: "kitchen"},
		}, {
			Name: "talk", Pin: "GPIO27", Talk: true,
		}},
		LEDs:   LEDConfig{Ready: "GPIO5", Busy: "GPIO6", Error: "GPIO13", ErrorFor: time.Second, Blink: 100 * time.Millisecond},
		Timing: Timing{Debounce: 20 * time.Millisecond, LongPress: 800 * time.Millisecond, DoubleGap: 300 * time.Millisecond},
	}
}

type rig struct {
	btn, talk, ready, busy, fail *gpiotest.Pin
	dev                          *Device
	daemon                       *fakeDaemon
	stop                         func()
}

// start opens a Device on fake pins and runs it; call inside a bubble.
func start(t *testing.T, cfg Config) *rig {
	r := &rig{btn: newPin("GPIO17"), talk: newPin("GPIO27"), ready: newPin("GPIO5"), busy: newPin("GPIO6"), fail: newPin("GPIO13")}
	dev, err := OpenWith(cfg, lookupIn(r.btn, r.talk, r.ready, r.busy, r.fail), 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.dev = dev
	r.daemon = &fakeDaemon{leds: dev.LEDs(), genTime: 5 * time.Second, t0: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- dev.Run(ctx, r.daemon, r.daemon) }()
	r.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		r.daemon.wg.Wait()
	}
	synctest.Wait()
	return r
}

// leds returns the lit LEDs as a string such as "R--" (ready), "-B-", "--E".
func (r *rig) leds() string {
	s := []byte("---")
	for i, p := range []*gpiotest.Pin{r.ready, r.busy, r.fail} {
		if p.Read() == gpio.High {
			s[i] = "RBE"[i]
		}
	}
	return string(s)
}

func wantCalls(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("calls:\n got %q\nwant %q", got, want)
	}
}

func TestDeviceShortPressAsksAndLEDsGoBusyThenReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := start(t, testConfig())
		if got := r.leds(); got != "R--" {
			t.Errorf("LEDs at start %s, want R--", got)
		}
		time.Sleep(100 * time.Millisecond)
		chatter(r.btn, 100*time.Millisecond)
		time.Sleep(200 * time.Millisecond) // inside the double gap: nothing yet
		synctest.Wait()
		if c := r.daemon.Calls(); len(c) != 0 {
			t.Errorf("before the double gap ended: %q", c)
		}
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		if got := r.leds(); got != "-B-" {
			t.Errorf("LEDs while generating %s, want -B-", got)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := r.leds(); got != "R--" {
			t.Errorf("LEDs after the answer %s, want R--", got)
		}
		r.stop()
		wantCalls(t, r.daemon.Calls(),
			`532ms event main press`, `532ms ask kitchen "Tell me a story."`, `5532ms answered`)
		if got := r.leds(); got != "---" {
			t.Errorf("LEDs after Run %s, want all off", got)
		}
	})
}

func TestDeviceLongPressCancelsRunningGeneration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := start(t, testConfig())
		press(r.btn, 50*time.Millisecond) // 0..50ms
		time.Sleep(time.Second)           // ask at 370ms
		synctest.Wait()
		if got := r.leds(); got != "-B-" {
			t.Errorf("LEDs while generating %s, want -B-", got)
		}
		// A short press during the generation is handed to the daemon
		// (which says busy); a long press cancels.
		press(r.btn, 50*time.Millisecond)   // 1050..1100, reported at 1420
		time.Sleep(500 * time.Millisecond)  // 1600
		press(r.btn, 1200*time.Millisecond) // long at 1620+800=2420
		synctest.Wait()
		if got := r.leds(); got != "R--" {
			t.Errorf("LEDs after cancel %s, want R--", got)
		}
		r.stop()
		wantCalls(t, r.daemon.Calls(),
			`370ms event main press`, `370ms ask kitchen "Tell me a story."`,
			`1420ms event main press`, `1420ms ask kitchen "Tell me a story."`, `1420ms busy`,
			`2420ms event main long_press`, `2420ms cancel`, `2420ms cancelled`)
	})
}

func TestDeviceDoublePressAndTalk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := start(t, testConfig())
		press(r.btn, 80*time.Millisecond)
		time.Sleep(100 * time.Millisecond)
		chatter(r.btn, 80*time.Millisecond)
		time.Sleep(time.Second)
		press(r.talk, 3*time.Second)
		time.Sleep(time.Second)
		r.stop()
		// double: second release debounced at 80+100+6+80+6+20 = 292ms
		wantCalls(t, r.daemon.Calls(),
			`292ms event main double_press`, `292ms new kitchen`,
			`1292ms talk start`, `4292ms talk stop`)
	})
}

func TestLEDErrorBlinksThenReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := start(t, testConfig())
		l := r.dev.LEDs()
		end := l.Begin()
		synctest.Wait()
		if got, s := r.leds(), l.State(); got != "-B-" || s != StateBusy {
			t.Errorf("busy: LEDs %s state %v", got, s)
		}
		time.Sleep(time.Second)
		end(errors.New("model exploded"))
		end(nil) // idempotent
		var seen []string
		for range 12 { // sample mid-phase every 100ms for 1.2s
			time.Sleep(50 * time.Millisecond)
			synctest.Wait()
			seen = append(seen, r.leds())
			time.Sleep(50 * time.Millisecond)
		}
		want := []string{"--E", "---", "--E", "---", "--E", "---", "--E", "---", "--E", "---", "R--", "R--"}
		if !slices.Equal(seen, want) {
			t.Errorf("error blink:\n got %v\nwant %v", seen, want)
		}
		// An error during a new generation ends when the next one begins;
		// cancellation is not an error.
		l.Fail(errors.New("again"))
		synctest.Wait()
		if s := l.State(); s != StateError {
			t.Errorf("state %v, want error", s)
		}
		end = l.Begin()
		synctest.Wait()
		if got := r.leds(); got != "-B-" {
			t.Errorf("LEDs %s, want -B-", got)
		}
		end(context.Canceled)
		synctest.Wait()
		if got := r.leds(); got != "R--" {
			t.Errorf("LEDs after cancellation %s, want R--", got)
		}
		r.stop()
	})
}

func TestLEDRGBActiveLow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		red, green, blue := newPin("R"), newPin("G"), newPin("B")
		cfg := Config{LEDs: LEDConfig{Red: "R", Green: "G", Blue: "B", ActiveLow: true, ErrorFor: time.Second}}
		dev, err := OpenWith(cfg, lookupIn(red, green, blue), 3, nil)
		if err != nil {
			t.Fatal(err)
		}
		lit := func() string { // active low: lit = Low
			s := ""
			for i, p := range []*gpiotest.Pin{red, green, blue} {
				if p.Read() == gpio.Low {
					s += string("RGB"[i])
				}
			}
			return s
		}
		if got := lit(); got != "" {
			t.Errorf("before Run lit %q", got)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { dev.Run(ctx, nil, nil); close(done) }()
		synctest.Wait()
		steps := []string{lit()}
		end := dev.LEDs().Begin()
		synctest.Wait()
		steps = append(steps, lit())
		end(errors.New("x"))
		synctest.Wait()
		steps = append(steps, lit())
		time.Sleep(2 * time.Second)
		steps = append(steps, lit())
		cancel()
		<-done
		steps = append(steps, lit())
		if want := []string{"G", "B", "R", "G", ""}; !slices.Equal(steps, want) {
			t.Errorf("RGB steps %q, want %q", steps, want)
		}
	})
}

// noEdgePin cannot detect edges (like a sysfs line without interrupts).
type noEdgePin struct{ *gpiotest.Pin }

func (p noEdgePin) In(pull gpio.Pull, edge gpio.Edge) error {
	if edge != gpio.NoEdge {
		return errors.New("edge detection not supported")
	}
	return p.Pin.In(pull, edge)
}

// instantPin's WaitForEdge returns false at once, as gpioioctl does for a
// negative timeout (periph/host #78).
type instantPin struct {
	*gpiotest.Pin
	mu    sync.Mutex
	waits int
}

func (p *instantPin) WaitForEdge(time.Duration) bool {
	p.mu.Lock()
	p.waits++
	p.mu.Unlock()
	return false
}

func TestDevicePollsWithoutEdges(t *testing.T) {
	for _, mode := range []string{"no edges", "edge wait returns at once"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &gpiotest.Pin{N: "GPIO17"}
				var pin gpio.PinIO = noEdgePin{base}
				var inst *instantPin
				if mode != "no edges" {
					base.EdgesChan = make(chan gpio.Level)
					inst = &instantPin{Pin: base}
					pin = inst
				}
				cfg := testConfig()
				cfg.Buttons = cfg.Buttons[:1]
				cfg.LEDs = LEDConfig{}
				dev, err := OpenWith(cfg, lookupIn(pin), 1, nil)
				if err != nil {
					t.Fatal(err)
				}
				f := &fakeDaemon{leds: dev.LEDs(), genTime: time.Second, t0: time.Now()}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { dev.Run(ctx, f, nil); close(done) }()
				time.Sleep(100 * time.Millisecond)
				base.Out(gpio.Low)
				time.Sleep(1500 * time.Millisecond)
				base.Out(gpio.High)
				time.Sleep(time.Second)
				cancel()
				<-done
				c := f.Calls()
				if len(c) < 2 || !strings.HasSuffix(c[0], "event main long_press") || !strings.HasSuffix(c[1], "cancel") {
					t.Errorf("calls %q, want a long press and a cancel", c)
				}
				if inst != nil && inst.waits > 10 {
					t.Errorf("%d edge waits: the loop spins instead of polling", inst.waits)
				}
			})
		})
	}
}

func TestOpenWithMissingPins(t *testing.T) {
	cfg := testConfig()
	btn := newPin("GPIO17")
	dev, err := OpenWith(cfg, lookupIn(btn), 40, nil)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if dev == nil || !slices.Equal(dev.Buttons(), []string{"main"}) {
		t.Fatalf("device should run with the pins found")
	}
	msg := err.Error()
	for _, w := range []string{"GPIO unavailable", "GPIO27", "GPIO5", "GPIO6", "GPIO13", "40 lines"} {
		if !strings.Contains(msg, w) {
			t.Errorf("error %q does not mention %q", msg, w)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []Config{
		{Buttons: []Button{{Name: "a b", Pin: "GPIO1"}}},
		{Buttons: []Button{{Name: "a", Pin: "GPIO1"}, {Name: "a", Pin: "GPIO2"}}},
		{Buttons: []Button{{Name: "a", Pin: "GPIO1"}, {Name: "b", Pin: "GPIO1"}}},
		{Buttons: []Button{{Name: "a"}}},
		{Buttons: []Button{{Name: "a", Pin: "GPIO1", Pull: "sideways"}}},
		{Buttons: []Button{{Name: "a", Pin: "GPIO1", Press: &Action{Do: "explode"}}}},
		{Buttons: []Button{{Name: "a", Pin: "GPIO1", Press: &Action{Do: "ask"}}}},
		{Buttons: []Button{{Name: "a", Pin: "GPIO1"}}, LEDs: LEDConfig{Ready: "GPIO1"}},
		{LEDs: LEDConfig{Ready: "GPIO1", Red: "GPIO2"}},
	}
	for i, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("%d: no error for %+v", i, c)
		} else if !strings.HasPrefix(err.Error(), "firmware: ") {
			t.Errorf("%d: %v", i, err)
		}
		if _, err := OpenWith(c, lookupIn(), 0, nil); err == nil {
			t.Errorf("%d: OpenWith accepted an invalid config", i)
		}
	}
	if err := testConfig().Validate(); err != nil {
		t.Error(err)
	}
}

// TestOpenByName goes through periph's registry, as Open does on a board.
func TestOpenByName(t *testing.T) {
	p := newPin("GEIST_TEST_BTN")
	if err := gpioreg.Register(p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gpioreg.Unregister("GEIST_TEST_BTN") })
	cfg := Config{Buttons: []Button{{Name: "b", Pin: "GEIST_TEST_BTN"}}}
	dev, err := OpenWith(cfg, gpioreg.ByName, 1, nil)
	if err != nil || !slices.Equal(dev.Buttons(), []string{"b"}) {
		t.Fatalf("OpenWith(gpioreg.ByName): %v %v", dev.Buttons(), err)
	}
}
