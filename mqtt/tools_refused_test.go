package mqtt

import (
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
	"github.com/geisten/geist/mqtt/mqtttest"
)

// An ask offering tools to a model whose template cannot render them
// gets an error answer naming the model and why (the core's refusal,
// the words HTTP answers with 400); the same ask without tools is
// answered.
func TestServiceToolsRefused(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	eng := &appliancetest.Engine{}
	s, _ := startService(t, Config{Broker: b.URL, Device: "dev1"}, eng, func(c *appliance.Config) {
		c.Model, c.NoTools = "tiny", appliance.NoTools(nil) // no template: ChatML's reason
	})
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/dev1/answer/#")
	tools := `[{"type":"function","function":{"name":"HassTurnOn","parameters":{"type":"object","properties":{"name":{"type":"string"}}}}}]`
	c.Publish(t, s.Topics().Ask, []byte(`{"id":"t1","text":"lights on","tools":`+tools+`}`))
	c.Publish(t, s.Topics().Ask, []byte(`{"id":"t2","text":"hi"}`))
	msgs, ok := c.Wait(5*time.Second, func(m []mqtttest.Msg) bool {
		return len(mqtttest.On(m, "geist/dev1/answer/t1")) > 0 && len(mqtttest.On(m, "geist/dev1/answer/t2")) > 0
	})
	if !ok {
		t.Fatalf("no answers: %v", msgs)
	}
	r := decode[ErrorReply](t, mqtttest.On(msgs, "geist/dev1/answer/t1")[0].Payload)
	if r.Error == nil || r.Error.Code != CodeBadRequest || !strings.HasPrefix(r.Error.Message, "tiny does not support tools: it has no chat template") {
		t.Errorf("ask with tools: %+v", r.Error)
	}
	if a := decode[Answer](t, mqtttest.On(msgs, "geist/dev1/answer/t2")[0].Payload); !a.Done || a.Text == "" {
		t.Errorf("ask without tools: %+v", a)
	}
	if n := len(eng.Requests()); n != 1 {
		t.Errorf("the engine ran %d requests, want 1 (the refusal runs nothing)", n)
	}
}
