package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/spf13/pflag"
)

// serveConfig is geist serve's configuration: a TOML file (see
// scripts/geist.toml) whose every setting is also a flag; flags win.
type serveConfig struct {
	Model     string `toml:"model"`
	Device    string `toml:"device"`
	DataDir   string `toml:"data_dir"`
	Threads   int    `toml:"threads"`
	Ctx       int    `toml:"ctx"`
	LogLevel  string `toml:"log_level"`
	LogFormat string `toml:"log_format"`

	MQTT       mqttSection       `toml:"mqtt"`
	Limits     limitsSection     `toml:"limits"`
	Generation generationSection `toml:"generation"`
}

type mqttSection struct {
	Broker          string `toml:"broker"`
	Username        string `toml:"username"`
	Password        string `toml:"password"`
	PasswordFile    string `toml:"password_file"`
	CAFile          string `toml:"ca_file"`
	CertFile        string `toml:"cert_file"`
	KeyFile         string `toml:"key_file"`
	ClientID        string `toml:"client_id"`
	Discovery       bool   `toml:"discovery"`
	DiscoveryPrefix string `toml:"discovery_prefix"`
	Pool            bool   `toml:"pool"`
	Embedded        bool   `toml:"embedded"`
	EmbeddedAddr    string `toml:"embedded_addr"`
}

type limitsSection struct {
	Queue           int     `toml:"queue"`
	MaxPayload      int     `toml:"max_payload"`
	MaxPromptTokens int     `toml:"max_prompt_tokens"`
	MaxTokens       int     `toml:"max_tokens"`
	TTL             float64 `toml:"ttl_s"`
	ShutdownGrace   float64 `toml:"shutdown_grace_s"`
}

type generationSection struct {
	Temperature float64 `toml:"temperature"`
	System      string  `toml:"system"`
	MaxHistory  int     `toml:"max_history"`
	MaxSessions int     `toml:"max_sessions"`
}

func defaultServeConfig() serveConfig {
	return serveConfig{
		Device:    defaultDevice(),
		DataDir:   os.Getenv("STATE_DIRECTORY"), // systemd's StateDirectory=
		LogLevel:  "info",
		LogFormat: "text",
		MQTT: mqttSection{
			Discovery:       true,
			DiscoveryPrefix: "homeassistant",
			Pool:            true,
			EmbeddedAddr:    "127.0.0.1:1883",
		},
		Limits: limitsSection{
			Queue:         8,
			MaxPayload:    64 << 10,
			MaxTokens:     512,
			TTL:           300,
			ShutdownGrace: 10,
		},
		Generation: generationSection{
			Temperature: 0.7,
			MaxHistory:  20,
			MaxSessions: 64,
		},
	}
}

// defaultDevice is the host name reduced to the characters topics and
// Home Assistant ids allow ("geist" when that leaves nothing).
func defaultDevice() string {
	h, _ := os.Hostname()
	h, _, _ = strings.Cut(h, ".")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 || b.Len() > 64 {
		return "geist"
	}
	return b.String()
}

