package appliance_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
)

// TestWatchdogStall: a generation that stops making progress is ended
// by the watchdog with a timeout naming the stall, about StallTimeout
// after its last token; the worker goes on with the next request.
func TestWatchdogStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := &appliancetest.Engine{Words: 4, Delay: 2 * time.Millisecond}
		c := start(t, eng, func(cfg *appliance.Config) { cfg.Limits.StallTimeout = 200 * time.Millisecond })
		begin := time.Now()
		o := outcome(t, submit(t, c, appliance.Request{Text: "STALL"}))
		took := time.Since(begin)
		if code(o) != "timeout" || !strings.Contains(o.Err.Message, "no progress for 0.2s") {
			t.Fatalf("stalled generation: %+v", o.Err)
		}
		if took < 200*time.Millisecond || took > 2*time.Second {
			t.Errorf("ended after %v, want about 0.2 s", took)
		}
		if o := outcome(t, submit(t, c, appliance.Request{Text: "x"})); code(o) != "answered" {
			t.Errorf("the next request: %+v", o.Err)
		}
		if s := c.Snapshot().Stuck; s != "" {
			t.Errorf("stuck after the stall ended: %q", s)
		}
	})
}

// TestWatchdogPrefillIsProgress: a prefill longer than StallTimeout whose
// passes come in time is not a stall (a long prompt on a slow board).
func TestWatchdogPrefillIsProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := &appliancetest.Engine{Words: 2, Delay: 40 * time.Millisecond}
		c := start(t, eng, func(cfg *appliance.Config) { cfg.Limits.StallTimeout = 200 * time.Millisecond })
		// 20 passes of 40 ms: 0.8 s of prefill.
		if o := outcome(t, submit(t, c, appliance.Request{Text: "PREFILL"})); code(o) != "answered" {
			t.Fatalf("a slow prefill making progress: %+v", o.Err)
		}
	})
}

// TestWatchdogStuckWorker: work that does not stop when cancelled is
// answered in its place (a timeout), Snapshot's Stuck names the request
// for /readyz, and the queue waits; once it returns, all is well again.
func TestWatchdogStuckWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := &appliancetest.Engine{Words: 4, Delay: 2 * time.Millisecond}
		t.Cleanup(eng.Unhang)
		c := start(t, eng, func(cfg *appliance.Config) { cfg.Limits.StallTimeout = 200 * time.Millisecond })
		hung := submit(t, c, appliance.Request{Text: "HANG"})
		begin := time.Now()
		o := outcome(t, hung)
		if code(o) != "timeout" || !strings.Contains(o.Err.Message, "no progress") {
			t.Fatalf("hung generation: %+v", o.Err)
		}
		if took := time.Since(begin); took > 3*time.Second {
			t.Errorf("answered after %v, want the stall and a second", took)
		}
		st := c.Snapshot()
		if !strings.Contains(st.Stuck, "request "+hung.ID) || !strings.Contains(st.Stuck, "no progress") {
			t.Errorf("Stuck %q, want it to name request %s", st.Stuck, hung.ID)
		}
		next := submit(t, c, appliance.Request{Text: "x"})
		select {
		case <-next.Done():
			t.Fatal("a request ran beside the stuck one")
		case <-time.After(50 * time.Millisecond):
		}
		eng.Unhang()
		if o := outcome(t, next); code(o) != "answered" {
			t.Errorf("after the worker came back: %+v", o.Err)
		}
		if s := c.Snapshot().Stuck; s != "" {
			t.Errorf("stuck after it returned: %q", s)
		}
	})
}

// TestShutdownStuckWorker: at shutdown, work that does not stop when
// cancelled at the end of the grace is answered and left behind: Run
// returns ErrStuck within the grace and a second, so that the process
// ends (geist serve then leaves the engine open under it).
func TestShutdownStuckWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := &appliancetest.Engine{Words: 4, Delay: 2 * time.Millisecond}
		defer eng.Unhang()
		c, err := appliance.New(appliance.Config{Engine: eng, Logger: testLog(), ShutdownGrace: 300 * time.Millisecond,
			Limits: appliance.Limits{StallTimeout: -1}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		started := make(chan struct{}, 1)
		hung, _ := c.Submit(context.Background(), appliance.Request{Text: "HANG"}, func(appliance.Piece) {
			select {
			case started <- struct{}{}:
			default:
			}
		})
		<-started
		begin := time.Now()
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, appliance.ErrStuck) {
				t.Errorf("Run: %v, want ErrStuck", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return 5 s after shutdown with a stuck request")
		}
		if took := time.Since(begin); took > 300*time.Millisecond+time.Second {
			t.Errorf("Run returned %v after shutdown, want within the grace", took)
		}
		if o := outcome(t, hung); code(o) != "cancelled" || o.Err.Message != "geist is shutting down" {
			t.Errorf("the stuck request: %+v", o.Err)
		}
	})
}

// TestShutdownAfterWatchdog: with the worker stuck on a request the
// watchdog answered already, shutdown does not wait out the grace (10 s)
// for it: Run returns ErrStuck about a second after it begins.
func TestShutdownAfterWatchdog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := &appliancetest.Engine{Words: 4, Delay: 2 * time.Millisecond}
		defer eng.Unhang()
		c, err := appliance.New(appliance.Config{Engine: eng, Logger: testLog(), ShutdownGrace: 10 * time.Second,
			Limits: appliance.Limits{StallTimeout: 200 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		if o := outcome(t, submit(t, c, appliance.Request{Text: "HANG"})); code(o) != "timeout" {
			t.Fatalf("hung generation: %+v", o.Err)
		}
		begin := time.Now()
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, appliance.ErrStuck) {
				t.Errorf("Run: %v, want ErrStuck", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Run waited out the grace for a request the watchdog had answered")
		}
		t.Logf("shutdown with a stuck worker took %v", time.Since(begin).Round(time.Millisecond))
	})
}

// TestPromptProgress: while the prompt is read, the request's
// OnPromptProgress hears each pass and Snapshot's running job shows done
// of total prompt tokens (the status page's and MQTT's prompt progress).
func TestPromptProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := &appliancetest.Engine{Words: 2, Delay: 20 * time.Millisecond}
		c := start(t, eng, nil)
		var mu sync.Mutex
		var heard [][2]int
		tk := submit(t, c, appliance.Request{Text: "PREFILL", OnPromptProgress: func(done, total int) {
			mu.Lock()
			heard = append(heard, [2]int{done, total})
			mu.Unlock()
		}})
		var shown appliance.JobState
		deadline := time.Now().Add(5 * time.Second)
		for shown.PromptDone == 0 && time.Now().Before(deadline) {
			for _, j := range c.Snapshot().Jobs {
				if j.State == "running" && j.PromptDone > 0 && j.PromptDone < j.PromptTotal {
					shown = j
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		if o := outcome(t, tk); code(o) != "answered" {
			t.Fatalf("%+v", o.Err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(heard) != 20 || heard[0] != [2]int{64, 1280} || heard[19] != [2]int{1280, 1280} {
			t.Errorf("heard %v", heard)
		}
		if shown.PromptTotal != 1280 || shown.PromptDone%64 != 0 {
			t.Errorf("the running job showed %d of %d prompt tokens", shown.PromptDone, shown.PromptTotal)
		}
	})
}
