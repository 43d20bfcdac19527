package mqtt

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
	"github.com/geisten/geist/mqtt/mqtttest"
)

// goldenStep is one exchange of TestContractGolden: publish payload on
// topic (or run do), then wait until a message arrives on until.
type goldenStep struct {
	name, topic, payload string
	do                   func(t *testing.T)
	until                string
	skip                 []string // topics left out of the record (timing-dependent)
}

// TestContractGolden records every payload the MQTT contract defines, for
// a fixed script of exchanges with a real broker, in
// testdata/mqtt/contract.golden: answers (JSON, streamed, plain text,
// reply_to, the dashboard's), errors (with and without an id, too long,
// cancelled), the last-answer sensor, answer and error events and
// answers to in-process requests. Generated ids read g<id>. Changes to it
// are changes of the contract.
func TestContractGolden(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/gold/#", "gold/#")
	_, core := startService(t, Config{Broker: b.URL, Device: "gold", Version: "v1", Model: "m", ChunkInterval: time.Hour},
		&appliancetest.Engine{Words: 3, Delay: time.Millisecond}, nil)
	steps := []goldenStep{
		{name: "JSON ask, streamed, in a session", topic: "geist/gold/ask", payload: `{"id":"a1","text":"hello","stream":true,"session":"s"}`, until: "geist/gold/answer/a1"},
		{name: "JSON ask without id", topic: "geist/gold/ask", payload: `{"text":"hello","max_tokens":5}`, until: "geist/gold/answer"},
		{name: "plain text", topic: "geist/gold/ask", payload: "plain question", until: "geist/gold/answer"},
		{name: "reply_to", topic: "geist/gold/ask", payload: `{"id":"r1","text":"hello","reply_to":"geist/gold/reply/kitchen","stream":true}`, until: "geist/gold/reply/kitchen"},
		{name: "reply_to outside the reply topics", topic: "geist/gold/ask", payload: `{"id":"r2","text":"hello","reply_to":"homeassistant/device/x/config"}`, until: "geist/gold/answer/r2"},
		{name: "messages", topic: "geist/gold/ask", payload: `{"id":"m1","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}`, until: "geist/gold/answer/m1"},
		{name: "bad request with an id", topic: "geist/gold/ask", payload: `{"id":"e1","text":5}`, until: "geist/gold/answer/e1"},
		{name: "bad request without an id", topic: "geist/gold/ask", payload: `{"text":`, until: "geist/gold/error"},
		{name: "unknown field", topic: "geist/gold/ask", payload: `{"id":"e2","text":"a","temp":1}`, until: "geist/gold/answer/e2"},
		{name: "unknown field with a long name", topic: "geist/gold/ask", payload: `{"id":"e5","text":"a","` + strings.Repeat("n", 1000) + `":1}`, until: "geist/gold/answer/e5"},
		{name: "payload too long", topic: "geist/gold/ask", payload: `{"id":"e3","text":"` + strings.Repeat("x", 70<<10) + `"}`, until: "geist/gold/answer/e3"},
		{name: "prompt too long", topic: "geist/gold/ask", payload: `{"id":"e4","text":"TOOLONG"}`, until: "geist/gold/answer/e4"},
		{name: "bad cancel", topic: "geist/gold/cancel", payload: `{"id":"a b"}`, until: "geist/gold/error"},
		{name: "cancel too long", topic: "geist/gold/cancel", payload: `{"id":"x","` + strings.Repeat("n", 2000) + `":1}`, until: "geist/gold/error"},
		{name: "cancelled while running", do: func(t *testing.T) {
			c.Publish(t, "geist/gold/ask", []byte(`{"id":"c1","text":"long","stream":true}`))
			time.Sleep(100 * time.Millisecond) // "long" takes a second and more
			c.Publish(t, "geist/gold/cancel", []byte(`{"id":"c1"}`))
		}, until: "geist/gold/answer/c1", skip: []string{"geist/gold/answer/c1/stream"}},
		{name: "dashboard ask", topic: "geist/gold/cmd/ask", payload: "Tell me a story", until: "geist/gold/answer"},
		{name: "new dashboard conversation, then ask", do: func(t *testing.T) {
			c.Publish(t, "geist/gold/cmd/new_conversation", []byte("PRESS"))
			time.Sleep(100 * time.Millisecond)
			c.Publish(t, "geist/gold/cmd/ask", []byte("Another one"))
		}, until: "geist/gold/answer"},
		{name: "in-process request, published (a button)", do: func(t *testing.T) {
			tk, err := core.Submit(context.Background(), appliance.Request{Source: appliance.SourceButton, Text: "hello", Session: "kitchen"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			tk.Outcome()
		}, until: "geist/gold/answer"},
	}
	asked := []string{"geist/gold/ask", "geist/gold/cancel", "geist/gold/cmd/ask", "geist/gold/cmd/new_conversation"}
	var out bytes.Buffer
	ids := regexp.MustCompile(`g[0-9a-f]{16}`)
	for _, st := range steps {
		c.Reset()
		if st.do != nil {
			st.do(t)
		} else {
			c.Publish(t, st.topic, []byte(st.payload))
		}
		if _, ok := c.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, st.until)) > 0 }); !ok {
			t.Fatalf("%s: nothing on %s", st.name, st.until)
		}
		time.Sleep(150 * time.Millisecond) // QoS 0 events and the last answer
		msgs := slices.DeleteFunc(c.Messages(), func(m mqtttest.Msg) bool {
			return m.Topic == "geist/gold/state" || m.Topic == "geist/gold/status" || slices.Contains(st.skip, m.Topic) ||
				slices.Contains(asked, m.Topic) // what the test itself published
		})
		slices.SortStableFunc(msgs, func(a, b mqtttest.Msg) int { return strings.Compare(a.Topic, b.Topic) })
		fmt.Fprintf(&out, "## %s\n", st.name)
		if st.topic != "" {
			p := st.payload
			if len(p) > 200 {
				p = p[:60] + fmt.Sprintf("…(%d bytes)", len(p))
			}
			fmt.Fprintf(&out, "> %s %s\n", st.topic, p)
		}
		for _, m := range msgs {
			r := ""
			if m.Retained {
				r = " (retained)"
			}
			fmt.Fprintf(&out, "< %s%s %s\n", m.Topic, r, ids.ReplaceAll(m.Payload, []byte("g<id>")))
		}
	}
	path := filepath.Join("..", "testdata", "mqtt", "contract.golden")
	if *update {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./mqtt -run Golden -update)", err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("the contract's payloads differ from %s (rerun with -update if intended):\n%s", path, out.Bytes())
	}
}
