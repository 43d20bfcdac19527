package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpiotest"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/daemon"
	"github.com/geisten/geist/cmd/internal/daemon/daemontest"
	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/firmware"
	"github.com/geisten/geist/firmware/voice"
	"github.com/geisten/geist/mqtt"
	"github.com/geisten/geist/mqtt/mqtttest"
)

// recPin is a fake output pin that records every level written to it.
type recPin struct {
	*gpiotest.Pin
	mu     sync.Mutex
	levels []gpio.Level
}

func newRecPin(name string) *recPin { return &recPin{Pin: &gpiotest.Pin{N: name}} }

func (p *recPin) Out(l gpio.Level) error {
	p.mu.Lock()
	p.levels = append(p.levels, l)
	p.mu.Unlock()
	return p.Pin.Out(l)
}

// history returns the levels written, with consecutive repeats folded:
// "LHL" is off, on, off.
func (p *recPin) history() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for i, l := range p.levels {
		if i > 0 && l == p.levels[i-1] {
			continue
		}
		if l {
			b.WriteByte('H')
		} else {
			b.WriteByte('L')
		}
	}
	return b.String()
}

func (p *recPin) reset() {
	p.mu.Lock()
	p.levels = p.levels[len(p.levels)-1:]
	p.mu.Unlock()
}

func (p *recPin) lit() bool { return p.Read() == gpio.High }

// fakeGPIO is a serve hook that opens the device on pins instead of the
// board's.
func fakeGPIO(pins ...gpio.PinIO) func(firmware.Config, *slog.Logger) (*firmware.Device, error) {
	return func(fc firmware.Config, log *slog.Logger) (*firmware.Device, error) {
		return firmware.OpenWith(fc, func(name string) gpio.PinIO {
			for _, p := range pins {
				if p.Name() == name {
					return p
				}
			}
			return nil
		}, len(pins), log)
	}
}

// hold presses an active-low button (pull-up, to ground) for d and
// releases it; the release is debounced before hold returns.
func hold(p *gpiotest.Pin, d time.Duration) {
	p.EdgesChan <- gpio.Low
	time.Sleep(d)
	p.EdgesChan <- gpio.High
	time.Sleep(2 * firmware.DefaultDebounce)
}

// slowEngine throttles an engine per streamed piece while slow is set, so
// that a long press lands in the middle of a generation on any machine
// (the tiny model writes hundreds of tokens per second).
type slowEngine struct {
	appliance.Engine
	slow *atomic.Bool
}

func (g slowEngine) Generate(ctx context.Context, req engine.Request) (engine.Stats, error) {
	onText := req.OnText
	req.OnText = func(b []byte) error {
		if g.slow.Load() {
			time.Sleep(50 * time.Millisecond)
		}
		return onText(b)
	}
	return g.Engine.Generate(ctx, req)
}

func lastOn(msgs []mqtttest.Msg, topic string) []byte {
	m := mqtttest.On(msgs, topic)
	if len(m) == 0 {
		return nil
	}
	return m[len(m)-1].Payload
}

