package daemon

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
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

	"golang.org/x/sys/unix"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/models"
	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/firmware"
	"github.com/geisten/geist/mqtt"
	"github.com/geisten/geist/quant"
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
func (c *Config) listenAddrs() []listenAddr {
	var out []listenAddr
	if c.MQTT.Embedded {
		out = append(out, listenAddr{"embedded broker", c.MQTT.EmbeddedAddr})
	}
	if c.HTTP.Addr != "" {
		out = append(out, listenAddr{"http", c.HTTP.Addr})
	}
	if c.Wyoming.Addr != "" {
		out = append(out, listenAddr{"wyoming", c.Wyoming.Addr})
	}
	return out
}

// serveCheck checks what geist serve needs without serving: the model
// file, the data directory, the broker (connect, authenticate, subscribe,
// unsubscribe), the GPIO pins, the voice commands and the addresses to
// listen on. It prints one line per check and fails when one does.
func serveCheck(e *cli.Env, c *Config, configPath string) error {
	src := "flags and defaults"
	if configPath != "" {
		src = configPath
	}
	checks := []check{
		{"config", func() (string, error) { return src + ": valid", nil }},
		{"model", c.checkModel},
		{"context", c.checkContext},
		{"data", c.checkDataDir},
		{"models", c.checkModelsDir},
		{"daemon", c.checkDaemon},
		{"broker", c.checkBroker},
	}
	if c.EmbedModel != "" && c.modelErr == nil {
		checks = append(checks, check{"embed", c.checkEmbedModel})
	}
	if m := c.MQTT; m.CAFile != "" || m.CertFile != "" || m.KeyFile != "" {
		checks = append(checks, check{"tls", c.checkTLS})
	}
	if h := c.Hermes; h != nil && h.Broker != "" {
		checks = append(checks, check{"hermes", c.checkHermesBroker})
	}
	if GPIOConfigured(c.GPIO) {
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
			fmt.Fprintf(e.Stdout, "FAIL  %-7s %s\n", ch.name, cli.OneLine(err.Error()))
		} else {
			fmt.Fprintf(e.Stdout, "ok    %-7s %s\n", ch.name, detail)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d checks failed", failed, len(checks))
	}
	fmt.Fprintf(e.Stdout, "all %d checks passed: geist serve can start\n", len(checks))
	return nil
}

// printConfigFailure reports a configuration serve --check could not use.
func printConfigFailure(w io.Writer, err error) {
	fmt.Fprintf(w, "FAIL  %-7s %s\n", "config", cli.OneLine(err.Error()))
}

func (c *Config) checkModel() (string, error) {
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
	if m.Type == "embedding" {
		return "", fmt.Errorf("%s is an embedding model (%s): give it as --embed-model; -m takes a model that generates text", c.Model, m.Architecture)
	}
	return fmt.Sprintf("%s: %s %s, %s parameters, %s (%s)", m.Name, m.Architecture, m.Quantization, m.ParameterSize,
		models.ByteSize(m.Size), c.Model), nil
}

// checkEmbedModel checks --embed-model (embed_model) is an embedding
// model geist runs.
func (c *Config) checkEmbedModel() (string, error) {
	m, err := models.Describe(c.EmbedModel)
	if err != nil {
		return "", err
	}
	if m.Problem != "" {
		return "", fmt.Errorf("%s: %s", c.EmbedModel, m.Problem)
	}
	if m.Type != "embedding" {
		return "", fmt.Errorf("--embed-model %s is a %s model that generates text, not an embedding model (all-minilm, nomic-embed-text, bge-small, qwen3-embedding:0.6b, embeddinggemma)", c.EmbedModel, m.Architecture)
	}
	return fmt.Sprintf("%s: %s %s, %s parameters, %s (%s)", m.Name, m.Architecture, m.Quantization, m.ParameterSize,
		models.ByteSize(m.Size), c.EmbedModel), nil
}

