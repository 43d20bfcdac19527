package main

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/daemon"
	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/mqtt/mqtttest"
)

// TestServeWrongBrokerPassword: with a password Mosquitto refuses, geist
// serve logs the broker's reason at WARN within 5 s of its start, with
// the next attempt's time, and backs off; serve --check exits 1 and names
// the broker and the reason.
func TestServeWrongBrokerPassword(t *testing.T) {
	model := zoo.Path(t, "models", serveModel)
	b := mqtttest.StartMosquittoWithPassword(t, "geist", "right")
	dir := t.TempDir()
	pw := filepath.Join(dir, "mqtt-password")
	os.WriteFile(pw, []byte("wrong\n"), 0o600)
	start := time.Now()
	stop, logs := runServe(t, "-m", model, "--broker", b.URL, "--mqtt-username", "geist", "--mqtt-password-file", pw,
		"--device", "pw", "--data-dir", filepath.Join(dir, "state"))
	warn := regexp.MustCompile(`level=WARN msg="mqtt broker connection failed" device=pw broker=` + regexp.QuoteMeta(b.URL) +
		` reason="(not authorised|bad user name or password)" err="[^"]+" attempt=(\d+) retry_in=(\d+)s next_retry=\d\d:\d\d:\d\d`)
	waitForLog(t, logs, 5*time.Second, "the broker's refusal in the log", func() bool { return warn.MatchString(logs.String()) })
	took := time.Since(start)
	waitForLog(t, logs, 10*time.Second, "a second attempt, backed off", func() bool { return len(warn.FindAllString(logs.String(), -1)) >= 3 })
	m := warn.FindAllStringSubmatch(logs.String(), -1)
	if m[0][3] != "1" || m[1][3] != "2" || m[2][3] != "4" {
		t.Errorf("back-off %q, %q, %q s; want 1, 2, 4", m[0][3], m[1][3], m[2][3])
	}
	t.Logf("first warning %v after the start (the model loads first):\n%s", took.Round(time.Millisecond), m[0][0])
	if code := stop(); code != 0 {
		t.Errorf("exit %d", code)
	}

	code, out, errs := geist(t, "", "serve", "--check", "-m", model, "--broker", b.URL, "--mqtt-username", "geist",
		"--mqtt-password-file", pw, "--device", "pw", "--data-dir", filepath.Join(dir, "state"), "--http", "127.0.0.1:0")
	if code != 1 || !regexp.MustCompile(`(?m)^FAIL  broker  `+regexp.QuoteMeta(b.URL)+`: (not authorised|bad user name or password): connect: `).MatchString(out) ||
		!strings.Contains(out, "ok    model") || !strings.Contains(out, "ok    data") || !strings.Contains(errs, "1 of 8 checks failed") {
		t.Errorf("serve --check with the wrong password: exit %d\n%s%s", code, out, errs)
	}
	t.Logf("geist serve --check (wrong password):\n%s", out)
	os.WriteFile(pw, []byte("right\n"), 0o600)
	code, out, errs = geist(t, "", "serve", "--check", "-m", model, "--broker", b.URL, "--mqtt-username", "geist",
		"--mqtt-password-file", pw, "--device", "pw", "--data-dir", filepath.Join(dir, "state"), "--speech", "cat {text}", "--speech-play", "/bin/true", "--http", "127.0.0.1:0")
	if code != 0 || strings.Count(out, "ok    ") != 9 || !strings.Contains(out, "all 9 checks passed") {
		t.Errorf("serve --check with the right password: exit %d\n%s%s", code, out, errs)
	}
	t.Logf("geist serve --check (right password):\n%s", out)
}