// TestServeButtonEndToEnd is issue 7, item 2: geist serve with the zoo
// model, a real Mosquitto and fake pins (gpiotest, through serve's GPIO
// hook). A short press asks the configured prompt: the answer is published
// (answer topic, answer event), spoken (a stub speech command), and the
// busy LED goes on, then the ready LED. A long press cancels a running
// generation (the model is slowed to 50 ms per token for that part: it writes
// 60 tokens in a tenth of a second natively). A
// double press starts a new conversation; push-to-talk (stub capture and
// speech-to-text commands) asks the transcript.
func TestServeButtonEndToEnd(t *testing.T) {
	model := zoo.Path(t, "models", serveModel)
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/btn/#", "homeassistant/#")
	dir := t.TempDir()
	spoken := filepath.Join(dir, "spoken.txt")
	conf := filepath.Join(dir, "geist.toml")
	os.WriteFile(conf, []byte(fmt.Sprintf(`model = %q
device = "btn"
ctx = 1024
threads = 1
[mqtt]
broker = %q
[limits]
max_tokens = 60
[generation]
temperature = 0.0
[gpio.timing]
long_press = "300ms"
double_gap = "250ms"
[gpio.leds]
ready = "GPIO5"
busy = "GPIO6"
error = "GPIO13"
[[gpio.buttons]]
name = "main"
pin = "GPIO17"
press = { do = "ask", prompt = "Once upon a time", session = "kitchen" }
long_press = { do = "cancel" }
double_press = { do = "new_conversation", session = "kitchen" }
[[gpio.buttons]]
name = "talk"
pin = "GPIO27"
talk = true
[voice.talk]
capture = ["sh", "-c", "echo audio > \"$0\"; exec sleep 30", "{file}"]
stt = ["sh", "-c", "test -s \"$0\" && echo 'Lily went to the park.'", "{file}"]
session = "voice"
[voice.speech]
command = ["sh", "-c", "cat >> %s"]
`, model, b.URL, spoken)), 0o600)
	cfg, err := daemon.ParseConfig(&cli.Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}, []string{"--config", conf, "--http", "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}

	btn := &gpiotest.Pin{N: "GPIO17", EdgesChan: make(chan gpio.Level)}
	talk := &gpiotest.Pin{N: "GPIO27", EdgesChan: make(chan gpio.Level)}
	ready, busy, fail := newRecPin("GPIO5"), newRecPin("GPIO6"), newRecPin("GPIO13")
	pins := []gpio.PinIO{btn, talk, ready, busy, fail}
	var slow atomic.Bool
	hooks := daemon.Hooks{
		OpenGPIO:   fakeGPIO(pins...),
		WrapEngine: func(e appliance.Engine) appliance.Engine { return slowEngine{e, &slow} },
	}
	logs := &daemontest.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- daemon.Run(ctx, &cfg, log, hooks) }()
	var once sync.Once
	var serveErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case serveErr = <-served:
			case <-time.After(30 * time.Second):
				t.Fatalf("serve did not stop; log:\n%s", logs.String())
			}
		})
		return serveErr
	}
	defer stop()
	fatal := func(format string, a ...any) {
		t.Helper()
		t.Fatalf("%s; log:\n%s", fmt.Sprintf(format, a...), logs.String())
	}
	if _, ok := c.Wait(30*time.Second, func(m []mqtttest.Msg) bool { return string(lastOn(m, "geist/btn/status")) == "online" }); !ok {
		fatal("not online")
	}
	waitFor(t, 10*time.Second, "the ready LED", ready.lit)

	// Home Assistant discovery carries the button's event entity.
	msgs, ok := c.Wait(10*time.Second, func(m []mqtttest.Msg) bool { return lastOn(m, "homeassistant/device/geist_btn/config") != nil })
	if !ok {
		fatal("no discovery")
	}
	var disc struct {
		Cmps map[string]map[string]any `json:"cmps"`
	}
	json.Unmarshal(lastOn(msgs, "homeassistant/device/geist_btn/config"), &disc)
	ev := disc.Cmps["button_main"]
	types, _ := json.Marshal(ev["event_types"])
	if ev["p"] != "event" || ev["state_topic"] != "geist/btn/button/main" || string(types) != `["press","long_press","double_press"]` || ev["availability"] == nil {
		t.Errorf("button event entity: %v", ev)
	}
	if _, ok := disc.Cmps["button_talk"]; ok {
		t.Error("the push-to-talk button got an event entity")
	}

	// 1. A short press asks the configured prompt.
	busy.reset()
	ready.reset()
	c.Reset()
	hold(btn, 80*time.Millisecond)
	msgs, ok = c.Wait(30*time.Second, func(m []mqtttest.Msg) bool { return lastOn(m, "geist/btn/answer") != nil })
	if !ok {
		fatal("short press: no answer")
	}
	var a reply
	json.Unmarshal(lastOn(msgs, "geist/btn/answer"), &a)
	if !a.Done || a.Text == "" || a.Session != "kitchen" || a.ServedBy != "btn" || a.Usage.GeneratedTokens == 0 {
		t.Errorf("short press answer %+v", a)
	}
	if p := lastOn(msgs, "geist/btn/button/main"); string(p) != `{"event_type":"press","button":"main"}` {
		t.Errorf("press event %s", p)
	}
	if _, ok := c.Wait(5*time.Second, func(m []mqtttest.Msg) bool {
		return strings.Contains(string(lastOn(m, "geist/btn/event")), `"event_type":"answer"`)
	}); !ok {
		t.Error("no answer event")
	}
	waitFor(t, 5*time.Second, "the ready LED after the answer", ready.lit)
	if h := busy.history(); !strings.Contains(h, "LHL") || busy.lit() {
		t.Errorf("busy LED %s, want off, on, off", h)
	}
	if h := ready.history(); !strings.HasPrefix(h, "HL") || !strings.HasSuffix(h, "LH") {
		t.Errorf("ready LED %s, want on, off (busy), on", h)
	}
	// Spoken, sentence by sentence, by the stub speech command.
	squash := func(s string) string { return strings.Join(strings.Fields(s), "") }
	var said string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(spoken)
		if said = string(b); squash(said) == squash(a.Text) {
			break
		}
	}
	if squash(said) != squash(a.Text) {
		t.Errorf("spoken %q, answer %q", said, a.Text)
	}
	t.Logf("short press: %d tokens at %.0f tok/s, %d spoken lines; busy LED %s, ready LED %s",
		a.Usage.GeneratedTokens, a.Usage.TokS, strings.Count(said, "\n"), busy.history(), ready.history())

	// 2. A long press cancels a running generation.
	slow.Store(true)
	c.Reset()
	hold(btn, 80*time.Millisecond)
	waitFor(t, 20*time.Second, "the busy LED", busy.lit)
	time.Sleep(100 * time.Millisecond)
	hold(btn, 600*time.Millisecond)
	msgs, ok = c.Wait(30*time.Second, func(m []mqtttest.Msg) bool { return lastOn(m, "geist/btn/answer") != nil })
	if !ok {
		fatal("long press: no reply")
	}
	var r reply
	json.Unmarshal(lastOn(msgs, "geist/btn/answer"), &r)
	if r.code() != mqtt.CodeCancelled {
		t.Errorf("after a long press: %+v, want cancelled", r)
	}
	if ev := mqtttest.On(msgs, "geist/btn/button/main"); len(ev) != 2 || string(ev[1].Payload) != `{"event_type":"long_press","button":"main"}` {
		t.Errorf("events %v", ev)
	}
	waitFor(t, 5*time.Second, "the ready LED after the cancel", ready.lit)
	if busy.lit() || fail.history() != "L" {
		t.Errorf("after a cancel: busy LED %s, error LED %s (a cancel is no error)", busy.history(), fail.history())
	}
	slow.Store(false)

	// 3. A double press forgets the session.
	hold(btn, 60*time.Millisecond) // returns 60 ms after the release
	hold(btn, 60*time.Millisecond)
	waitForLog(t, logs, 10*time.Second, "the new conversation", func() bool {
		return strings.Contains(logs.String(), `msg="new conversation" session=kitchen`)
	})

	// 4. Push-to-talk: the transcript is asked in the voice session.
	c.Reset()
	hold(talk, 400*time.Millisecond)
	msgs, ok = c.Wait(30*time.Second, func(m []mqtttest.Msg) bool { return lastOn(m, "geist/btn/answer") != nil })
	if !ok {
		fatal("push-to-talk: no answer")
	}
	json.Unmarshal(lastOn(msgs, "geist/btn/answer"), &a)
	if !a.Done || a.Session != "voice" || a.Text == "" {
		t.Errorf("push-to-talk answer %+v", a)
	}
	if !strings.Contains(logs.String(), `transcript="Lily went to the park."`) {
		t.Errorf("transcript not logged")
	}

	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if ready.lit() || busy.lit() {
		t.Error("LEDs still lit after shutdown")
	}
	if l := logs.String(); !strings.Contains(l, "device triggers") || strings.Contains(l, "GPIO unavailable") {
		t.Errorf("log:\n%s", l)
	}
}