func (c *Config) checkDataDir() (string, error) {
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

func (c *Config) checkBroker() (string, error) {
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

func (c *Config) checkHermesBroker() (string, error) {
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
func (c *Config) checkGPIO() (string, error) {
	if !HasGPIOChip() {
		return "off: this machine has no GPIO chip (no " + gpioChipGlob + "), so serve ignores the [gpio] pins (leave [gpio] out, or --gpio=false, to skip them)", nil
	}
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
		return "", fmt.Errorf("pins %s: the GPIO chip cannot be opened (permission? the service user needs the gpio group)%s; or serve with --gpio=false ([gpio] out of the config)", strings.Join(missing, ", "), errSuffix(unwrapUnavailable(err)))
	case len(missing) > 0:
		return "", fmt.Errorf("pins %s not found among the board's %d lines ('geist gpio list' names them): fix the pins of [gpio], or serve with --gpio=false", strings.Join(missing, ", "), len(pins))
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
func (c *Config) checkVoice() (string, error) {
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

// checkContext says which context serve would choose and what bounds it,
// without loading the model.
func (c *Config) checkContext() (string, error) {
	if c.modelErr != nil {
		return "", errors.New("no model to size it for")
	}
	f, err := gguf.Open(c.Model)
	if err != nil {
		return "", fmt.Errorf("%s: %v", c.Model, err)
	}
	defer f.Close()
	mc, err := model.ReadConfig(f)
	if err != nil {
		return "", fmt.Errorf("%s: %v", c.Model, err)
	}
	kv := quant.F16
	if strings.EqualFold(c.KVType, "q8_0") {
		kv = quant.Q8_0
	}
	avail, _ := engine.ReadMemAvailable(cmp.Or(os.Getenv("GEIST_MEMINFO"), engine.MemInfo))
	ch := engine.ChooseContext(mc, kv, int64(len(f.Bytes()))-f.DataOffset, avail)
	if c.Ctx == 0 {
		return fmt.Sprintf("ctx auto: %s", ch), nil
	}
	msg := fmt.Sprintf("ctx %d (--ctx or ctx; auto would take %d: %s)", c.Ctx, ch.Ctx, ch)
	if ch.MemoryCap > 0 && int(c.Ctx) > ch.MemoryCap {
		return "", fmt.Errorf("ctx %d needs %s of KV cache, more than the memory left after the weights allows (%d positions): lower --ctx or ctx, or set ctx = \"auto\"", c.Ctx, models.ByteSize(int64(c.Ctx)*ch.KVPerTok), ch.MemoryCap)
	}
	return msg, nil
}

// checkModelsDir checks the model store serve's /api/pull writes to and
// /api/show reads.
func (c *Config) checkModelsDir() (string, error) {
	dir := c.modelsDir()
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		parent := filepath.Dir(dir)
		if unix.Access(parent, unix.W_OK) != nil && !errors.Is(unix.Access(parent, unix.F_OK), unix.ENOENT) {
			return "", fmt.Errorf("%s does not exist and %s is not writable: geist pull could not create it (--models-dir or --data-dir names another)", dir, parent)
		}
		return dir + ": not there yet (geist pull creates it)", nil
	case err != nil:
		return "", fmt.Errorf("%s: %v", dir, err)
	case !st.IsDir():
		return "", fmt.Errorf("%s is not a directory (--models-dir or --data-dir names another)", dir)
	}
	ms, err := models.New(dir).List()
	if err != nil {
		return "", fmt.Errorf("%s: %v", dir, err)
	}
	return fmt.Sprintf("%s: %d models", dir, len(ms)), nil
}

// checkDaemon checks that no geist serve runs on the data directory and
// that the control socket can be made there.
func (c *Config) checkDaemon() (string, error) {
	if c.DataDir == "" {
		return "no data directory: no control socket (geist sessions and geist ps cannot reach this serve)", nil
	}
	if pid, ok := Running(c.DataDir); ok {
		return "", fmt.Errorf("%w on %s%s: stop it first, or give this one another --data-dir", ErrRunning, c.DataDir, pid)
	}
	sock := filepath.Join(c.DataDir, SocketName)
	if len(sock) > 107 {
		return "", fmt.Errorf("control socket %s: %d bytes, more than the 107 a unix socket path may have (a shorter --data-dir)", sock, len(sock))
	}
	return "control socket " + sock + ", no other serve on the data directory", nil
}

// checkTLS reads the MQTT TLS files as the client will.
func (c *Config) checkTLS() (string, error) {
	m := c.MQTT
	var ok []string
	if m.CAFile != "" {
		b, err := os.ReadFile(m.CAFile)
		if err != nil {
			return "", fmt.Errorf("--mqtt-ca %v", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			return "", fmt.Errorf("--mqtt-ca %s holds no PEM certificate", m.CAFile)
		}
		ok = append(ok, m.CAFile)
	}
	if (m.CertFile == "") != (m.KeyFile == "") {
		return "", errors.New("--mqtt-cert and --mqtt-key go together ([mqtt] cert_file and key_file)")
	}
	if m.CertFile != "" {
		if _, err := tls.LoadX509KeyPair(m.CertFile, m.KeyFile); err != nil {
			return "", fmt.Errorf("--mqtt-cert %s / --mqtt-key %s: %v", m.CertFile, m.KeyFile, err)
		}
		ok = append(ok, m.CertFile, m.KeyFile)
	}
	return strings.Join(ok, ", ") + " readable", nil
}

// unwrapUnavailable is the cause inside a firmware.UnavailableError,
// without its summary (the check says that itself).
func unwrapUnavailable(err error) error {
	var ue *firmware.UnavailableError
	if errors.As(err, &ue) {
		return ue.Init
	}
	return err
}
