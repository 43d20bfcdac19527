package mqtt

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/geisten/geist/mqtt/mqtttest"
)

// forgetGen is a fakeGen that records the sessions it generated for and
// forgot, in order.
type forgetGen struct {
	fakeGen
	mu  sync.Mutex
	log []string
}

func (g *forgetGen) Generate(ctx context.Context, req Request, onDelta func(string)) (Result, error) {
	g.mu.Lock()
	g.log = append(g.log, "gen "+req.Session)
	g.mu.Unlock()
	return g.fakeGen.Generate(ctx, req, onDelta)
}

func (g *forgetGen) Forget(session string) error {
	g.mu.Lock()
	g.log = append(g.log, "forget "+session)
	g.mu.Unlock()
	return nil
}

func (g *forgetGen) Log() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.log...)
}

func outcome(t *testing.T, ch <-chan Outcome, d time.Duration) Outcome {
	t.Helper()
	select {
	case o, ok := <-ch:
		if !ok {
			t.Fatal("outcome channel closed without an outcome")
		}
		if _, open := <-ch; open {
			t.Fatal("a second outcome")
		}
		return o
	case <-time.After(d):
		t.Fatalf("no outcome within %v", d)
	}
	return Outcome{}
}

func TestSubmitPublishedAndQuiet(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	s := startService(t, Config{Broker: b.URL, Device: "loc"}, fakeGen{words: 4, delay: time.Millisecond})
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/loc/answer/#", "geist/loc/answer", "geist/loc/event")

	var streamed strings.Builder
	ch, err := s.Submit(context.Background(), Request{Text: "hello", Session: "kitchen"}, func(d string) { streamed.WriteString(d) }, true)
	if err != nil {
		t.Fatal(err)
	}
	o := outcome(t, ch, 10*time.Second)
	if o.Err != nil || o.Result.Text != " w0 w1 w2 w3." || streamed.String() != o.Result.Text {
		t.Fatalf("outcome %+v, streamed %q", o, streamed.String())
	}
	msgs, ok := c.Wait(5*time.Second, func(m []mqtttest.Msg) bool {
		return len(mqtttest.On(m, "geist/loc/answer")) > 0 && len(mqtttest.On(m, "geist/loc/event")) > 0
	})
	if !ok {
		t.Fatalf("answer not published: %v", msgs)
	}
	a := decode[Answer](t, mqtttest.On(msgs, "geist/loc/answer")[0].Payload)
	if a.Text != o.Result.Text || a.Session != "kitchen" || !a.Done || a.ServedBy != "loc" {
		t.Errorf("published answer %+v", a)
	}
	ev := decode[map[string]any](t, mqtttest.On(msgs, "geist/loc/event")[0].Payload)
	if ev["event_type"] != "answer" || ev["text"] != o.Result.Text {
		t.Errorf("event %v", ev)
	}

	// Quiet: the outcome only.
	c.Reset()
	ch, err = s.Submit(context.Background(), Request{Text: "hello"}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if o := outcome(t, ch, 10*time.Second); o.Err != nil {
		t.Fatal(o.Err)
	}
	time.Sleep(200 * time.Millisecond)
	if m := c.Messages(); len(m) != 0 {
		t.Errorf("quiet request published %d messages: %s", len(m), m[0].Payload)
	}

	// Bad requests are refused at once.
	for _, r := range []Request{{}, {Text: "  "}, {Text: "x", Session: "a b"}, {Text: "caf\xc3\x28"}} {
		if _, err := s.Submit(context.Background(), r, nil, true); err == nil {
			t.Errorf("%+v accepted", r)
		} else if e, ok := err.(*Error); !ok || e.Code != CodeBadRequest {
			t.Errorf("%+v: %v", r, err)
		}
	}
}

func TestSubmitCancelWithdrawBusy(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	gen := &forgetGen{fakeGen: fakeGen{words: 3, delay: 5 * time.Millisecond}}
	s := startService(t, Config{Broker: b.URL, Device: "lcb", QueueLen: 2}, gen)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/lcb/answer")

	// "long" runs until cancelled; CancelRunning ends it.
	started := make(chan struct{})
	var once sync.Once
	run, err := s.Submit(context.Background(), Request{Text: "long", Session: "a"}, func(string) { once.Do(func() { close(started) }) }, true)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	// Two wait; a third is busy.
	ctx, cancel := context.WithCancel(context.Background())
	q1, err1 := s.Submit(ctx, Request{Text: "q1", Session: "b"}, nil, false)
	s.NewConversation("b") // control work: not bound by the queue length, runs after q1
	q2, err2 := s.Submit(context.Background(), Request{Text: "q2", Session: "b"}, nil, false)
	_, err3 := s.Submit(context.Background(), Request{Text: "q3"}, nil, false)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if e, ok := err3.(*Error); !ok || e.Code != CodeBusy {
		t.Errorf("third queued request: %v, want busy", err3)
	}
	// Ending the submitter's context withdraws a queued request at once.
	cancel()
	if o := outcome(t, q1, 2*time.Second); o.Err == nil || o.Err.Code != CodeCancelled {
		t.Errorf("withdrawn: %+v", o)
	}
	if !s.CancelRunning() {
		t.Error("nothing was running")
	}
	if o := outcome(t, run, 5*time.Second); o.Err == nil || o.Err.Code != CodeCancelled {
		t.Errorf("cancelled: %+v", o)
	}
	if o := outcome(t, q2, 5*time.Second); o.Err != nil {
		t.Errorf("q2: %+v", o)
	}
	if got, want := strings.Join(gen.Log(), ","), "gen a,forget b,gen b"; got != want {
		t.Errorf("worker order %s, want %s", got, want)
	}
	// The cancelled request's error was published (it asked to be).
	msgs, ok := c.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return len(m) > 0 })
	if !ok {
		t.Fatal("cancelled error not published")
	}
	var r ErrorReply
	json.Unmarshal(msgs[0].Payload, &r)
	if r.Error == nil || r.Error.Code != CodeCancelled {
		t.Errorf("published %s", msgs[0].Payload)
	}
	if s.CancelRunning() {
		t.Error("CancelRunning with nothing running reported true")
	}

	// The dashboard conversation.
	d0 := s.DefaultSession()
	s.NewConversation("")
	if d1 := s.DefaultSession(); d1 == d0 || !strings.HasPrefix(d1, "dashboard-") {
		t.Errorf("default session %s → %s", d0, d1)
	}
}

