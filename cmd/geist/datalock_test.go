package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/cmd/internal/daemon"
	"github.com/geisten/geist/engine/zoo"
)

// A second serve on the same data directory is refused, and so is a chat
// whose --session would not be saved (issue 22, item 8): the second
// serve fell back to sessions in memory and fought the first over the
// MQTT client id; chat --session exited 0 and stored nothing.
func TestServeLockRefusesASecond(t *testing.T) {
	model := zoo.Path(t, "models", serveModel)
	dir := t.TempDir()
	stop, logs := runServe(t, "-m", model, "--data-dir", dir)
	waitFor(t, 20*time.Second, "the first serve", func() bool { return strings.Contains(logs.String(), "HTTP API listening") })
	code, _, errs := geist(t, "", "serve", "-m", model, "--data-dir", dir, "--http", "127.0.0.1:0")
	if code == 0 || !strings.Contains(errs, "already running") || !strings.Contains(errs, dir) {
		t.Errorf("second serve: exit %d, %s", code, errs)
	}
	code, _, errs = geist(t, "hi\n", "chat", "-m", model, "-n", "4", "--data-dir", dir, "--session", "kept")
	if code == 0 || !strings.Contains(errs, "already running") {
		t.Errorf("chat --session beside serve: exit %d, %s", code, errs)
	}
	t.Logf("refusals: %s", strings.TrimSpace(errs))
	// Other commands answer at once: no wait for the daemon's database
	// locks (it was 2 s), a wrong path reported first.
	t0 := time.Now()
	code, out, errs := geist(t, "", "run", "-m", model, "-n", "3", "--temp", "0", "--data-dir", dir, "Once")
	el := time.Since(t0)
	if code != 0 || out == "" || errs != "" {
		t.Errorf("run beside serve: exit %d, %q, stderr %q", code, out, errs)
	}
	t0 = time.Now()
	code, _, errs = geist(t, "", "run", "-m", filepath.Join(dir, "missing.gguf"), "--data-dir", dir, "hi")
	elMissing := time.Since(t0)
	if code == 0 || !strings.Contains(errs, "no such file") {
		t.Errorf("run -m missing beside serve: exit %d, %s", code, errs)
	}
	t.Logf("beside serve: run %v, a missing model %v", el, elMissing)
	if el > 1500*time.Millisecond || elMissing > time.Second { // 0.3 s unloaded; the lock wait was 2 s
		t.Errorf("run beside serve took %v, a missing model %v: waiting for a lock?", el, elMissing)
	}
	// geist ps asks the daemon what it has loaded.
	code, out, errs = geist(t, "", "ps", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, daemon.ModelName(model)) || !strings.Contains(out, "CONTEXT") {
		t.Errorf("geist ps: exit %d, %q %q", code, out, errs)
	}
	if code := stop(); code != 0 {
		t.Fatalf("first serve: exit %d\n%s", code, logs.String())
	}
	// Once it is gone the directory is free again.
	stop2, logs2 := runServe(t, "-m", model, "--data-dir", dir)
	waitFor(t, 20*time.Second, "a serve after the first", func() bool { return strings.Contains(logs2.String(), "HTTP API listening") })
	stop2()
}
