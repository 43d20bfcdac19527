package appliance_test

import (
	"context"
	"testing"
	"time"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
)

// TestParallelTitleDuringStream: with an engine that decodes two
// requests together, a title request sent while an answer streams is
// answered before that answer ends.
func TestParallelTitleDuringStream(t *testing.T) {
	eng := &appliancetest.Engine{Words: 4, Delay: 10 * time.Millisecond, Par: 2}
	c := start(t, eng, nil)
	ctx := context.Background()
	stream, err := c.Submit(ctx, appliance.Request{Source: appliance.SourceHTTP, Text: "long", Session: "chat"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if st := c.Snapshot(); len(st.Jobs) == 1 && st.Jobs[0].Tokens >= 2 {
			break
		}
	}
	title, err := c.Submit(ctx, appliance.Request{Source: appliance.SourceHTTP, Text: "a title for this chat", Raw: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if o := outcome(t, title); o.Err != nil || o.Text != " w0 w1 w2 w3." {
		t.Errorf("title: %+v", o)
	}
	select {
	case <-stream.Done():
		t.Fatal("the stream ended before the title was answered")
	default:
	}
	if !c.Cancel(stream.ID) {
		t.Fatal("the stream was not running")
	}
	if o := outcome(t, stream); code(o) != "cancelled" {
		t.Errorf("stream: %+v", o)
	}
}

// TestPriorityWhileBusy: requests queued behind a running one start in
// order of priority (a voice request before an earlier HTTP one); on an
// idle engine they start in the order they came (TestJobsAndRecent).
func TestPriorityWhileBusy(t *testing.T) {
	eng := &appliancetest.Engine{Words: 2, Delay: 5 * time.Millisecond}
	c := start(t, eng, nil)
	ctx := context.Background()
	busy, err := c.Submit(ctx, appliance.Request{Source: appliance.SourceHTTP, Text: "long", Raw: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && len(c.Snapshot().Running) == 0; time.Sleep(5 * time.Millisecond) {
	}
	bg, _ := c.Submit(ctx, appliance.Request{Source: appliance.SourceHTTP, Text: "background title", Raw: true}, nil)
	voice, _ := c.Submit(ctx, appliance.Request{Source: appliance.SourceVoice, Text: "turn on the light", Raw: true}, nil)
	c.Cancel(busy.ID)
	outcome(t, bg)
	outcome(t, voice)
	reqs := eng.Requests()
	if len(reqs) != 3 || reqs[1].Prompt != "turn on the light" || reqs[2].Prompt != "background title" {
		var got []string
		for _, r := range reqs {
			got = append(got, r.Prompt)
		}
		t.Errorf("order %q, want the voice request before the background one", got)
	}
}

// TestParallelSameConversation: two requests of one conversation do not
// run together: the second waits for the first's answer and sees it in its
// history, while a request of another conversation runs beside.
func TestParallelSameConversation(t *testing.T) {
	eng := &appliancetest.Engine{Words: 3, Delay: 10 * time.Millisecond, Par: 3}
	c := start(t, eng, nil)
	ctx := context.Background()
	a, _ := c.Submit(ctx, appliance.Request{Source: appliance.SourceHTTP, Text: "first", Session: "s"}, nil)
	b, _ := c.Submit(ctx, appliance.Request{Source: appliance.SourceHTTP, Text: "second", Session: "s"}, nil)
	other, _ := c.Submit(ctx, appliance.Request{Source: appliance.SourceHTTP, Text: "elsewhere", Session: "o"}, nil)
	oa, ob, oo := outcome(t, a), outcome(t, b), outcome(t, other)
	if oa.Err != nil || ob.Err != nil || oo.Err != nil {
		t.Fatal(oa.Err, ob.Err, oo.Err)
	}
	for _, r := range eng.Requests() {
		if appliancetest.Prompt(r) == "second" && len(r.Messages) < 3 {
			t.Errorf("the second request of the conversation ran without the first's answer: %+v", r.Messages)
		}
	}
	if oo.Usage.Queued > 20*time.Millisecond {
		t.Errorf("the other conversation's request waited %v", oo.Usage.Queued)
	}
}
