package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/mqtt"
	"github.com/spf13/pflag"
)

const serveUsage = "serve [--config FILE] [-m MODEL] [--broker URL] [--device NAME] [--data-dir DIR] [flags]"

// parseServe reads --config, the file and then the flags (which win).
func parseServe(e *env, args []string) (serveConfig, error) {
	// First pass: find --config (and reject bad flags, print help).
	probe := defaultServeConfig()
	fs := newFlags(e, "serve", serveUsage)
	configPath := fs.String("config", "", "TOML configuration file (flags override it)")
	probe.bind(fs)
	if err := parse(fs, args); err != nil {
		if err == pflag.ErrHelp {
			fmt.Fprintf(e.stderr, "usage: geist %s\n", serveUsage)
			fs.PrintDefaults()
		}
		return probe, err
	}
	if fs.NArg() > 0 {
		return probe, usagef("unexpected arguments %q", fs.Args())
	}
	c := defaultServeConfig()
	if *configPath != "" {
		if err := loadServeConfig(*configPath, &c); err != nil {
			return c, usageError{err}
		}
	}
	// Second pass: the flags over the file.
	fs2 := newFlags(e, "serve", serveUsage)
	fs2.String("config", "", "")
	c.bind(fs2)
	if err := parse(fs2, args); err != nil {
		return c, err
	}
	if err := c.validate(); err != nil {
		return c, usageError{err}
	}
	if c.MQTT.PasswordFile != "" {
		b, err := os.ReadFile(c.MQTT.PasswordFile)
		if err != nil {
			return c, fmt.Errorf("mqtt password file: %w", err)
		}
		c.MQTT.Password = strings.TrimRight(string(b), "\r\n")
	}
	return c, nil
}

func newLogger(w io.Writer, c *serveConfig) *slog.Logger {
	var lv slog.Level
	lv.UnmarshalText([]byte(c.LogLevel))
	opt := &slog.HandlerOptions{Level: lv}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opt))
	}
	return slog.New(slog.NewTextHandler(w, opt))
}

// mqttConfig turns the serve configuration into the mqtt service's.
func (c *serveConfig) mqttConfig(broker string, log *slog.Logger) mqtt.Config {
	m := c.MQTT
	return mqtt.Config{
		Broker: broker, Username: m.Username, Password: m.Password,
		CAFile: m.CAFile, CertFile: m.CertFile, KeyFile: m.KeyFile, ClientID: m.ClientID,
		Device: c.Device, Discovery: m.Discovery, DiscoveryPrefix: m.DiscoveryPrefix, Pool: m.Pool,
		Version: versionString(), Model: strings.TrimSuffix(filepath.Base(c.Model), ".gguf"),
		QueueLen: c.Limits.Queue,
		Limits: mqtt.Limits{
			MaxPayload: c.Limits.MaxPayload,
			MaxTokens:  c.Limits.MaxTokens,
			DefaultTTL: seconds(c.Limits.TTL),
		},
		ShutdownGrace: max(seconds(c.Limits.ShutdownGrace), time.Millisecond),
		Logger:        log,
	}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func cmdServe(ctx context.Context, e *env, args []string) error {
	c, err := parseServe(e, args)
	if err != nil {
		return err
	}
	log := newLogger(e.stderr, &c)
	if c.DataDir != "" {
		if err := os.MkdirAll(c.DataDir, 0o750); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
	}
	start := time.Now()
	eng, err := engine.Load(c.Model, engine.Options{Threads: c.Threads, Ctx: c.Ctx})
	if err != nil {
		return err
	}
	defer eng.Close()
	log.Info("model loaded", "model", c.Model, "ctx", eng.Ctx(), "ms", time.Since(start).Milliseconds(),
		"version", versionString(), "device", c.Device, "data_dir", c.DataDir)
	var sessions SessionStore = newMemSessions(c.Generation.MaxSessions, c.Generation.MaxHistory)
	if cl, ok := sessions.(io.Closer); ok { // a durable store closes its database last
		defer cl.Close()
	}
	gen := newEngineGenerator(eng, sessions, &c)

	broker := c.MQTT.Broker
	if c.MQTT.Embedded {
		emb, err := mqtt.StartEmbedded(c.MQTT.EmbeddedAddr, c.MQTT.Username, c.MQTT.Password, log)
		if err != nil {
			return err
		}
		defer emb.Close()
		log.Info("embedded MQTT broker listening", "addr", emb.Addr())
		if broker == "" {
			broker = emb.URL()
		}
	}
	if broker == "" {
		log.Warn("no MQTT broker configured (--broker or [mqtt] broker): MQTT is off; serving nothing over the network until restarted with one")
		<-ctx.Done()
		log.Info("stopped")
		return nil
	}
	svc, err := mqtt.New(c.mqttConfig(broker, log), gen)
	if err != nil {
		return err
	}
	err = svc.Run(ctx)
	log.Info("stopped")
	return err
}
