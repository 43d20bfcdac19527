package appliancetest

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/geisten/geist/engine/appliance"
)

// Core is an appliance core running for one test, with the front ends
// the test serves on it.
type Core struct {
	*appliance.Core

	t      testing.TB
	cancel context.CancelFunc // stops the core
	fronts context.Context    // ends once the core has stopped
	done   chan struct{}      // closed when the core's Run returned
	wg     sync.WaitGroup
	once   sync.Once
	runErr error
}

// Start runs a core built from cfg until the test ends (or Stop). A nil
// Logger logs nowhere; a zero ShutdownGrace is two seconds. Front ends
// started with Serve stop in the order geist serve stops them: the core
// first (the running request finishes within the grace, the queued ones
// end cancelled), then the front ends, so that the last answers still
// reach their clients.
func Start(t testing.TB, cfg appliance.Config) *Core {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = 2 * time.Second
	}
	core, err := appliance.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return Run(t, core)
}

// Run is Start for a core the test built itself.
func Run(t testing.TB, core *appliance.Core) *Core {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	fctx, fcancel := context.WithCancel(context.Background())
	c := &Core{Core: core, t: t, cancel: cancel, fronts: fctx, done: make(chan struct{})}
	go func() {
		c.runErr = core.Run(ctx)
		fcancel()
		close(c.done)
	}()
	t.Cleanup(c.Stop)
	return c
}

// Serve runs a front end until the core has stopped: run gets a context
// that ends then and should return soon after; an error it returns fails
// the test.
func (c *Core) Serve(run func(ctx context.Context) error) {
	c.wg.Go(func() {
		if err := run(c.fronts); err != nil {
			c.t.Errorf("front end: %v", err)
		}
	})
}

// Stop stops the core, waits for it, then for the front ends. It may be
// called more than once; the test's cleanup calls it too.
func (c *Core) Stop() {
	c.once.Do(func() {
		c.cancel()
		<-c.done
		c.wg.Wait()
	})
}

// Err is what the core's Run returned; it waits for Stop.
func (c *Core) Err() error {
	c.Stop()
	return c.runErr
}
