package mqtt

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
	"github.com/geisten/geist/mqtt/mqtttest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/mqtt")

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startService runs an appliance core over eng and a Service on it until
// the end of the test, and waits until it is connected. mod adjusts the
// core's configuration.
func startService(t *testing.T, cfg Config, eng *appliancetest.Engine, mod func(*appliance.Config)) (*Service, *appliance.Core) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	cfg.MaxReconnectInterval = 500 * time.Millisecond
	cc := appliance.Config{Engine: eng, Logger: cfg.Logger}
	if mod != nil {
		mod(&cc)
	}
	core := appliancetest.Start(t, cc)
	s, err := New(cfg, core)
	if err != nil {
		t.Fatal(err)
	}
	core.Serve(s.Run)
	for deadline := time.Now().Add(10 * time.Second); !s.Connected(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("service did not connect")
		}
	}
	return s, core.Core
}

func decode[T any](t testing.TB, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return v
}

func TestDiscoveryGolden(t *testing.T) {
	got, err := DiscoveryPayload(DiscoveryInfo{Device: "kitchen", Version: "v1.2.3", Model: "stories260K-Q4_0"})
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("..", "testdata", "mqtt", "discovery.golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./mqtt -run Golden -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("discovery payload differs from %s (rerun with -update if intended):\n%s", path, got)
	}
	var p struct {
		O    map[string]any            `json:"o"`
		Cmps map[string]map[string]any `json:"cmps"`
	}
	if err := json.Unmarshal(got, &p); err != nil {
		t.Fatal(err)
	}
	if p.O["name"] != "geist" || p.O["sw"] != "v1.2.3" {
		t.Errorf("origin %v", p.O)
	}
	if strings.Contains(string(got), "object_id") {
		t.Error("payload uses the removed object_id")
	}
	for id, c := range p.Cmps {
		av, _ := json.Marshal(c["availability"])
		if !strings.Contains(string(av), `"geist/kitchen/status"`) || c["unique_id"] != id || c["default_entity_id"] == nil || c["p"] == nil {
			t.Errorf("component %s: %v", id, c)
		}
	}
}

// TestDiscoveryButtonsGolden pins the discovery payload of a device with
// buttons (their event entities; a push-to-talk button reports no events
// and gets none) and the button event payloads, in
// testdata/mqtt/discovery-buttons.golden.
func TestDiscoveryButtonsGolden(t *testing.T) {
	buttons := []Button{
		{Name: "main", EventTypes: []string{"press", "long_press", "double_press"}},
		{Name: "side-2", EventTypes: []string{"press", "long_press"}},
		{Name: "talk"},
	}
	p, err := DiscoveryPayload(DiscoveryInfo{Device: "kitchen", Version: "v1.2.3", Model: "stories260K-Q4_0", Buttons: buttons})
	if err != nil {
		t.Fatal(err)
	}
	got := append(p, '\n')
	for _, k := range []string{"press", "long_press", "double_press"} {
		got = fmt.Appendf(got, "%s %s\n", ButtonTopic("kitchen", "side-2"), ButtonPayload("side-2", k))
	}
	path := filepath.Join("..", "testdata", "mqtt", "discovery-buttons.golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("discovery with buttons differs from %s (%v; rerun with -update if intended):\n%s", path, err, got)
	}
}

