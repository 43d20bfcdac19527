package mqtt

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
	"github.com/geisten/geist/mqtt/mqtttest"
)

// TestBirthFlood: 5000 birth messages from Home Assistant cause one
// republication of discovery, not 5000.
func TestBirthFlood(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "homeassistant/device/#")
	s, _ := startService(t, Config{Broker: b.URL, Device: "flood", Discovery: true, BirthDelay: 50 * time.Millisecond}, &appliancetest.Engine{}, nil)
	disc := s.Topics().Discovery
	if _, ok := c.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, disc)) == 1 }); !ok {
		t.Fatal("no discovery at connect")
	}
	c.Reset()
	const n = 5000
	c.Flood(t, "homeassistant/status", []byte("online"), n)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if births, _ := s.Births(); births == n {
			break
		}
		if time.Now().After(deadline) {
			births, _ := s.Births()
			t.Fatalf("%d of %d birth messages arrived", births, n)
		}
	}
	time.Sleep(300 * time.Millisecond) // past BirthDelay
	births, republished := s.Births()
	got := len(mqtttest.On(c.Messages(), disc))
	t.Logf("%d birth messages: %d republications, %d discovery payloads published", births, republished, got)
	if republished != 1 || got != 1 {
		t.Errorf("%d republications, %d discovery payloads, want 1", republished, got)
	}
}

// TestRetainedAskIgnored: an ask retained on the broker before geist
// (re)started is not run; a live ask is.
func TestRetainedAskIgnored(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/ret/answer/#")
	for _, topic := range []string{"geist/ret/ask", "geist/ret/cmd/ask", "geist/ret/cmd/new_conversation"} {
		if tok := c.Paho().Publish(topic, 1, true, `{"id":"old","text":"hello"}`); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatal(tok.Error())
		}
	}
	eng := &appliancetest.Engine{}
	_, core := startService(t, Config{Broker: b.URL, Device: "ret"}, eng, nil)
	time.Sleep(300 * time.Millisecond)
	if n := len(eng.Requests()); n != 0 || core.Snapshot().Session != "dashboard-0" {
		t.Fatalf("retained messages run: %d requests, dashboard %s", n, core.Snapshot().Session)
	}
	c.Publish(t, "geist/ret/ask", []byte(`{"id":"new","text":"hello"}`))
	if _, ok := c.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, "geist/ret/answer/new")) == 1 }); !ok {
		t.Fatal("a live ask was not answered")
	}
	if msgs := mqtttest.On(c.Messages(), "geist/ret/answer/old"); len(msgs) != 0 {
		t.Errorf("the retained ask was answered: %s", msgs[0].Payload)
	}
}

// TestRefusalFlood: 1000 broken asks are all counted, but only a burst
// of refusals is answered.
func TestRefusalFlood(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/rf/answer/#", "geist/rf/error", "geist/rf/event")
	s, core := startService(t, Config{Broker: b.URL, Device: "rf", RefusalBurst: 10, RefusalRate: 1}, &appliancetest.Engine{}, nil)
	const n = 1000
	for i := range n {
		tok := c.Paho().Publish("geist/rf/ask", 1, false, fmt.Sprintf(`{"id":"x%d","text":5}`, i))
		if i == n-1 {
			tok.WaitTimeout(10 * time.Second)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); core.Snapshot().Refused < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d refusals counted", core.Snapshot().Refused, n)
		}
	}
	time.Sleep(200 * time.Millisecond)
	replies := 0
	for _, m := range c.Messages() {
		if m.Topic != "geist/rf/event" {
			replies++
		}
	}
	t.Logf("%d refused asks: %d answered, %d held back", n, replies, s.refusals.Held())
	if replies < 10 || replies > 20 || s.refusals.Held() != int64(n-replies) {
		t.Errorf("%d refusals answered, %d held back", replies, s.refusals.Held())
	}
}

// TestOversizedAsk: a 100 MiB ask is refused as too_long, answered on
// the id its first bytes name, without the service ever holding it.
func TestOversizedAsk(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/big/answer/#", "geist/big/error")
	eng := &appliancetest.Engine{}
	startService(t, Config{Broker: b.URL, Device: "big"}, eng, nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	mqtttest.PublishLarge(t, b.URL, "geist/big/ask", false, []byte(`{"id":"huge","text":"`), 100<<20)
	mqtttest.PublishLarge(t, b.URL, "geist/big/cancel", false, []byte(`{"id":"huge"}`), 10<<20)
	msgs, ok := c.Wait(20*time.Second, func(m []mqtttest.Msg) bool {
		return len(mqtttest.On(m, "geist/big/answer/huge")) == 1 && len(mqtttest.On(m, "geist/big/error")) == 1
	})
	if !ok {
		t.Fatalf("no refusals: %v", msgs)
	}
	runtime.ReadMemStats(&after)
	var r ErrorReply
	json.Unmarshal(mqtttest.On(msgs, "geist/big/answer/huge")[0].Payload, &r)
	if r.Error == nil || r.Error.Code != CodeTooLong || r.Error.Message != "payload of 104857600 bytes exceeds the limit of 65536 bytes" {
		t.Errorf("refusal %+v", r.Error)
	}
	alloc := int64(after.TotalAlloc - before.TotalAlloc)
	t.Logf("100 MiB ask and 10 MiB cancel refused; allocated meanwhile: %d KiB", alloc>>10)
	if alloc > 4<<20 || len(eng.Requests()) != 0 {
		t.Errorf("allocated %d KiB, %d requests run", alloc>>10, len(eng.Requests()))
	}
}

// TestBusyRefusalsReachEveryAsker (issue 22, item 8): of 1180 asks at
// 20/s, 956 were refused busy and only 79 refusals were published (the
// ask topic's bucket), so 877 senders heard nothing. Busy refusals are
// answered per asker (one a minute per answer topic), and the state says
// how many were held back.
func TestBusyRefusalsReachEveryAsker(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/br/answer/#")
	s, core := startService(t, Config{Broker: b.URL, Device: "br", RefusalBurst: 10, RefusalRate: 1},
		&appliancetest.Engine{Words: 50, Delay: 20 * time.Millisecond}, func(cc *appliance.Config) { cc.Limits.Queue = 1 })
	const n = 60
	for i := range n {
		c.Publish(t, "geist/br/ask", []byte(fmt.Sprintf(`{"id":"q%d","text":"hello"}`, i)))
	}
	for deadline := time.Now().Add(10 * time.Second); core.Snapshot().Refused < n-2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d refused", core.Snapshot().Refused, n-2)
		}
	}
	refused := int(core.Snapshot().Refused)
	msgs, _ := c.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return busyReplies(m) >= refused })
	if got := busyReplies(msgs); got != refused {
		t.Errorf("%d asks refused busy, %d refusals published", refused, got)
	}
	// The same asker again within the minute: held back, and the state says so.
	c.Publish(t, "geist/br/ask", []byte(`{"id":"q59","text":"hello"}`))
	for deadline := time.Now().Add(5 * time.Second); s.CurrentState().RefusalsHeld == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a second busy refusal of one asker within the minute was not held back (or not counted)")
		}
	}
	t.Logf("%d asks at once, %d refused busy, %d refusals published; refusals_held %d", n, refused, busyReplies(c.Messages()), s.CurrentState().RefusalsHeld)
}

func busyReplies(m []mqtttest.Msg) int {
	n := 0
	for _, msg := range m {
		if strings.Contains(string(msg.Payload), `"busy"`) {
			n++
		}
	}
	return n
}
