package appliance_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/geisten/geist/engine/appliance"
)

// TestGroupCountsEveryModel: in a serve with several models, the Group
// (what MQTT's state and the status page read) counts the requests of
// every loaded model's core: the first's own, those it hands to another
// model, those sent to the other model directly (HTTP naming it), and
// the refusals; its watchers hear every core's events and its Recent
// lists every core's requests. A removed (unloaded) core's counts stay;
// what it does after is no longer heard.
func TestGroupCountsEveryModel(t *testing.T) {
	other := start(t, prompted{"other"}, nil)
	m := &models{other: other, gate: make(chan struct{})}
	close(m.gate)
	first := start(t, prompted{"first"}, func(c *appliance.Config) { c.Models = m; c.Model = "first" })
	g := appliance.NewGroup(first)
	g.Add(other)
	var mu sync.Mutex
	var heard []string
	stop := g.Watch(func(ev appliance.Event) {
		if ev.Kind == appliance.EventFinished {
			mu.Lock()
			heard = append(heard, ev.ID)
			mu.Unlock()
		}
	})
	defer stop()
	ctx := context.Background()
	for _, c := range []struct {
		core *appliance.Core
		r    appliance.Request
		want string
	}{
		{first, appliance.Request{ID: "own", Source: appliance.SourceMQTT, Text: "a", Raw: true}, "first: a"},
		{first, appliance.Request{ID: "handed", Source: appliance.SourceMQTT, Text: "b", Raw: true, Model: "other"}, "other: b"},
		{other, appliance.Request{ID: "direct", Source: appliance.SourceHTTP, Text: "c", Raw: true}, "other: c"},
	} {
		if o := outcome(t, submit(t, c.core, c.r)); o.Err != nil || o.Text != c.want {
			t.Fatalf("%s: %+v", c.r.ID, o)
		}
	}
	if _, err := first.Submit(ctx, appliance.Request{Source: appliance.SourceMQTT, Text: "x", Model: "nope"}, nil); err == nil {
		t.Fatal("a model not stored was accepted")
	}
	st := g.Snapshot()
	if st.Served != 3 || st.Refused != 1 || st.Requests[appliance.SourceMQTT]["answered"] != 2 || st.Requests[appliance.SourceHTTP]["answered"] != 1 {
		t.Errorf("the group counts served %d, refused %d, by source %v; want 3, 1, mqtt 2 and http 1 answered", st.Served, st.Refused, st.Requests)
	}
	if one := first.Snapshot(); one.Served != 1 {
		t.Errorf("the first core alone counts %d served, want 1 (its own)", one.Served)
	}
	if st.Model != "first" || st.Busy || st.Queue != 0 || st.LastAnswered.IsZero() {
		t.Errorf("group state: model %q, busy %v, queue %d, last answered %v", st.Model, st.Busy, st.Queue, st.LastAnswered)
	}
	var ids []string
	for _, r := range g.Recent(10) {
		ids = append(ids, r.ID)
	}
	if !slices.Equal(ids, []string{"direct", "handed", "own"}) {
		t.Errorf("recent %v, want direct, handed, own (newest first)", ids)
	}
	waitHeard := func(n int) []string {
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			mu.Lock()
			got := len(heard)
			mu.Unlock()
			if got >= n {
				break
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return slices.Sorted(slices.Values(heard))
	}
	if got := waitHeard(3); !slices.Equal(got, []string{"direct", "handed", "own"}) {
		t.Errorf("the watcher heard %v", got)
	}

	g.Remove(other) // the other model is unloaded
	outcome(t, submit(t, other, appliance.Request{ID: "after", Source: appliance.SourceHTTP, Text: "d", Raw: true}))
	if st := g.Snapshot(); st.Served != 3 || st.Requests[appliance.SourceHTTP]["answered"] != 1 {
		t.Errorf("after the other core left: served %d, http %v; want its 2 kept and nothing new", st.Served, st.Requests[appliance.SourceHTTP])
	}
	if len(g.Recent(10)) != 3 {
		t.Errorf("recent after the other core left: %+v", g.Recent(10))
	}
	if got := waitHeard(3); slices.Contains(got, "after") {
		t.Errorf("a removed core's event was heard: %v", got)
	}
}

// failingModels is an appliance.Models whose loads fail.
type failingModels struct{}

func (failingModels) Other(string) (bool, error) { return true, nil }
func (failingModels) Acquire(context.Context, string) (*appliance.Core, func(), error) {
	return nil, nil, errors.New("out of memory")
}

// TestForwardFailureCounted: a request for another model whose load
// fails is counted by the core it came to (no other core saw it).
func TestForwardFailureCounted(t *testing.T) {
	first := start(t, prompted{"first"}, func(c *appliance.Config) { c.Models = failingModels{}; c.Model = "first" })
	if o := outcome(t, submit(t, first, appliance.Request{Source: appliance.SourceMQTT, Text: "x", Model: "other"})); code(o) != "internal" {
		t.Fatalf("a failed load: %+v", o)
	}
	if st := first.Snapshot(); st.Failed != 1 || st.Requests[appliance.SourceMQTT]["internal"] != 1 {
		t.Errorf("failed %d, by source %v; want 1 internal", st.Failed, st.Requests)
	}
}