func TestStateGolden(t *testing.T) {
	// The state payload's shape is part of the contract (the discovery
	// templates read it).
	core, err := appliance.New(appliance.Config{Engine: &appliancetest.Engine{}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Broker: "tcp://127.0.0.1:1", Device: "kitchen", Model: "m", Version: "v"}, core)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.MarshalIndent(s.CurrentState(), "", "  ")
	got = append(got, '\n')
	path := filepath.Join("..", "testdata", "mqtt", "state.golden")
	if *update {
		os.WriteFile(path, got, 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("state differs from %s (%v):\n%s", path, err, got)
	}
}

func TestServiceAskStreamCancelBusyTTL(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	s, _ := startService(t, Config{Broker: b.URL, Device: "dev1", ChunkInterval: time.Millisecond}, &appliancetest.Engine{Words: 20, Delay: 5 * time.Millisecond},
		func(c *appliance.Config) { c.Limits.Queue = 2 })
	tp := s.Topics()
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/dev1/answer/#", "geist/dev1/error", "geist/dev1/answer")

	// Streamed JSON ask.
	c.Publish(t, tp.Ask, []byte(`{"id":"s1","text":"hello","stream":true}`))
	msgs, ok := c.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, "geist/dev1/answer/s1")) > 0 })
	if !ok {
		t.Fatalf("no answer: %v", msgs)
	}
	var text strings.Builder
	chunks := mqtttest.On(msgs, "geist/dev1/answer/s1/stream")
	for i, m := range chunks {
		ch := decode[Chunk](t, m.Payload)
		if ch.ID != "s1" || ch.Seq != i {
			t.Errorf("chunk %d: %+v", i, ch)
		}
		text.WriteString(ch.Delta)
	}
	a := decode[Answer](t, mqtttest.On(msgs, "geist/dev1/answer/s1")[0].Payload)
	if !a.Done || a.Text != text.String() || a.ServedBy != "dev1" || len(chunks) < 2 {
		t.Errorf("answer %+v after %d chunks %q", a, len(chunks), text.String())
	}

	// Plain text goes to geist/dev1/answer.
	c.Publish(t, tp.Ask, []byte("plain question"))
	msgs, ok = c.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, "geist/dev1/answer")) > 0 })
	if !ok || decode[Answer](t, mqtttest.On(msgs, "geist/dev1/answer")[0].Payload).Text == "" {
		t.Fatalf("plain text: %v", msgs)
	}

	// Cancel a running request and a queued one; the queue (2) overflows.
	c.Reset()
	slow := func(id string) []byte { return []byte(fmt.Sprintf(`{"id":%q,"text":"x","stream":true}`, id)) }
	c.Publish(t, tp.Ask, []byte(`{"id":"r1","text":"long","stream":true}`))
	if _, ok := c.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, "geist/dev1/answer/r1/stream")) > 0 }); !ok {
		t.Fatal("r1 did not start")
	}
	for _, id := range []string{"q1", "q2", "q3"} {
		c.Publish(t, tp.Ask, slow(id))
	}
	c.Publish(t, tp.Cancel, []byte(`{"id":"q1"}`))
	c.Publish(t, tp.Cancel, []byte(`{"id":"r1"}`))
	code := func(m []mqtttest.Msg, id string) string {
		ms := mqtttest.On(m, "geist/dev1/answer/"+id)
		if len(ms) == 0 {
			return ""
		}
		r := decode[ErrorReply](t, ms[0].Payload)
		if r.Error == nil {
			return "answer"
		}
		return r.Error.Code
	}
	msgs, _ = c.Wait(5*time.Second, func(m []mqtttest.Msg) bool {
		return code(m, "r1") != "" && code(m, "q1") != "" && code(m, "q2") != "" && code(m, "q3") != ""
	})
	if code(msgs, "r1") != CodeCancelled || code(msgs, "q1") != CodeCancelled || code(msgs, "q2") != "answer" || code(msgs, "q3") != CodeBusy {
		t.Errorf("r1 %q q1 %q q2 %q q3 %q", code(msgs, "r1"), code(msgs, "q1"), code(msgs, "q2"), code(msgs, "q3"))
	}

	// An expired TTL: queued behind a slow request for longer than it lives.
	c.Reset()
	c.Publish(t, tp.Ask, slow("r2"))
	c.Publish(t, tp.Ask, []byte(`{"id":"t1","text":"x","ttl_s":0.02}`))
	msgs, _ = c.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return code(m, "t1") != "" && code(m, "r2") != "" })
	if code(msgs, "t1") != CodeTimeout || code(msgs, "r2") != "answer" {
		t.Errorf("t1 %q r2 %q", code(msgs, "t1"), code(msgs, "r2"))
	}

	// Errors: with an id on the answer topic, without on the error topic,
	// and the generator's too-long.
	c.Reset()
	c.Publish(t, tp.Ask, []byte(`{"id":"e1","text":5}`))
	c.Publish(t, tp.Ask, []byte(`{"text":`))
	c.Publish(t, tp.Ask, []byte(`{"id":"e2","text":"TOOLONG"}`))
	c.Publish(t, tp.Ask, []byte(`{"id":"ok","text":"fine"}`))
	msgs, _ = c.Wait(5*time.Second, func(m []mqtttest.Msg) bool {
		return code(m, "e1") != "" && code(m, "e2") != "" && code(m, "ok") != "" && len(mqtttest.On(m, "geist/dev1/error")) > 0
	})
	if code(msgs, "e1") != CodeBadRequest || code(msgs, "e2") != CodeTooLong || code(msgs, "ok") != "answer" {
		t.Errorf("e1 %q e2 %q ok %q", code(msgs, "e1"), code(msgs, "e2"), code(msgs, "ok"))
	}
	if e := mqtttest.On(msgs, "geist/dev1/error"); len(e) != 1 || decode[ErrorReply](t, e[0].Payload).Error.Code != CodeBadRequest {
		t.Errorf("error topic: %v", e)
	}
	// A refused request does not reserve its id: sent again, it is
	// refused again; corrected, it is answered.
	c.Publish(t, tp.Ask, []byte(`{"id":"e1","text":5}`))
	c.Publish(t, tp.Ask, []byte(`{"id":"e1","text":"fine"}`))
	msgs, _ = c.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, "geist/dev1/answer/e1")) == 3 })
	if e1 := mqtttest.On(msgs, "geist/dev1/answer/e1"); len(e1) != 3 || decode[ErrorReply](t, e1[1].Payload).Error.Code != CodeBadRequest ||
		decode[Answer](t, e1[2].Payload).Text == "" {
		t.Errorf("e1 again: %d replies", len(e1))
	}
}