// TestServeButtonsWithoutGPIO is issue 7, item 5: on a machine without
// GPIO, geist serve (the real entry point, with firmware.Open) starts with
// buttons and LEDs configured, says clearly that the pins are unavailable,
// and keeps answering over MQTT.
func TestServeButtonsWithoutGPIO(t *testing.T) {
	if daemon.HasGPIOChip() {
		t.Skip("this machine has a GPIO chip; the test is for machines without GPIO")
	}
	model := zoo.Path(t, "models", serveModel)
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/nogpio/#")
	conf := filepath.Join(t.TempDir(), "geist.toml")
	os.WriteFile(conf, []byte(`[gpio.leds]
red = "GPIO5"
green = "GPIO6"
blue = "GPIO13"
[[gpio.buttons]]
name = "main"
pin = "GPIO17"
press = { do = "ask", prompt = "Tell me a story." }
long_press = { do = "cancel" }
`), 0o600)
	stop, logs := runServe(t, "--config", conf, "-m", model, "--broker", b.URL, "--device", "nogpio", "--max-tokens", "16", "--ctx", "256")
	if _, ok := c.Wait(30*time.Second, func(m []mqtttest.Msg) bool { return string(lastOn(m, "geist/nogpio/status")) == "online" }); !ok {
		t.Fatalf("not online; log:\n%s", logs.String())
	}
	c.Publish(t, "geist/nogpio/ask", []byte(`{"id":"q1","text":"Once upon a time"}`))
	if r := waitReply(t, c, "geist/nogpio/answer/q1", 20*time.Second); r.code() != "answer" || r.Text == "" {
		t.Errorf("answer %+v", r)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit status %d; log:\n%s", code, logs.String())
	}
	// No GPIO chip is not an error: one line says GPIO is off and how to
	// skip it.
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "GPIO") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "level=INFO") || !strings.Contains(lines[0], "GPIO off") || !strings.Contains(lines[0], "--gpio=false") {
		t.Errorf("want one line saying GPIO is off; log:\n%s", logs.String())
	}
	t.Logf("%s", lines)
}

