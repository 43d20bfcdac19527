package appliance_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
	"github.com/geisten/geist/engine/chat"
)

// models is a test appliance.Models: "other" is answered by a second
// core whose load waits for gate.
type models struct {
	other    *appliance.Core
	gate     chan struct{}
	mu       sync.Mutex
	acquired int
	released int
}

func (m *models) Other(name string) (bool, error) {
	switch appliance.CanonicalModel(name) {
	case "first":
		return false, nil
	case "other":
		return true, nil
	}
	return false, &appliance.Error{Code: appliance.CodeBadRequest, Message: "model " + name + " is not stored"}
}

func (m *models) Acquire(ctx context.Context, name string) (*appliance.Core, func(), error) {
	select {
	case <-m.gate:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	m.mu.Lock()
	m.acquired++
	m.mu.Unlock()
	return m.other, func() { m.mu.Lock(); m.released++; m.mu.Unlock() }, nil
}

// prompted is an engine answering with its name and the prompt.
type prompted struct{ name string }

func (p prompted) Generate(ctx context.Context, req engine.Request) (engine.Stats, error) {
	if req.OnText != nil {
		req.OnText([]byte(p.name + ": " + appliancetest.Prompt(req)))
	}
	return engine.Stats{StopReason: "eos"}, nil
}
func (prompted) ModelID() []byte { return []byte("x") }
func (prompted) ConversationPrefix([]chat.Message) ([]int32, error) {
	return nil, nil
}

// TestRequestNamesAModel: a request naming another model (Request.Model,
// as MQTT's model and Wyoming's context.model set it) is answered by that
// model's core. Submit returns at once while the model loads, and a
// request for the first model is answered meanwhile (it never waits on a
// load it does not need); Cancel reaches a request waiting on the load;
// a name no model has is a bad request; without Models, only the core's
// own name is accepted.
func TestRequestNamesAModel(t *testing.T) {
	other := start(t, prompted{"other"}, nil)
	m := &models{other: other, gate: make(chan struct{})}
	first := start(t, prompted{"first"}, func(c *appliance.Config) { c.Models = m; c.Model = "first" })
	ctx := context.Background()
	waiting, err := first.Submit(ctx, appliance.Request{Source: appliance.SourceMQTT, Text: "hi", Raw: true, Model: "other:latest"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mine := outcome(t, submit(t, first, appliance.Request{Source: appliance.SourceMQTT, Text: "hi", Raw: true, Model: "first"}))
	if mine.Text != "first: hi" {
		t.Errorf("the first model's request answered %+v while the other loaded", mine)
	}
	select {
	case <-waiting.Done():
		t.Fatalf("the other model's request ended before its load: %+v", waiting.Outcome())
	default:
	}
	cancelled, err := first.Submit(ctx, appliance.Request{ID: "c1", Source: appliance.SourceMQTT, Text: "x", Raw: true, Model: "other"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Cancel("c1") {
		t.Error("Cancel did not find the request waiting on the load")
	}
	if o := outcome(t, cancelled); code(o) != "cancelled" {
		t.Errorf("cancelled while loading: %+v", o)
	}
	close(m.gate)
	var pieces []string
	var mu sync.Mutex
	tk, err := first.Submit(ctx, appliance.Request{Source: appliance.SourceHTTP, Text: "again", Raw: true, Model: "other"}, func(p appliance.Piece) {
		mu.Lock()
		pieces = append(pieces, p.Content)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if o := outcome(t, waiting); o.Err != nil || o.Text != "other: hi" {
		t.Errorf("the other model answered %+v", o)
	}
	if o := outcome(t, tk); o.Err != nil || o.Text != "other: again" {
		t.Errorf("the other model answered %+v", o)
	}
	mu.Lock()
	if len(pieces) != 1 || pieces[0] != "other: again" {
		t.Errorf("streamed %q", pieces)
	}
	mu.Unlock()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		m.mu.Lock()
		done := m.released == m.acquired
		m.mu.Unlock()
		if done {
			break
		}
	}
	m.mu.Lock()
	if m.acquired != 2 || m.released != 2 {
		t.Errorf("acquired %d, released %d: want 2 and 2", m.acquired, m.released)
	}
	m.mu.Unlock()
	if _, err := first.Submit(ctx, appliance.Request{Source: appliance.SourceMQTT, Text: "x", Model: "nope"}, nil); code(appliance.Outcome{Err: asErr(err)}) != "bad_request" {
		t.Errorf("a model not stored: %v", err)
	}
	alone := start(t, prompted{"alone"}, func(c *appliance.Config) { c.Model = "alone" })
	if o := outcome(t, submit(t, alone, appliance.Request{Source: appliance.SourceMQTT, Text: "x", Raw: true, Model: "Alone:latest"})); o.Text != "alone: x" {
		t.Errorf("own name: %+v", o)
	}
	if _, err := alone.Submit(ctx, appliance.Request{Source: appliance.SourceMQTT, Text: "x", Model: "other"}, nil); code(appliance.Outcome{Err: asErr(err)}) != "bad_request" {
		t.Errorf("another model without Models: %v", err)
	}
}

func asErr(err error) *appliance.Error {
	e, _ := err.(*appliance.Error)
	return e
}