func TestServiceDiscoveryAndBirth(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "homeassistant/device/#", "geist/dev2/status", "geist/dev2/state")
	s, _ := startService(t, Config{Broker: b.URL, Device: "dev2", Discovery: true, Version: "v1.2.3",
		Model: "stories260K-Q4_0", BirthDelay: 50 * time.Millisecond}, &appliancetest.Engine{}, nil)
	want, _ := DiscoveryPayload(DiscoveryInfo{Device: "dev2", Version: "v1.2.3", Model: "stories260K-Q4_0"})
	disc := s.Topics().Discovery
	if disc != "homeassistant/device/geist_dev2/config" {
		t.Errorf("discovery topic %s", disc)
	}
	count := func(m []mqtttest.Msg) int { return len(mqtttest.On(m, disc)) }
	msgs, ok := c.Wait(5*time.Second, func(m []mqtttest.Msg) bool {
		return count(m) == 1 && len(mqtttest.On(m, "geist/dev2/status")) > 0 && len(mqtttest.On(m, "geist/dev2/state")) > 0
	})
	if !ok {
		t.Fatalf("no discovery/status/state: %v", msgs)
	}
	if got := mqtttest.On(msgs, disc)[0].Payload; !bytes.Equal(got, want) {
		t.Errorf("discovery payload:\n%s\nwant\n%s", got, want)
	}
	if st := mqtttest.On(msgs, "geist/dev2/status"); string(st[len(st)-1].Payload) != "online" {
		t.Errorf("status %q", st[len(st)-1].Payload)
	}
	// Home Assistant restarts: its birth message makes geist republish.
	c.Reset()
	c.Paho().Publish("homeassistant/status", 0, false, "online").Wait()
	msgs, ok = c.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return count(m) == 1 && len(mqtttest.On(m, "geist/dev2/state")) > 0 })
	if !ok || !bytes.Equal(mqtttest.On(msgs, disc)[0].Payload, want) {
		t.Fatalf("not republished on the birth message: %v", msgs)
	}
	// "offline" from Home Assistant does not.
	c.Reset()
	c.Paho().Publish("homeassistant/status", 0, false, "offline").Wait()
	if msgs, _ := c.Wait(300*time.Millisecond, func(m []mqtttest.Msg) bool { return count(m) > 0 }); count(msgs) != 0 {
		t.Error("republished on offline")
	}
}