func TestServeDeviceConfig(t *testing.T) {
	dir := t.TempDir()
	e := &cli.Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte("model = \"m.gguf\"\n"+body), 0o600)
		return p
	}
	// The device sections decode, [hermes] with its own credentials.
	good := write("good.toml", `
[gpio.timing]
long_press = "1.5s"
[gpio.leds]
ready = "GPIO5"
[[gpio.buttons]]
name = "main"
pin = "GPIO17"
press = { do = "ask", prompt = "Hello", session = "kitchen" }
[voice.speech]
command = ["espeak-ng", "-v", "en-us"]
[hermes]
broker = "tcp://rhasspy:12183"
mode = "dialogue"
sites = ["kitchen"]
client_id = "geist-hermes"
username = "u"
`)
	c, err := daemon.ParseConfig(e, []string{"--config", good})
	if err != nil {
		t.Fatal(err)
	}
	if c.GPIO.Timing.LongPress != 1500*time.Millisecond || c.GPIO.Buttons[0].Press.Prompt != "Hello" || c.GPIO.LEDs.Ready != "GPIO5" ||
		c.Voice.Speech == nil || c.Voice.Speech.Command[0] != "espeak-ng" || c.Voice.Talk != nil ||
		c.Hermes == nil || c.Hermes.Broker != "tcp://rhasspy:12183" || c.Hermes.Mode != "dialogue" || c.Hermes.ClientID != "geist-hermes" || c.Hermes.Username != "u" {
		t.Errorf("decoded %+v %+v %+v", c.GPIO, c.Voice, c.Hermes)
	}
	// Flags win.
	c, err = daemon.ParseConfig(e, []string{"--config", good, "--gpio=false", "--hermes-site", "a,b", "--hermes-mode", "asr", "--speech", "piper -m x.onnx --output-raw", "--speech-play", "aplay -q"})
	if err != nil {
		t.Fatal(err)
	}
	if daemon.GPIOConfigured(c.GPIO) || !slices.Equal(c.Hermes.Sites, []string{"a", "b"}) || c.Hermes.Mode != "asr" || c.Hermes.Broker != "tcp://rhasspy:12183" ||
		!slices.Equal(c.Voice.Speech.Command, []string{"piper", "-m", "x.onnx", "--output-raw"}) || c.Voice.Speech.Play[0] != "aplay" {
		t.Errorf("flags over the file: %+v %+v %+v", c.GPIO, c.Voice.Speech, c.Hermes)
	}
	c, err = daemon.ParseConfig(e, []string{"--config", good, "--hermes=false", "--speech", ""})
	if err != nil || c.Hermes != nil || c.Voice.Speech != nil {
		t.Errorf("--hermes=false --speech '': %v %+v %+v", err, c.Hermes, c.Voice.Speech)
	}
	c, err = daemon.ParseConfig(e, []string{"-m", "m.gguf", "--hermes-broker", "tcp://h:1", "--talk-capture", "arecord {file}", "--talk-stt", "whisper-cli -f {file}"})
	if err != nil || c.Hermes == nil || c.Hermes.Broker != "tcp://h:1" || c.Voice.Talk == nil || c.Voice.Talk.STT[2] != "{file}" {
		t.Errorf("flags alone: %v %+v %+v", err, c.Hermes, c.Voice.Talk)
	}
	// Command flags are split as a shell would: a quoted path with a
	// space stays one word; {text} stays a word of its own.
	c, err = daemon.ParseConfig(e, []string{"-m", "m.gguf", "--speech", `piper -m '/opt/my voices/en.onnx' --text "{text}"`, "--speech-play", `aplay\ x -q`})
	if err != nil || !slices.Equal(c.Voice.Speech.Command, []string{"piper", "-m", "/opt/my voices/en.onnx", "--text", "{text}"}) ||
		!slices.Equal(c.Voice.Speech.Play, []string{"aplay x", "-q"}) {
		t.Errorf("quoted command words: %v %q %q", err, c.Voice.Speech.Command, c.Voice.Speech.Play)
	}
	if code, _, errs := geist(t, "", "serve", "-m", "m.gguf", "--speech", `espeak-ng "unclosed`); code != 2 || !strings.Contains(errs, "--speech") {
		t.Errorf("an unclosed quote: status %d, %q", code, errs)
	}

	// Mistakes are usage errors that name the problem.
	for _, tc := range []struct{ body, want string }{
		{"[gpio.leds]\ngren = \"GPIO6\"\n", "unknown key gpio.leds.gren"},
		{"[[gpio.buttons]]\nname = \"a\"\npin = \"GPIO17\"\npres = { do = \"cancel\" }\n", "unknown key gpio.buttons.pres"},
		{"[hermes]\nsite = [\"x\"]\n", "unknown key hermes.site"},
		{"[voice.speech]\ncmd = [\"x\"]\n", "unknown key voice.speech.cmd"},
		{"[[gpio.buttons]]\nname = \"a\"\npin = \"GPIO17\"\npress = { do = \"ask\" }\n", "ask needs a prompt"},
		{"[[gpio.buttons]]\nname = \"a\"\npin = \"GPIO17\"\ntalk = true\n", "[voice.talk] is not configured"},
		{"[hermes]\nmode = \"chat\"\n", `mode "chat"`},
		{"[gpio.timing]\nlong_press = \"soon\"\n", "soon"},
	} {
		p := write("bad.toml", tc.body)
		code, _, errs := geist(t, "", "serve", "--config", p)
		if code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("%q: status %d, %q; want %q", tc.body, code, errs, tc.want)
		}
	}
}

