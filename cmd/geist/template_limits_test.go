package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/cmd/internal/daemon"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/zoo"
)

// TestHelperGeist is not a test: run by runGeistProcess in a child
// process, it runs geist with the arguments in GEIST_HELPER_ARGS (split on
// newlines) and exits with its status.
func TestHelperGeist(t *testing.T) {
	args := os.Getenv("GEIST_HELPER_ARGS")
	if args == "" {
		t.Skip("helper process only")
	}
	setupHelperChat()
	if os.Getenv("GEIST_HELPER_PROMPT_LINE") != "" {
		promptLineAfter, promptLineEvery = 0, 0
	}
	if d, err := time.ParseDuration(os.Getenv("GEIST_HELPER_SERVE_DELAY")); err == nil {
		daemon.TestEngine = func(e appliance.Engine) appliance.Engine { return throttled{e, d} }
	}
	if os.Getenv("GEIST_HELPER_SERVE_HANG") != "" {
		daemon.TestEngine = func(e appliance.Engine) appliance.Engine { return hung{e} }
	}
	code := mainProcess(strings.Split(args, "\n"))
	// The peak of this process's own memory (its mm is new since exec;
	// rusage's maxrss would also count the parent's, shared until then).
	if status, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(line, "VmHWM:") {
				_ = os.WriteFile(os.Getenv("GEIST_HELPER_RSS"), []byte(strings.Fields(line)[1]), 0o600)
			}
		}
	}
	os.Exit(code)
}

// runGeistProcess runs geist args in a child process and returns its exit
// status, its stderr and its peak resident set size in bytes (VmHWM).
func runGeistProcess(t *testing.T, args ...string) (int, string, int64) {
	t.Helper()
	rssFile := filepath.Join(t.TempDir(), "rss")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperGeist$")
	cmd.Env = append(os.Environ(), "GEIST_HELPER_ARGS="+strings.Join(args, "\n"), "GEIST_HELPER_RSS="+rssFile)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(rssFile)
	if err != nil {
		t.Fatalf("the child reported no peak RSS: %v (stderr %q)", err, stderr.String())
	}
	kb, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return code, stderr.String(), kb * 1024
}

// zooTemplate is the zoo's reference chat template of the named model
// (golden/chat-templates.json), failing the test when it is not there.
func zooTemplate(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(zoo.Path(t, "golden", "chat-templates.json"))
	if err != nil {
		t.Fatal(err)
	}
	var zt struct{ Templates map[string]string }
	if err := json.Unmarshal(raw, &zt); err != nil {
		t.Fatal(err)
	}
	tmpl, ok := zt.Templates[name]
	if !ok {
		t.Fatalf("the zoo has no chat template of %s", name)
	}
	return tmpl
}

// withTemplate writes a copy of the GGUF at src with its chat template
// replaced by tmpl.
func withTemplate(t *testing.T, src, tmpl string) string {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := gguf.NewBuilder()
	b.CopyKV(f)
	b.Set("tokenizer.chat_template", tmpl)
	for _, tn := range f.Tensors {
		if err := b.AddTensor(tn.Name, tn.Type, tn.Dims, tn.Data); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "hostile.gguf")
	if err := b.WriteFile(out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHostileTemplateRefusedAtLoad: a model file whose chat template
// recurses without end (a macro calling itself: before the guard, a fatal
// Go stack overflow at 1 GB of RSS, and a crash loop under systemd) is
// refused when geist loads it, with a one-line error, in a process whose
// peak RSS stays under 100 MB. So is one that loops for hours or builds a
// terabyte string.
func TestHostileTemplateRefusedAtLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts geist processes; natively only")
	}
	model := zoo.Path(t, "models", "stories260K-Q4_0.gguf")
	code, errs, base := runGeistProcess(t, "run", "-m", model, "-n", "4", "--cache-size", "0", "Once upon a time")
	if code != 0 {
		t.Fatalf("the model as it is: exit %d: %s", code, errs)
	}
	t.Logf("stories260K as it is: peak RSS %.1f MB", float64(base)/1e6)
	for name, tmpl := range map[string]string{
		"recursion": `{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}`,
		"loop":      `{% for i in range(60000) %}{% for j in range(60000) %}{% endfor %}{% endfor %}`,
		"string":    `{% set s = 'ab' %}{% for i in range(64) %}{% set s = s ~ s %}{% endfor %}{{ s }}`,
	} {
		path := withTemplate(t, model, tmpl)
		code, errs, rss := runGeistProcess(t, "run", "-m", path, "-n", "4", "--cache-size", "0", "Once upon a time")
		t.Logf("%s: exit %d, peak RSS %.1f MB: %s", name, code, float64(rss)/1e6, strings.TrimSpace(errs))
		if code != 1 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "chat template") || !strings.Contains(errs, "exceeds a limit") {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 and one line about the template's limit", name, code, errs)
		}
		if rss > 100<<20 {
			t.Errorf("%s: peak RSS %d MB, want under 100 MB", name, rss>>20)
		}
	}
}