func TestServiceOfflineOnShutdown(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/dev3/status")
	core, err := appliance.New(appliance.Config{Engine: &appliancetest.Engine{}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Broker: b.URL, Device: "dev3", Logger: testLogger(t)}, core)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	if _, ok := c.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return len(m) > 0 && string(m[len(m)-1].Payload) == "online" }); !ok {
		t.Fatal("no online")
	}
	cancel()
	<-done
	if msgs, ok := c.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return string(m[len(m)-1].Payload) == "offline" }); !ok {
		t.Fatalf("no offline after shutdown: %v", msgs)
	}
}

func TestEmbeddedBroker(t *testing.T) {
	if _, err := StartEmbedded("0.0.0.0:0", "", "", testLogger(t)); err == nil {
		t.Fatal("embedded broker on all interfaces without credentials started")
	}
	e, err := StartEmbedded("127.0.0.1:0", "u", "secret", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	startService(t, Config{Broker: e.URL(), Device: "emb", Username: "u", Password: "secret"}, &appliancetest.Engine{}, nil)
	c := mqtttest.NewClient(t, e.URL(), func(o *paho.ClientOptions) { o.SetUsername("u").SetPassword("secret") })
	c.Subscribe(t, "geist/emb/answer/#")
	c.Publish(t, "geist/emb/ask", []byte(`{"id":"e1","text":"hi"}`))
	if msgs, ok := c.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return len(m) > 0 }); !ok || !strings.Contains(string(msgs[0].Payload), `"done":true`) {
		t.Fatalf("no answer through the embedded broker: %v", msgs)
	}
	anon := paho.NewClient(paho.NewClientOptions().AddBroker(e.URL()).SetClientID("anon"))
	if tok := anon.Connect(); tok.WaitTimeout(5*time.Second) && tok.Error() == nil {
		anon.Disconnect(0)
		t.Error("anonymous client admitted by an embedded broker with credentials")
	}
}

// TestDeviceAnswersPublished: the answers to the device's own triggers
// (buttons, push-to-talk) are published on the answer topic, as answer
// events and as the last answer; those of other front ends (Hermes, HTTP)
// are not.
func TestDeviceAnswersPublished(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	_, core := startService(t, Config{Broker: b.URL, Device: "loc"}, &appliancetest.Engine{Words: 4, Delay: time.Millisecond}, nil)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/loc/answer/#", "geist/loc/answer", "geist/loc/event", "geist/loc/last_answer")
	ask := func(src appliance.Source) appliance.Outcome {
		tk, err := core.Submit(context.Background(), appliance.Request{Source: src, Text: "hello", Session: "kitchen"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return tk.Outcome()
	}
	o := ask(appliance.SourceButton)
	msgs, ok := c.Wait(5*time.Second, func(m []mqtttest.Msg) bool {
		return len(mqtttest.On(m, "geist/loc/answer")) > 0 && len(mqtttest.On(m, "geist/loc/event")) > 0
	})
	if !ok {
		t.Fatalf("answer not published: %v", msgs)
	}
	a := decode[Answer](t, mqtttest.On(msgs, "geist/loc/answer")[0].Payload)
	if a.Text != o.Text || a.ID != o.ID || a.Session != "kitchen" || !a.Done || a.ServedBy != "loc" {
		t.Errorf("published answer %+v", a)
	}
	c.Reset()
	ask(appliance.SourceHermes)
	ask(appliance.SourceHTTP)
	time.Sleep(200 * time.Millisecond)
	if m := c.Messages(); len(m) != 0 {
		t.Errorf("Hermes and HTTP answers published %d messages: %s", len(m), m[0].Payload)
	}
	ask(appliance.SourceVoice)
	if _, ok := c.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, "geist/loc/answer")) > 0 }); !ok {
		t.Error("push-to-talk answer not published")
	}
}

