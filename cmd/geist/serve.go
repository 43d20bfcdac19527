package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/spf13/pflag"

	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/firmware"
	"github.com/geisten/geist/firmware/voice"
	"github.com/geisten/geist/mqtt"
	"github.com/geisten/geist/mqtt/hermes"
	"github.com/geisten/geist/storage"
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
	c.applyDeviceFlags(fs2)
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
	return serve(ctx, &c, newLogger(e.stderr, &c), serveHooks{})
}

// serveHooks let tests replace the hardware and slow the model down; the
// zero value is production.
type serveHooks struct {
	// openGPIO opens the buttons and LEDs (firmware.Open when nil).
	openGPIO func(firmware.Config, *slog.Logger) (*firmware.Device, error)
	// wrapGen wraps the model's generator (nothing when nil).
	wrapGen func(mqtt.Generator) mqtt.Generator
}

// serve runs the daemon until ctx ends.
func serve(ctx context.Context, c *serveConfig, log *slog.Logger, hooks serveHooks) error {
	if c.DataDir != "" {
		if err := os.MkdirAll(c.DataDir, 0o750); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
	}
	start := time.Now()
	opt := engine.Options{Threads: c.Threads, Ctx: c.Ctx, KVType: c.KVType, Logger: log.With("component", "engine")}
	// The prompt cache and the sessions live in the data directory; without
	// one (or when a file cannot be opened) they stay in memory.
	var sessions SessionStore = newMemSessions(c.Generation.MaxSessions, c.Generation.MaxHistory)
	if c.DataDir != "" {
		if c.CacheSize > 0 {
			cache, err := storage.OpenCache(filepath.Join(c.DataDir, "cache.db"), &storage.CacheOptions{MaxBytes: c.CacheSize, Logger: log.With("component", "cache")})
			if err != nil {
				log.Warn("prompt cache unavailable, continuing without it", "err", err)
			} else {
				defer cache.Close()
				opt.Cache = cache
			}
		}
		db, err := storage.OpenSessions(filepath.Join(c.DataDir, "sessions.db"), &storage.Options{Logger: log.With("component", "sessions")})
		if err != nil {
			log.Warn("sessions database unavailable, keeping sessions in memory", "err", err)
		} else {
			sessions = &dbSessions{db: db, model: c.Model, maxHistory: c.Generation.MaxHistory}
		}
	} else {
		log.Warn("no data directory: sessions and the prompt cache stay in memory (set --data-dir)")
	}
	if cl, ok := sessions.(io.Closer); ok { // a durable store closes its database last
		defer cl.Close()
	}
	eng, err := engine.Load(c.Model, opt)
	if err != nil {
		return err
	}
	defer eng.Close()
	log.Info("model loaded", "model", c.Model, "ctx", eng.Ctx(), "ms", time.Since(start).Milliseconds(),
		"version", versionString(), "device", c.Device, "data_dir", c.DataDir, "prompt_cache", opt.Cache != nil)
	var gen mqtt.Generator = newEngineGenerator(eng, sessions, c)
	if hooks.wrapGen != nil {
		gen = hooks.wrapGen(gen)
	}

	// Buttons and LEDs. A board without the pins is not fatal: the error
	// says what is missing and MQTT keeps being served.
	var dev *firmware.Device
	if gpioConfigured(c.GPIO) {
		open := hooks.openGPIO
		if open == nil {
			open = firmware.Open
		}
		d, err := open(c.GPIO, log.With("component", "gpio"))
		switch {
		case d == nil && err != nil: // an invalid configuration
			return fmt.Errorf("gpio: %w", err)
		case errors.Is(err, firmware.ErrUnavailable):
			log.Warn(strings.ReplaceAll(oneLine(err.Error()), "firmware: ", "")+"; serving on without them", "buttons_found", d.Buttons())
		case err != nil: // pins found but not all usable: not fatal either
			log.Warn("GPIO: "+strings.ReplaceAll(oneLine(err.Error()), "firmware: ", "")+"; serving on", "buttons_found", d.Buttons())
		}
		dev = d
		gen = ledGenerator{gen, dev.LEDs()}
	}

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
		log.Warn("no MQTT broker configured (--broker or [mqtt] broker): MQTT is off; serving nothing over the network until restarted with one (buttons and voice keep working)")
	}
	mc := c.mqttConfig(broker, log)
	mc.Components = discoveryComponents(c.Device, foundButtons(c.GPIO, dev))
	t := &triggers{device: c.Device, log: log.With("component", "triggers")}
	mc.OnCancel = t.stopOutputs // Home Assistant's Cancel button also stops speech
	svc, err := mqtt.New(mc, gen)
	if err != nil {
		return err
	}
	t.svc = svc
	if dev != nil {
		t.leds = dev.LEDs()
	}
	if c.Voice.Speech != nil {
		if t.speaker, err = voice.NewSpeaker(*c.Voice.Speech, log.With("component", "speech")); err != nil {
			return err
		}
	}
	if c.Voice.Talk != nil {
		if t.ptt, err = voice.NewPushToTalk(*c.Voice.Talk, t, log.With("component", "push-to-talk")); err != nil {
			return err
		}
	}
	var hopts *paho.ClientOptions
	if c.Hermes != nil {
		if t.bridge, err = hermes.New(c.Hermes.Config, t, log); err != nil {
			return err
		}
		if hopts, err = hermesOptions(c, c.Hermes, broker, svc.ClientID()); err != nil {
			log.Error(err.Error() + "; the Hermes bridge is off")
			t.bridge = nil
		}
	}
	if c.Voice.Talk != nil && !slices.ContainsFunc(c.GPIO.Buttons, func(b firmware.Button) bool { return b.Talk }) {
		log.Warn("[voice.talk] is configured but no button has talk = true: push-to-talk is unused")
	}
	log.Info("device triggers", "on", describeDevice(c, dev))

	// The triggers stop with ctx; the service finishes (or cancels) the
	// running request within the shutdown grace and publishes offline.
	var wg sync.WaitGroup
	if t.speaker != nil {
		wg.Go(func() { t.speaker.Run(ctx) })
	}
	if dev != nil {
		var talker firmware.Talker
		if t.ptt != nil {
			talker = t.ptt
		}
		wg.Go(func() { dev.Run(ctx, t, talker) })
	}
	if t.bridge != nil {
		wg.Go(func() { t.bridge.Connect(ctx, hopts) })
	}
	err = svc.Run(ctx)
	wg.Wait()
	if t.ptt != nil {
		t.ptt.Wait()
	}
	t.wg.Wait()
	log.Info("stopped")
	return err
}