// TestServeBrokerURL: a broker URL without a scheme is refused before the
// model loads (the model named here does not even exist, and the error is
// the URL's); one without a port gets the default port.
func TestServeBrokerURL(t *testing.T) {
	for _, url := range []string{"homeassistant.local", "homeassistant.local:1883", "localhost:8883"} {
		code, _, errs := geist(t, "", "serve", "-m", "/nonexistent/model.gguf", "--broker", url)
		if code != 2 || !strings.Contains(errs, "has no scheme: write mqtt") || strings.Contains(errs, "model") {
			t.Errorf("--broker %s: exit %d, %q", url, code, errs)
		}
	}
	code, out, _ := geist(t, "", "serve", "--check", "-m", "/nonexistent/model.gguf", "--broker", "ha.local")
	if code != 1 || !strings.HasPrefix(out, "FAIL  config  mqtt broker: broker \"ha.local\" has no scheme") {
		t.Errorf("--check with a broker without scheme: exit %d, %q", code, out)
	}
	// The embedded broker's password rule, before the model loads too.
	code, _, errs := geist(t, "", "serve", "-m", "/nonexistent/model.gguf", "--mqtt-embedded", "--mqtt-embedded-addr", "0.0.0.0:1883")
	if code != 2 || !strings.Contains(errs, "needs a username and a password") {
		t.Errorf("open embedded broker: exit %d, %q", code, errs)
	}
	e := &cli.Env{Stdin: strings.NewReader(""), Stdout: &strings.Builder{}, Stderr: &strings.Builder{}}
	c, err := daemon.ParseConfig(e, []string{"-m", "x.gguf", "--broker", "mqtt://ha.local"})
	if err != nil || c.MQTT.Broker != "mqtt://ha.local:1883" {
		t.Errorf("mqtt://ha.local: %v, %q", err, c.MQTT.Broker)
	}
	c, err = daemon.ParseConfig(e, []string{"-m", "x.gguf", "--broker", "mqtts://ha.local"})
	if err != nil || c.MQTT.Broker != "mqtts://ha.local:8883" {
		t.Errorf("mqtts://ha.local: %v, %q", err, c.MQTT.Broker)
	}
}

// TestDefaultDataDir: one data directory for every command, serve's too.
func TestDefaultDataDir(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", "/xdg")
	t.Setenv("STATE_DIRECTORY", "")
	os.Unsetenv("STATE_DIRECTORY")
	if d := cli.DefaultDataDir(); d != "/xdg/geist" {
		t.Errorf("with XDG_DATA_HOME: %s", d)
	}
	t.Setenv("STATE_DIRECTORY", "/var/lib/geist:/var/lib/other")
	if d := cli.DefaultDataDir(); d != "/var/lib/geist" {
		t.Errorf("under systemd: %s", d)
	}
	c, err := daemon.ParseConfig(&cli.Env{Stdin: strings.NewReader(""), Stdout: &strings.Builder{}, Stderr: &strings.Builder{}}, []string{"-m", "x.gguf"})
	if err != nil || c.DataDir != "/var/lib/geist" {
		t.Errorf("serve's data dir: %q %v", c.DataDir, err)
	}
}

// A taken Wyoming port fails serve --check, and serve itself before it
// loads the model (both bind errors came after "model loaded").
func TestServeCheckTakenWyomingPort(t *testing.T) {
	model := zoo.Path(t, "models", serveModel)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	dir := t.TempDir()
	code, out, errs := geist(t, "", "serve", "-m", model, "--data-dir", dir, "--http", "127.0.0.1:0", "--wyoming", addr, "--check")
	if code == 0 || !strings.Contains(out, "FAIL  listen  wyoming "+addr+": address in use") || strings.Contains(out, "can start") {
		t.Errorf("--check: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	for _, want := range []string{"ok    context ctx auto:", "ok    daemon", "ok    models"} {
		if !strings.Contains(out, want) {
			t.Errorf("--check lacks %q:\n%s", want, out)
		}
	}
	code, _, errs = geist(t, "", "serve", "-m", model, "--data-dir", dir, "--http", "127.0.0.1:0", "--wyoming", addr)
	if code == 0 || !strings.Contains(errs, "wyoming") || !strings.Contains(errs, "address already in use") || strings.Contains(errs, "model loaded") {
		t.Errorf("serve: exit %d, stderr %q; want the bind error before the model loads", code, errs)
	}
}