func TestOnCancelHook(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	called := make(chan struct{}, 1)
	startService(t, Config{Broker: b.URL, Device: "hook", OnCancel: func() { called <- struct{}{} }}, &appliancetest.Engine{}, nil)
	c := mqtttest.NewClient(t, b.URL)
	c.Publish(t, "geist/hook/cmd/cancel", []byte("PRESS"))
	select {
	case <-called:
	case <-time.After(5 * time.Second):
		t.Fatal("OnCancel not called for Home Assistant's Cancel button")
	}
}

// TestServiceThinkingApart: a model that thinks has its thinking in the
// answer's and the chunks' thinking fields, never in text or delta; the
// usage counts its tokens.
func TestServiceThinkingApart(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	s, _ := startService(t, Config{Broker: b.URL, Device: "dev1", ChunkInterval: time.Millisecond}, &appliancetest.Engine{Script: appliancetest.Thinker, Delay: time.Millisecond}, nil)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/dev1/answer/#")
	c.Publish(t, s.Topics().Ask, []byte(`{"id":"t1","text":"what is it?","stream":true,"think":true}`))
	msgs, ok := c.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, "geist/dev1/answer/t1")) > 0 })
	if !ok {
		t.Fatalf("no answer: %v", msgs)
	}
	var text, thinking strings.Builder
	for _, m := range mqtttest.On(msgs, "geist/dev1/answer/t1/stream") {
		ch := decode[Chunk](t, m.Payload)
		text.WriteString(ch.Delta)
		thinking.WriteString(ch.Thinking)
	}
	a := decode[Answer](t, mqtttest.On(msgs, "geist/dev1/answer/t1")[0].Payload)
	if a.Text != appliancetest.ThinkerContent || text.String() != a.Text || a.Thinking != appliancetest.ThinkerThinking || thinking.String() != a.Thinking {
		t.Errorf("answer text %q thinking %q; chunks' text %q thinking %q", a.Text, a.Thinking, text.String(), thinking.String())
	}
	if a.Usage.ThinkingTokens != 4 {
		t.Errorf("usage %+v: want 4 thinking tokens", a.Usage)
	}
}