// bind registers every setting as a flag whose default is the current
// value in c.
func (c *serveConfig) bind(fs *pflag.FlagSet) {
	fs.StringVarP(&c.Model, "model", "m", c.Model, "GGUF model file")
	fs.StringVar(&c.Device, "device", c.Device, "device name in topics and Home Assistant ids, unique per broker ([a-zA-Z0-9_-]; default: the host name)")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory for state (sessions, prompt cache); $STATE_DIRECTORY by default")
	fs.IntVarP(&c.Threads, "threads", "t", c.Threads, "threads for matrix products (0: all performance cores)")
	fs.IntVar(&c.Ctx, "ctx", c.Ctx, "context size in tokens (0: the model's, at most 4096)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "text or json")

	m := &c.MQTT
	fs.StringVar(&m.Broker, "broker", m.Broker, "MQTT broker URL: tcp://host:1883, ssl://host:8883, ws://host:9001 (empty: MQTT off)")
	fs.StringVar(&m.Username, "mqtt-username", m.Username, "MQTT user name")
	fs.StringVar(&m.Password, "mqtt-password", m.Password, "MQTT password (prefer --mqtt-password-file)")
	fs.StringVar(&m.PasswordFile, "mqtt-password-file", m.PasswordFile, "file holding the MQTT password")
	fs.StringVar(&m.CAFile, "mqtt-ca", m.CAFile, "CA certificates (PEM) for ssl:// brokers")
	fs.StringVar(&m.CertFile, "mqtt-cert", m.CertFile, "client certificate (PEM)")
	fs.StringVar(&m.KeyFile, "mqtt-key", m.KeyFile, "client key (PEM)")
	fs.StringVar(&m.ClientID, "mqtt-client-id", m.ClientID, "MQTT client id (default: from the machine id and device)")
	fs.BoolVar(&m.Discovery, "discovery", m.Discovery, "announce the device to Home Assistant")
	fs.StringVar(&m.DiscoveryPrefix, "discovery-prefix", m.DiscoveryPrefix, "Home Assistant discovery prefix")
	fs.BoolVar(&m.Pool, "pool", m.Pool, "also serve pooled requests on geist/pool/ask (shared subscription)")
	fs.BoolVar(&m.Embedded, "mqtt-embedded", m.Embedded, "run an in-process MQTT broker (the device is its own hub)")
	fs.StringVar(&m.EmbeddedAddr, "mqtt-embedded-addr", m.EmbeddedAddr, "address of the embedded broker (not loopback: needs a username and password)")

	l := &c.Limits
	fs.IntVar(&l.Queue, "queue", l.Queue, "requests that may wait behind the running one (more: busy)")
	fs.IntVar(&l.MaxPayload, "max-payload", l.MaxPayload, "largest request payload in bytes (more: too_long)")
	fs.IntVar(&l.MaxPromptTokens, "max-prompt-tokens", l.MaxPromptTokens, "most prompt tokens (0: the context less one)")
	fs.IntVar(&l.MaxTokens, "max-tokens", l.MaxTokens, "cap on tokens generated per request")
	fs.Float64Var(&l.TTL, "ttl", l.TTL, "default time to live of a request in seconds (queue and generation)")
	fs.Float64Var(&l.ShutdownGrace, "shutdown-grace", l.ShutdownGrace, "seconds the running request may finish at shutdown")

	g := &c.Generation
	fs.Float64Var(&g.Temperature, "temp", g.Temperature, "default sampling temperature")
	fs.StringVar(&g.System, "system", g.System, "default system message")
	fs.IntVar(&g.MaxHistory, "max-history", g.MaxHistory, "messages of a session's history kept")
	fs.IntVar(&g.MaxSessions, "max-sessions", g.MaxSessions, "sessions kept in memory")
}

// loadServeConfig reads a TOML file over c. Unknown keys are an error that
// names them, so a typo does not silently fall back to a default.
func loadServeConfig(path string, c *serveConfig) error {
	md, err := toml.DecodeFile(path, c)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return fmt.Errorf("config %s: unknown key %s", path, strings.Join(keys, ", "))
	}
	return nil
}

// validate checks the settings that mqtt and engine do not.
func (c *serveConfig) validate() error {
	var errs []error
	if c.Model == "" {
		errs = append(errs, errors.New("no model given (-m MODEL or model = in the config)"))
	}
	if c.Threads < 0 || c.Ctx < 0 {
		errs = append(errs, errors.New("threads and ctx must not be negative"))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("log_level %q: want debug, info, warn or error", c.LogLevel))
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		errs = append(errs, fmt.Errorf("log_format %q: want text or json", c.LogFormat))
	}
	l := c.Limits
	if l.Queue < 1 || l.MaxPayload < 1 || l.MaxTokens < 1 || l.MaxPromptTokens < 0 || !(l.TTL > 0) || l.ShutdownGrace < 0 {
		errs = append(errs, errors.New("limits: queue, max_payload, max_tokens and ttl_s must be positive; max_prompt_tokens and shutdown_grace_s not negative"))
	}
	if g := c.Generation; g.Temperature < 0 || g.Temperature > 2 || g.MaxHistory < 0 || g.MaxSessions < 1 {
		errs = append(errs, errors.New("generation: temperature must be in [0, 2], max_history not negative, max_sessions positive"))
	}
	if c.MQTT.Password != "" && c.MQTT.PasswordFile != "" {
		errs = append(errs, errors.New("give mqtt password or password_file, not both"))
	}
	return errors.Join(errs...)
}