func waitForLog(t *testing.T, logs *daemontest.SyncBuffer, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; log:\n%s", what, logs.String())
		}
	}
}

// TestServeHermes runs geist serve with the Hermes bridge on its own
// broker: a transcript on hermes/asr/textCaptured for the configured site
// is answered sentence by sentence on hermes/tts/say; other sites are
// ignored. (The bridge's own behaviour is tested in mqtt/hermes.)
func TestServeHermes(t *testing.T) {
	model := zoo.Path(t, "models", serveModel)
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "hermes/#", "geist/hermes/answer")
	stop, logs := runServe(t, "-m", model, "--broker", b.URL, "--device", "hermes", "--max-tokens", "60", "--ctx", "512", "--temp", "0",
		"--hermes-mode", "asr", "--hermes-site", "kitchen")
	waitFor(t, 20*time.Second, "the Hermes bridge to subscribe", func() bool {
		return strings.Contains(logs.String(), "mqtt connected") && strings.Contains(logs.String(), "hermes")
	})
	time.Sleep(300 * time.Millisecond) // the bridge's subscription
	c.Publish(t, "hermes/asr/textCaptured", []byte(`{"text":"Once upon a time","siteId":"bathroom","sessionId":"x"}`))
	c.Publish(t, "hermes/asr/textCaptured", []byte(`{"text":"Once upon a time","siteId":"kitchen","sessionId":"s1"}`))
	says := func() []map[string]any {
		var out []map[string]any
		for _, x := range mqtttest.On(c.Messages(), "hermes/tts/say") {
			var v map[string]any
			json.Unmarshal(x.Payload, &v)
			out = append(out, v)
		}
		return out
	}
	// Acknowledge every sentence as Rhasspy's TTS does (the bridge waits
	// for sayFinished before it sends the next) until the answer is done.
	acked := map[string]bool{}
	quiet := time.Now() // since the last new sentence
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not answered; log:\n%s", logs.String())
		}
		for _, v := range says() {
			if id, _ := v["id"].(string); id != "" && !acked[id] {
				acked[id] = true
				quiet = time.Now()
				fin, _ := json.Marshal(map[string]any{"id": id, "siteId": v["siteId"], "sessionId": v["sessionId"]})
				c.Publish(t, "hermes/tts/sayFinished", fin)
			}
		}
		if strings.Contains(logs.String(), "msg=answered") && time.Since(quiet) > 500*time.Millisecond {
			break
		}
	}
	got := says()
	if len(got) == 0 {
		t.Fatalf("no tts/say; log:\n%s", logs.String())
	}
	var text strings.Builder
	for _, v := range got {
		if v["siteId"] != "kitchen" || v["sessionId"] != "s1" {
			t.Errorf("say %v", v)
		}
		text.WriteString(fmt.Sprint(v["text"], " "))
	}
	if len(mqtttest.On(c.Messages(), "geist/hermes/answer")) != 0 {
		t.Error("a Hermes answer was published on geist's answer topic")
	}
	t.Logf("%d sentences said: %q", len(got), text.String())
	if code := stop(); code != 0 {
		t.Fatalf("exit status %d; log:\n%s", code, logs.String())
	}
}