// TestServiceToolCalls: an ask offering tools gets the model's calls in
// the answer's and the chunks' tool_calls, parsed by the core (never in
// text or delta, the thinking apart); the call's result goes back as a
// tool message after the assistant's calls; the state counts thinking
// tokens apart.
func TestServiceToolCalls(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	eng := &appliancetest.Engine{Delay: time.Millisecond, Script: appliancetest.ToolCaller}
	s, _ := startService(t, Config{Broker: b.URL, Device: "dev1", ChunkInterval: time.Millisecond}, eng, nil)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/dev1/answer/#")
	tools := `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
	c.Publish(t, s.Topics().Ask, []byte(`{"id":"t1","text":"weather in Paris?","stream":true,"think":true,"tools":`+tools+`}`))
	msgs, ok := c.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, "geist/dev1/answer/t1")) > 0 })
	if !ok {
		t.Fatalf("no answer: %v", msgs)
	}
	var text strings.Builder
	var calls []appliance.ToolCall
	for _, m := range mqtttest.On(msgs, "geist/dev1/answer/t1/stream") {
		ch := decode[Chunk](t, m.Payload)
		text.WriteString(ch.Delta)
		calls = append(calls, ch.ToolCalls...)
	}
	a := decode[Answer](t, mqtttest.On(msgs, "geist/dev1/answer/t1")[0].Payload)
	want := `[{"name":"get_weather","arguments":{"city":"Paris"}}]`
	got, _ := json.Marshal(a.ToolCalls)
	streamed, _ := json.Marshal(calls)
	if a.Text != "Let me check." || text.String() != a.Text || a.Thinking != "look it up" || string(got) != want || string(streamed) != want {
		t.Errorf("answer text %q thinking %q calls %s; chunks' text %q calls %s", a.Text, a.Thinking, got, text.String(), streamed)
	}
	c.Publish(t, s.Topics().Ask, []byte(`{"id":"t2","tools":`+tools+`,"messages":[{"role":"user","content":"weather in Paris?"},`+
		`{"role":"assistant","content":"","tool_calls":[{"name":"get_weather","arguments":{"city":"Paris"}}]},{"role":"tool","tool_name":"get_weather","content":"21 C"}]}`))
	msgs, ok = c.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, "geist/dev1/answer/t2")) > 0 })
	if !ok {
		t.Fatalf("no answer: %v", msgs)
	}
	if a := decode[Answer](t, mqtttest.On(msgs, "geist/dev1/answer/t2")[0].Payload); a.Text != "It is 21 degrees." || a.ToolCalls != nil {
		t.Errorf("answer to the tool's result: %+v", a)
	}
	reqs := eng.Requests()
	last := reqs[len(reqs)-1].Messages
	if len(last) != 3 || len(last[1].ToolCalls) != 1 || last[1].ToolCalls[0].Name != "get_weather" || last[2].Role != "tool" || last[2].ToolName != "get_weather" {
		t.Errorf("the engine saw %+v", last)
	}
	if st := s.CurrentState(); st.ThinkingTokens != 3 || st.GeneratedTokens != 9 {
		t.Errorf("state counts %d thinking of %d generated tokens, want 3 of 9", st.ThinkingTokens, st.GeneratedTokens)
	}
	for _, bad := range []string{`{"text":"x","tools":[1]}`, `{"messages":[{"role":"user","content":"x","tool_calls":[{"name":"f"}]}]}`, `{"messages":[{"role":"assistant","content":"x"}]}`} {
		if _, e := Parse([]byte(bad), Limits{}, time.Now()); e == nil || e.Code != CodeBadRequest {
			t.Errorf("%s: %v, want bad_request", bad, e)
		}
	}
}

// TestStatePromptProgress: while a long prompt is read the retained state
// says how much of it (prompt_done of prompt_total), published as it
// grows; the fields are gone once the answer runs.
func TestStatePromptProgress(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/dev3/state")
	s, _ := startService(t, Config{Broker: b.URL, Device: "dev3", Model: "m", StateInterval: 10 * time.Millisecond},
		&appliancetest.Engine{Words: 2, Delay: 40 * time.Millisecond}, nil)
	c.Publish(t, s.Topics().Ask, []byte(`{"id":"p1","text":"PREFILL"}`))
	var seen [][2]int
	msgs, _ := c.Wait(10*time.Second, func(m []mqtttest.Msg) bool {
		seen = seen[:0]
		for _, msg := range mqtttest.On(m, "geist/dev3/state") {
			if st := decode[State](t, msg.Payload); st.PromptTotal > 0 {
				seen = append(seen, [2]int{st.PromptDone, st.PromptTotal})
			}
		}
		return len(seen) >= 3
	})
	if len(seen) < 3 || seen[0][1] != 1280 || seen[len(seen)-1][0] <= seen[0][0] {
		t.Fatalf("prompt progress on the state topic %v (%d messages)", seen, len(msgs))
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st := s.CurrentState(); st.PromptTotal == 0 && st.State == "idle" {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("state after the answer %+v", st)
		}
	}
}
