package appliance_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
)

// The snapshot lists the running request with its progress and the
// queued ones; Recent keeps the finished ones, newest first, with their
// texts only when configured, and no more than 64.
func TestJobsAndRecent(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprint("text=", keep), func(t *testing.T) {
			eng := &appliancetest.Engine{Words: 4, Delay: 30 * time.Millisecond}
			c := start(t, eng, func(cfg *appliance.Config) { cfg.RecentText = keep })
			ctx := context.Background()
			first, err := c.Submit(ctx, appliance.Request{Source: appliance.SourceHTTP, Text: "first question", Session: "s1"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			second, _ := c.Submit(ctx, appliance.Request{Source: appliance.SourceWyoming, Messages: []appliance.Message{
				{Role: "user", Content: "old"}, {Role: "assistant", Content: "a"}, {Role: "user", Content: "second question"}}}, nil)
			var st appliance.State
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if st = c.Snapshot(); len(st.Jobs) == 2 && st.Jobs[0].Tokens >= 2 {
					break
				}
			}
			if len(st.Jobs) != 2 {
				t.Fatalf("jobs %+v", st.Jobs)
			}
			r, q := st.Jobs[0], st.Jobs[1]
			if r.ID != first.ID || r.State != "running" || r.Source != appliance.SourceHTTP || r.Session != "s1" ||
				r.Started.IsZero() || r.FirstToken.Before(r.Started) || r.Tokens < 2 ||
				q.ID != second.ID || q.State != "queued" || q.Tokens != 0 || !q.Started.IsZero() {
				t.Errorf("running %+v, queued %+v", r, q)
			}
			outcome(t, first)
			outcome(t, second)
			recs := c.Recent(10)
			if len(recs) != 2 || recs[0].ID != second.ID || recs[1].ID != first.ID || recs[1].Outcome != "answered" ||
				recs[1].Usage.GeneratedTokens != 4 || recs[1].Finished.IsZero() {
				t.Fatalf("recent %+v", recs)
			}
			if keep && (recs[0].Question != "second question" || recs[1].Question != "first question" || recs[1].Answer != " w0 w1 w2 w3.") ||
				!keep && (recs[0].Question != "" || recs[1].Answer != "") {
				t.Errorf("texts kept=%v: %q %q %q", keep, recs[0].Question, recs[1].Question, recs[1].Answer)
			}
			if st := c.Snapshot(); len(st.Jobs) != 0 {
				t.Errorf("jobs after the answers: %+v", st.Jobs)
			}
		})
	}
}

func TestRecentRing(t *testing.T) {
	c := start(t, &appliancetest.Engine{Words: 1}, func(cfg *appliance.Config) { cfg.RecentText = true; cfg.Limits.Queue = 100 })
	long := strings.Repeat("é", 3000)
	for i := range 70 {
		text := fmt.Sprintf("q%d", i)
		if i == 69 {
			text = "FAIL " + long
		}
		tk, err := c.Submit(context.Background(), appliance.Request{Source: appliance.SourceCLI, Text: text}, nil)
		if err != nil {
			t.Fatal(err)
		}
		outcome(t, tk)
	}
	recs := c.Recent(100)
	if len(recs) != 64 || recs[63].Question != "q6" || recs[1].Question != "q68" || recs[0].Outcome != "internal" {
		t.Fatalf("%d records, oldest %q, newest %q %s", len(recs), recs[len(recs)-1].Question, recs[0].Question, recs[0].Outcome)
	}
	if q := recs[0].Question; len(q) > 2<<10+len("…") || !strings.HasSuffix(q, "é…") {
		t.Errorf("long question kept as %d bytes ending %q", len(q), q[len(q)-8:])
	}
	if n := len(c.Recent(3)); n != 3 {
		t.Errorf("Recent(3): %d", n)
	}
}
