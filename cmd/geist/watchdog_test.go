package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/mqtt/mqtttest"
)

// hung wraps an engine whose generations hang after their first piece,
// deaf to their context: a grammar mask that never returns (issue 33).
type hung struct{ appliance.Engine }

func (g hung) Generate(ctx context.Context, req engine.Request) (engine.Stats, error) {
	onText, n := req.OnText, 0
	req.OnText = func(b []byte) error {
		if n++; n == 2 {
			select {} // never returns, whatever the context says
		}
		return onText(b)
	}
	return g.Engine.Generate(ctx, req)
}

// freeAddr is a loopback address no one listens on (now).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestFaultStuckWorker: a generation stuck where the context is not
// looked at (issue 33: a grammar mask that ran for minutes) is answered
// "timeout" by the watchdog after stall_timeout_s, /readyz answers 503
// naming the stuck worker, and one SIGTERM ends the process about a
// second later (exit 1, saying why: no grace for work the watchdog
// answered), not never.
func TestFaultStuckWorker(t *testing.T) {
	skipFaults(t)
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/stuck/#")
	addr := freeAddr(t)
	cfg, _ := faultConfig(t, b.URL, "stuck", fmt.Sprintf("[http]\naddr = %q\n", addr))
	p := startGeist(t, []string{"GEIST_HELPER_SERVE_HANG=1"}, "serve", "--config", cfg, "--stall-timeout", "1", "--shutdown-grace", "2", "--max-tokens", "100")
	p.waitLog(t, 20*time.Second, "mqtt connected")
	begin := time.Now()
	c.Publish(t, "geist/stuck/ask", []byte(`{"id":"hang","text":"Once upon a time","max_tokens":100}`))
	r := waitReply(t, c, "geist/stuck/answer/hang", 20*time.Second)
	took := time.Since(begin)
	if r.code() != "timeout" || !strings.Contains(r.Error.Message, "no progress for 1s") {
		t.Errorf("the stuck ask: %+v", r.Error)
	}
	if took > 5*time.Second {
		t.Errorf("the stuck ask was answered after %v, want about 2 s", took)
	}
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), `"worker":"the worker has made no progress`) {
		t.Errorf("/readyz: %d %s", resp.StatusCode, body)
	}
	begin = time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	code := p.wait(t, 10*time.Second)
	took = time.Since(begin)
	t.Logf("SIGTERM with a stuck worker: exit %d after %v: %s", code, took.Round(time.Millisecond), lastLine(p.logs.String()))
	// The watchdog answered the stuck request already: no grace for it,
	// the second Run waits for the cancelled work to return.
	if took > 2500*time.Millisecond {
		t.Errorf("exited %v after SIGTERM, want about a second (the stuck request was answered: no grace)", took)
	}
	if code != 1 || !strings.Contains(p.logs.String(), "did not stop when cancelled") {
		t.Errorf("exit %d", code)
	}
}