// TestServeButtonsWithoutBroker is issue 11's button walk through geist
// serve with no broker configured (no MQTT front end at all): a press on
// a gpiotest pin asks the appliance core, the answer is spoken (a stub
// speech command) and logged, and the LEDs follow.
func TestServeButtonsWithoutBroker(t *testing.T) {
	model := zoo.Path(t, "models", serveModel)
	cfg := daemon.DefaultConfig()
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.Model, cfg.Device, cfg.Ctx, cfg.Threads = model, "solo", 256, 1
	cfg.Limits.MaxTokens = 16
	cfg.Generation.Temperature = 0
	spoken := filepath.Join(t.TempDir(), "spoken.txt")
	cfg.Voice.Speech = &voice.SpeakerConfig{Command: []string{"sh", "-c", "cat >> " + spoken}}
	cfg.GPIO = firmware.Config{
		Buttons: []firmware.Button{{Name: "main", Pin: "GPIO17", Press: &firmware.Action{Do: firmware.ActionAsk, Prompt: "Once upon a time"}}},
		LEDs:    firmware.LEDConfig{Busy: "GPIO6", Ready: "GPIO5"},
	}
	btn := &gpiotest.Pin{N: "GPIO17", EdgesChan: make(chan gpio.Level)}
	ready, busy := newRecPin("GPIO5"), newRecPin("GPIO6")
	pins := []gpio.PinIO{btn, ready, busy}
	// 5 ms a piece: the tiny model would be done before the LED loop
	// looked.
	hooks := daemon.Hooks{OpenGPIO: fakeGPIO(pins...), WrapEngine: func(e appliance.Engine) appliance.Engine { return throttled{e, 5 * time.Millisecond} }}
	logs := &daemontest.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- daemon.Run(ctx, &cfg, slog.New(slog.NewTextHandler(logs, nil)), hooks) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()
	waitForLog(t, logs, 20*time.Second, "the ready LED", ready.lit)
	hold(btn, 80*time.Millisecond)
	waitForLog(t, logs, 30*time.Second, "the answer", func() bool { return strings.Contains(logs.String(), "msg=answer component=triggers source=button") })
	waitFor(t, 5*time.Second, "the ready LED after the answer", ready.lit)
	if !strings.Contains(busy.history(), "LH") || !strings.Contains(logs.String(), "no MQTT broker configured") {
		t.Errorf("busy LED %s; log:\n%s", busy.history(), logs.String())
	}
	var answer string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "msg=answer component=triggers source=button") {
			answer = l[strings.Index(l, "text=")+len("text="):]
		}
	}
	answer, _ = strconv.Unquote(answer)
	squash := func(s string) string { return strings.Join(strings.Fields(s), "") }
	var said string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(spoken)
		if said = string(b); answer != "" && squash(said) == squash(answer) {
			break
		}
	}
	if answer == "" || squash(said) != squash(answer) {
		t.Errorf("spoken %q, answer logged %q", said, answer)
	}
	t.Logf("without a broker: answer %q spoken; busy LED %s", answer, busy.history())
}
