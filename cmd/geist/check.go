package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/geisten/geist/cmd/internal/models"
	"github.com/geisten/geist/firmware"
	"github.com/geisten/geist/mqtt"
	"github.com/geisten/geist/storage"
)

// checkTimeout bounds each network check of serve --check.
const checkTimeout = 10 * time.Second

// check is one line of serve --check.
type check struct {
	name string
	run  func() (string, error)
}

// listenAddr is an address geist serve would listen on.
type listenAddr struct{ what, addr string }

// listenAddrs are the addresses the configuration makes geist serve
// listen on (the embedded broker; the HTTP and Wyoming front ends add
// theirs here).
func (c *serveConfig) listenAddrs() []listenAddr {
	var out []listenAddr
	if c.MQTT.Embedded {
		out = append(out, listenAddr{"embedded broker", c.MQTT.EmbeddedAddr})
	}
	if c.HTTP.Addr != "" {
		out = append(out, listenAddr{"http", c.HTTP.Addr})
	}
	return out
}

// serveCheck checks what geist serve needs without serving: the model
// file, the data directory, the broker (connect, authenticate, subscribe,
// unsubscribe), the GPIO pins, the voice commands and the addresses to
// listen on. It prints one line per check and fails when one does.
func serveCheck(e *env, c *serveConfig, configPath string) error {
	src := "flags and defaults"
	if configPath != "" {
		src = configPath
	}
	checks := []check{
		{"config", func() (string, error) { return src + ": valid", nil }},
		{"model", c.checkModel},
		{"data", c.checkDataDir},
		{"broker", c.checkBroker},
	}
	if h := c.Hermes; h != nil && h.Broker != "" {
		checks = append(checks, check{"hermes", c.checkHermesBroker})
	}
	if gpioConfigured(c.GPIO) {
		checks = append(checks, check{"gpio", c.checkGPIO})
	}
	if c.Voice.Speech != nil || c.Voice.Talk != nil {
		checks = append(checks, check{"voice", c.checkVoice})
	}
	for _, l := range c.listenAddrs() {
		checks = append(checks, check{"listen", func() (string, error) { return checkListen(l) }})
	}
	failed := 0
	for _, ch := range checks {
		detail, err := ch.run()
		if err != nil {
			failed++
			fmt.Fprintf(e.stdout, "FAIL  %-7s %s\n", ch.name, oneLine(err.Error()))
		} else {
			fmt.Fprintf(e.stdout, "ok    %-7s %s\n", ch.name, detail)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d checks failed", failed, len(checks))
	}
	fmt.Fprintf(e.stdout, "all %d checks passed: geist serve can start\n", len(checks))
	return nil
}

// printConfigFailure reports a configuration serve --check could not use.
func printConfigFailure(w io.Writer, err error) {
	fmt.Fprintf(w, "FAIL  %-7s %s\n", "config", oneLine(err.Error()))
}

func (c *serveConfig) checkModel() (string, error) {
	if c.modelErr != nil {
		return "", c.modelErr
	}
	m, err := models.Describe(c.Model)
	if err != nil {
		return "", err
	}
	if m.Problem != "" {
		return "", fmt.Errorf("%s: %s", c.Model, m.Problem)
	}
	if m.Type == "vocab" {
		return "", fmt.Errorf("%s holds a vocabulary only, no weights", c.Model)
	}
	return fmt.Sprintf("%s: %s %s, %s parameters, %s (%s)", m.Name, m.Architecture, m.Quantization, m.ParameterSize,
		models.ByteSize(m.Size), c.Model), nil
}

func (c *serveConfig) checkDataDir() (string, error) {
	dir := c.DataDir
	if dir == "" {
		return "none: sessions stay in memory, no prompt cache (--data-dir \"\")", nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, ".geist-check-*")
	if err != nil {
		return "", fmt.Errorf("%s is not writable: %w", dir, err)
	}
	f.Close()
	os.Remove(f.Name())
	db := filepath.Join(dir, "sessions.db")
	switch err := storage.CheckSessions(db); {
	case err == nil:
		return dir + ": writable; sessions.db sound", nil
	case errors.Is(err, storage.ErrNoDatabase):
		return dir + ": writable; sessions.db is created at the first start", nil
	case errors.Is(err, storage.ErrLocked):
		return dir + ": writable; sessions.db is held by a running geist serve", nil
	case errors.Is(err, storage.ErrCorrupt):
		return "", fmt.Errorf("%w: 'geist sessions salvage --data-dir %s' keeps every readable conversation (geist serve would start with it aside)", err, dir)
	default:
		return "", err
	}
}

func (c *serveConfig) checkBroker() (string, error) {
	broker := c.MQTT.Broker
	if broker == "" {
		if c.MQTT.Embedded {
			return "the embedded broker (" + c.MQTT.EmbeddedAddr + ")", nil
		}
		return "none configured: MQTT is off (--broker or [mqtt] broker)", nil
	}
	detail, err := mqtt.Check(c.mqttConfig(broker, nil, nil), checkTimeout)
	if err != nil {
		return "", fmt.Errorf("%s: %w", broker, err)
	}
	return broker + ": " + detail, nil
}

func (c *serveConfig) checkHermesBroker() (string, error) {
	h := c.Hermes
	detail, err := mqtt.Check(mqtt.Config{Broker: h.Broker, Username: h.Username, Password: h.Password, Device: c.Device,
		ClientID: h.ClientID, CAFile: h.CAFile, CertFile: h.CertFile, KeyFile: h.KeyFile}, checkTimeout)
	if err != nil {
		return "", fmt.Errorf("%s: %w", h.Broker, err)
	}
	return h.Broker + ": " + detail, nil
}

// checkGPIO looks the configured pins up among the board's lines without
// claiming them (a running geist serve holds them).
func (c *serveConfig) checkGPIO() (string, error) {
	pins, err := firmware.ListPins()
	have := map[string]bool{}
	for _, p := range pins {
		have[p.Name] = true
	}
	var want, missing []string
	for _, b := range c.GPIO.Buttons {
		want = append(want, b.Pin)
	}
	l := c.GPIO.LEDs
	for _, p := range []string{l.Ready, l.Busy, l.Error, l.Red, l.Green, l.Blue} {
		if p != "" {
			want = append(want, p)
		}
	}
	for _, p := range want {
		if !have[p] {
			missing = append(missing, p)
		}
	}
	switch {
	case len(missing) > 0 && len(pins) == 0:
		return "", fmt.Errorf("pins %s not found: this machine offers no GPIO lines (no /dev/gpiochip*, or no permission: the gpio group)%s", strings.Join(missing, ", "), errSuffix(err))
	case len(missing) > 0:
		return "", fmt.Errorf("pins %s not found among the board's %d lines ('geist gpio list' names them)", strings.Join(missing, ", "), len(pins))
	}
	return fmt.Sprintf("pins %s found", strings.Join(want, ", ")), nil
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return ": " + err.Error()
}

// checkVoice checks that the voice commands exist and are executable.
func (c *serveConfig) checkVoice() (string, error) {
	var cmds [][2]string
	if s := c.Voice.Speech; s != nil {
		cmds = append(cmds, [2]string{"speech command", first(s.Command)}, [2]string{"speech player", first(s.Play)})
	}
	if t := c.Voice.Talk; t != nil {
		cmds = append(cmds, [2]string{"capture command", first(t.Capture)}, [2]string{"speech-to-text command", first(t.STT)})
	}
	var found, errs []string
	for _, cmd := range cmds {
		if cmd[1] == "" {
			continue
		}
		p, err := exec.LookPath(cmd[1])
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s %q: %v", cmd[0], cmd[1], unwrapExec(err)))
			continue
		}
		found = append(found, p)
	}
	if len(errs) > 0 {
		return "", errors.New(strings.Join(errs, "; "))
	}
	return "commands " + strings.Join(found, ", ") + " executable", nil
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		if errors.Is(ee.Err, exec.ErrNotFound) {
			return errors.New("not found in PATH")
		}
		return ee.Err
	}
	return err
}

// checkListen checks that geist could listen on l.
func checkListen(l listenAddr) (string, error) {
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return "", fmt.Errorf("%s %s: address in use (by a running geist serve?)", l.what, l.addr)
		}
		return "", fmt.Errorf("%s %s: %w", l.what, l.addr, err)
	}
	ln.Close()
	return fmt.Sprintf("%s %s: free", l.what, l.addr), nil
}