func TestSubmitOffline(t *testing.T) {
	s, err := New(Config{Device: "off", Logger: testLogger(t)}, fakeGen{words: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	ch, err := s.Submit(context.Background(), Request{Text: "hi"}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if o := outcome(t, ch, 5*time.Second); o.Err != nil || o.Result.Text != " w0 w1." {
		t.Errorf("offline outcome %+v", o)
	}
	s.Publish("geist/off/x", 0, false, []byte("nothing happens"))
	cancel()
	<-done
	if _, err := s.Submit(context.Background(), Request{Text: "hi"}, nil, true); err == nil {
		t.Error("accepted after shutdown")
	}
}

func TestDiscoveryComponents(t *testing.T) {
	extra := map[string]map[string]any{
		"button_main": {"p": "event", "unique_id": "geist_k_button_main", "state_topic": "geist/k/button/main"},
	}
	p, err := DiscoveryPayload(DiscoveryInfo{Device: "k", Components: extra})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Cmps map[string]map[string]any `json:"cmps"`
	}
	json.Unmarshal(p, &got)
	c := got.Cmps["button_main"]
	av, _ := json.Marshal(c["availability"])
	if c["state_topic"] != "geist/k/button/main" || !strings.Contains(string(av), "geist/k/status") || got.Cmps["geist_k_state"] == nil {
		t.Errorf("merged components: %v", got.Cmps)
	}
	if _, ok := extra["button_main"]["availability"]; ok {
		t.Error("the caller's component map was modified")
	}
}

func TestOnCancelHook(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	called := make(chan struct{}, 1)
	startService(t, Config{Broker: b.URL, Device: "hook", OnCancel: func() { called <- struct{}{} }}, fakeGen{})
	c := mqtttest.NewClient(t, b.URL)
	c.Publish(t, "geist/hook/cmd/cancel", []byte("PRESS"))
	select {
	case <-called:
	case <-time.After(5 * time.Second):
		t.Fatal("OnCancel not called for Home Assistant's Cancel button")
	}
}
