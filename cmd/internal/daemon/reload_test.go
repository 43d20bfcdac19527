package daemon

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/cmd/internal/cli"
)

// TestReload: SIGHUP's reload applies log_level at once, names every
// other change as needing a restart (never its value: passwords), and
// keeps the running configuration when the file no longer parses.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "geist.toml")
	write := func(body string) {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("model = \"a.gguf\"\nlog_level = \"info\"\n[mqtt]\npassword = \"one\"\n")
	args := []string{"--config", path, "--device", "kitchen"}
	e := &cli.Env{Stdin: strings.NewReader(""), Stdout: &strings.Builder{}, Stderr: &strings.Builder{}}
	running, err := ParseConfig(e, args)
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	lv := new(slog.LevelVar)
	log := newLogger(&logs, &running, lv)

	write("model = \"b.gguf\"\nlog_level = \"debug\"\n[mqtt]\npassword = \"two\"\n[limits]\nqueue = 3\n")
	reload(args, &running, lv, log)
	out := logs.String()
	if lv.Level() != slog.LevelDebug || !strings.Contains(out, "log_level is now debug") {
		t.Errorf("log level %v; log:\n%s", lv.Level(), out)
	}
	if !strings.Contains(out, `keys="limits.queue, model, mqtt.password"`) || strings.Contains(out, "two") {
		t.Errorf("changes needing a restart:\n%s", out)
	}
	logs.Reset()
	write("model = \n")
	reload(args, &running, lv, log)
	if out := logs.String(); !strings.Contains(out, "not reloaded; the running one stays") || lv.Level() != slog.LevelDebug {
		t.Errorf("broken file:\n%s", out)
	}
	logs.Reset()
	write("model = \"a.gguf\"\nlog_level = \"debug\"\n[mqtt]\npassword = \"one\"\n")
	reload(args, &running, lv, log)
	if out := logs.String(); !strings.Contains(out, "nothing else changed") {
		t.Errorf("unchanged:\n%s", out)
	}
}
