package httpapi

import (
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
)

// TestReadyzStuckWorker: a generation stuck in work that does not look at
// its context gets its timeout from the watchdog (the client is not left
// waiting), /readyz fails with a worker check naming the request while
// the worker is stuck (/healthz stays up), and is ready again once the
// worker returns.
func TestReadyzStuckWorker(t *testing.T) {
	eng := &appliancetest.Engine{Words: 4, Delay: 2 * time.Millisecond}
	t.Cleanup(eng.Unhang)
	ts := newTestServer(t, eng, func(_ *Config, cc *appliance.Config) { cc.Limits.StallTimeout = 200 * time.Millisecond })
	begin := time.Now()
	resp, body := ts.do(t, "POST", "/api/generate", `{"model":"tiny","prompt":"HANG","stream":false}`)
	if resp.StatusCode < 500 || !strings.Contains(body, "no progress for 0.2s") {
		t.Errorf("stuck generation: %d %s", resp.StatusCode, body)
	}
	if took := time.Since(begin); took > 3*time.Second {
		t.Errorf("answered after %v", took)
	}
	resp, body = ts.do(t, "GET", "/readyz", "")
	if resp.StatusCode != 503 || !strings.Contains(body, `"worker":"the worker has made no progress for`) || !strings.Contains(body, "on request ") {
		t.Errorf("/readyz with a stuck worker: %d %s", resp.StatusCode, body)
	}
	if resp, body := ts.do(t, "GET", "/healthz", ""); resp.StatusCode != 200 {
		t.Errorf("/healthz with a stuck worker: %d %s", resp.StatusCode, body)
	}
	eng.Unhang()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, body = ts.do(t, "GET", "/readyz", "")
		if resp.StatusCode == 200 && strings.Contains(body, `"worker":"ok"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after the worker returned: %d %s", resp.StatusCode, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
