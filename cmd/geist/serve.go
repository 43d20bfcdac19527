package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/geisten/geist/cmd/appliance"
	"github.com/geisten/geist/cmd/internal/httpapi"
	"github.com/geisten/geist/cmd/internal/models"
	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/firmware"
	"github.com/geisten/geist/firmware/voice"
	"github.com/geisten/geist/mqtt"
	"github.com/geisten/geist/mqtt/hermes"
)

const serveUsage = "serve [--config FILE] [-m MODEL] [--broker URL] [--device NAME] [--data-dir DIR] [flags]"

// parseServe reads --config, the file and then the flags (which win).
func parseServe(e *env, args []string) (serveConfig, error) {
	// First pass: find --config (and reject bad flags, print help).
	probe := defaultServeConfig()
	fs := newFlags(e, "serve", serveUsage)
	configPath := fs.String("config", "", "TOML configuration file (flags override it)")
	check := fs.Bool("check", false, "check the configuration, the model file, the data directory, the broker, the GPIO pins, the voice commands and the listening addresses, print one line each, and exit (1 if one fails) without serving")
	probe.bind(fs)
	var me modelRefError
	if err := parse(fs, args); err != nil && !errors.As(err, &me) {
		return probe, err // parse printed the usage for --help
	}
	if fs.NArg() > 0 {
		return probe, usagef("unexpected arguments %q", fs.Args())
	}
	c := defaultServeConfig()
	c.check, c.configPath = *check, *configPath
	if *configPath != "" {
		if err := loadServeConfig(*configPath, &c); err != nil {
			return c, usageError{configError{err}}
		}
		c.filePassword = c.MQTT.Password != "" || c.Hermes != nil && c.Hermes.Password != ""
	}
	// Second pass: the flags over the file.
	fs2 := newFlags(e, "serve", serveUsage)
	fs2.String("config", "", "")
	fs2.Bool("check", false, "")
	c.bind(fs2)
	if err := parse(fs2, args); err != nil {
		// A model name the store does not have is reported with the other
		// checks (serve --check) and before anything loads.
		var me modelRefError
		if !errors.As(err, &me) {
			return c, err
		}
		c.modelErr = me.err
	}
	if err := c.applyDeviceFlags(fs2); err != nil {
		return c, usageError{configError{err}}
	}
	if err := c.validate(); err != nil {
		return c, usageError{configError{err}}
	}
	if fs2.Changed("mqtt-password") {
		c.warnings = append(c.warnings, "--mqtt-password shows the password to every user of this machine (ps): use --mqtt-password-file or systemd's LoadCredential=")
	}
	if err := c.readCredentials(); err != nil {
		return c, configError{err}
	}
	return c, nil
}

// configError is a configuration geist serve cannot use (as opposed to a
// mistyped flag): serve --check reports it as its failed config check.
type configError struct{ err error }

func (c configError) Error() string { return c.err.Error() }
func (c configError) Unwrap() error { return c.err }

// newLogger returns serve's logger at c's level, which lv (when not nil)
// can change while it runs (SIGHUP).
func newLogger(w io.Writer, c *serveConfig, lv *slog.LevelVar) *slog.Logger {
	if lv == nil {
		lv = new(slog.LevelVar)
	}
	lv.Set(logLevel(c.LogLevel))
	opt := &slog.HandlerOptions{Level: lv}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opt))
	}
	return slog.New(slog.NewTextHandler(w, opt))
}

// coreConfig turns the serve configuration into the appliance core's.
func (c *serveConfig) coreConfig(eng appliance.Engine, sessions appliance.SessionStore, log *slog.Logger) appliance.Config {
	temp := c.Generation.Temperature
	return appliance.Config{
		Engine: eng, Sessions: sessions,
		Limits: appliance.Limits{
			Queue:           c.Limits.Queue,
			MaxTokens:       c.Limits.MaxTokens,
			MaxPromptTokens: c.Limits.MaxPromptTokens,
			DefaultTTL:      seconds(c.Limits.TTL),
		},
		System:        c.Generation.System,
		Defaults:      appliance.Options{Temperature: &temp},
		ShutdownGrace: max(seconds(c.Limits.ShutdownGrace), time.Millisecond),
		Model:         modelName(c.Model),
		Version:       versionString(),
		Logger:        log,
		RecentText:    c.HTTP.PageTexts && c.HTTP.Addr != "",
	}
}

// mqttConfig turns the serve configuration into the MQTT front end's.
func (c *serveConfig) mqttConfig(broker string, buttons []mqtt.Button, log *slog.Logger) mqtt.Config {
	m := c.MQTT
	return mqtt.Config{
		Broker: broker, Username: m.Username, Password: m.Password,
		CAFile: m.CAFile, CertFile: m.CertFile, KeyFile: m.KeyFile, ClientID: m.ClientID,
		Device: c.Device, Discovery: m.Discovery, DiscoveryPrefix: m.DiscoveryPrefix, Pool: m.Pool,
		Version: versionString(), Model: modelName(c.Model), Buttons: buttons,
		MaxPayload:    c.Limits.MaxPayload,
		ReplyPrefix:   m.ReplyPrefix,
		ShutdownGrace: max(seconds(c.Limits.ShutdownGrace), time.Millisecond),
		Logger:        log,
	}
}

// modelName is the model file's name without directory and .gguf.
func modelName(path string) string { return strings.TrimSuffix(filepath.Base(path), ".gguf") }

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func cmdServe(ctx context.Context, e *env, args []string) error {
	c, err := parseServe(e, args)
	var ce configError
	if err != nil && c.check && errors.As(err, &ce) {
		printConfigFailure(e.stdout, ce.err)
		return errors.New("the configuration failed its check")
	}
	if err != nil {
		return err
	}
	if c.check {
		return serveCheck(e, &c, c.configPath)
	}
	lv := new(slog.LevelVar)
	log := newLogger(e.stderr, &c, lv)
	watchHangups(ctx, args, &c, lv, log)
	return serve(ctx, &c, log, serveHooks{wrapEngine: testServeEngine})
}

// testServeEngine, nil but in the fault suite's geist processes
// (TestHelperGeist), slows the engine of geist serve down.
var testServeEngine func(appliance.Engine) appliance.Engine

// serveHooks let tests replace the hardware and slow the model down; the
// zero value is production.
type serveHooks struct {
	// openGPIO opens the buttons and LEDs (firmware.Open when nil).
	openGPIO func(firmware.Config, *slog.Logger) (*firmware.Device, error)
	// wrapEngine wraps the engine the core runs (nothing when nil).
	wrapEngine func(appliance.Engine) appliance.Engine
	// mountHTTP, if set, sees the HTTP server before it serves (tests
	// learn its address; other front ends mount their handlers here).
	mountHTTP func(*httpapi.Server)
}

// serve runs the daemon until ctx ends: the appliance core over the
// engine, and the front ends around it (MQTT, buttons and LEDs, voice,
// Hermes), each talking to the core and to nothing else.
func serve(ctx context.Context, c *serveConfig, log *slog.Logger, hooks serveHooks) error {
	if c.modelErr != nil {
		return c.modelErr
	}
	for _, w := range c.warnings {
		log.Warn(w)
	}
	if c.DataDir != "" {
		if err := os.MkdirAll(c.DataDir, 0o750); err != nil {
			return fmt.Errorf("data dir: %w", err)
		}
	}
	start := time.Now()
	store := appliance.OpenStorage(c.DataDir, appliance.StorageOptions{CacheSize: c.CacheSize, MaxSessions: c.Generation.MaxSessions,
		MaxHistory: c.Generation.MaxHistory, Model: c.Model, SessionLimits: c.Sessions.limits(), Logger: log})
	defer store.Close() // after the engine (which writes the cache) and the core (the sessions)
	var ctl *controlServer
	if db := store.DB(); db != nil {
		// geist sessions list|show|export|delete ask the daemon here.
		var err error
		if ctl, err = startControl(c.DataDir, db, log); err != nil {
			log.Warn("no control socket: geist sessions cannot reach this daemon", "err", err)
		} else {
			defer ctl.Close() // before the store closes
		}
	}
	eng, err := engine.Load(c.Model, engine.Options{Threads: c.Threads, Ctx: c.Ctx, KVType: c.KVType, Cache: store.Cache, Logger: log.With("component", "engine")})
	if err != nil {
		return err
	}
	defer eng.Close()
	loadTime := time.Since(start)
	log.Info("model loaded", "model", c.Model, "ctx", eng.Ctx(), "ms", loadTime.Milliseconds(),
		"version", versionString(), "device", c.Device, "data_dir", c.DataDir, "prompt_cache", store.Cache != nil)
	var ae appliance.Engine = eng
	if hooks.wrapEngine != nil {
		ae = hooks.wrapEngine(ae)
	}
	cc := c.coreConfig(ae, store.Sessions, log)
	cc.ModelLoad, cc.Storage = loadTime, store
	core, err := appliance.New(cc)
	if err != nil {
		return err
	}
	if store.Problem != "" {
		core.SetDegraded(appliance.PartStorage, store.Problem)
	}
	if ctl != nil {
		ctl.core.Store(core)
	}
	wy, err := startWyoming(c, core, log)
	if err != nil {
		return err
	}
	defer wy.close()

	// The HTTP API (Ollama, OpenAI, metrics, health): the listener opens
	// before the other front ends start, so a taken port fails at once.
	var web *httpapi.Server
	var webLn net.Listener
	if c.HTTP.Addr != "" {
		hc, err := c.httpConfig(core, eng, models.New(c.modelsDir()), loadTime, log)
		if err != nil {
			return err
		}
		if web, err = httpapi.New(hc); err != nil {
			return err
		}
		web.Check("storage", true, storageCheck(c.DataDir))
		mountPage(web, c, core, log)
		if hooks.mountHTTP != nil {
			hooks.mountHTTP(web)
		}
		if webLn, err = net.Listen("tcp", c.HTTP.Addr); err != nil {
			return fmt.Errorf("http: %w (--http ADDR, or --http \"\" to turn the HTTP API off)", err)
		}
		defer webLn.Close()
	}

	// Buttons and LEDs. A board without the pins is not fatal: the error
	// says what is missing and the rest keeps serving.
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
			core.SetDegraded(appliance.PartGPIO, "the configured buttons and LEDs are unavailable on this board")
		case err != nil: // pins found but not all usable: not fatal either
			log.Warn("GPIO: "+strings.ReplaceAll(oneLine(err.Error()), "firmware: ", "")+"; serving on", "buttons_found", d.Buttons())
			core.SetDegraded(appliance.PartGPIO, fmt.Sprintf("some configured pins are unusable (buttons working: %s)", strings.Join(d.Buttons(), ", ")))
		}
		dev = d
		defer dev.LEDs().Follow(core)() // every generation, whichever front end asked
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
	var triggers *firmware.Triggers
	tc := firmware.TriggersConfig{Core: core, Logger: log.With("component", "triggers")}
	if dev != nil {
		tc.LEDs = dev.LEDs()
	}
	if c.Voice.Speech != nil {
		if tc.Speaker, err = voice.NewSpeaker(*c.Voice.Speech, log.With("component", "speech")); err != nil {
			return err
		}
	}
	var svc *mqtt.Service
	switch {
	case broker == "" && (wy != nil || web != nil):
		log.Info("no MQTT broker configured (--broker or [mqtt] broker): MQTT is off", "http", c.HTTP.Addr, "wyoming", c.Wyoming.Addr)
	case broker == "":
		log.Warn("no MQTT broker configured (--broker or [mqtt] broker), no HTTP API and no Wyoming: serving nothing over the network until restarted with one (buttons and voice keep working)")
	default:
		mc := c.mqttConfig(broker, mqttButtons(c.GPIO, dev), log)
		mc.OnCancel = func() {
			if t := triggers; t != nil {
				t.StopOutputs() // Home Assistant's Cancel button also stops speech
			}
		}
		if svc, err = mqtt.New(mc, core); err != nil {
			return err
		}
		tc.OnPress = func(button string, kind firmware.Press) { svc.PublishPress(button, kind.String()) }
	}
	triggers = firmware.NewTriggers(tc)
	var ptt *voice.PushToTalk
	if c.Voice.Talk != nil {
		if ptt, err = voice.NewPushToTalk(*c.Voice.Talk, triggers.Voice(), log.With("component", "push-to-talk")); err != nil {
			return err
		}
		triggers.OnCancel(ptt.Cancel)
	}
	var bridge *hermes.Bridge
	var hopts *paho.ClientOptions
	if c.Hermes != nil {
		if bridge, err = hermes.New(c.Hermes.Config, hermes.CoreAnswerer(core), log); err != nil {
			return err
		}
		clientID := c.MQTT.ClientID
		if clientID == "" {
			clientID = mqtt.ClientID(c.Device)
		}
		if hopts, err = hermesOptions(c, c.Hermes, broker, clientID); err != nil {
			log.Error(err.Error() + "; the Hermes bridge is off")
			bridge = nil
		} else {
			triggers.OnCancel(bridge.Cancel)
		}
	}
	if c.Voice.Talk != nil && !slices.ContainsFunc(c.GPIO.Buttons, func(b firmware.Button) bool { return b.Talk }) {
		log.Warn("[voice.talk] is configured but no button has talk = true: push-to-talk is unused")
	}
	log.Info("device triggers", "on", describeDevice(c, dev))

	// The front ends stop with ctx; the core finishes (or cancels) the
	// running request within the shutdown grace; the MQTT front end
	// publishes the last answers, then offline.
	var wg sync.WaitGroup
	if tc.Speaker != nil {
		wg.Go(func() { tc.Speaker.Run(ctx) })
	}
	if dev != nil {
		var talker firmware.Talker
		if ptt != nil {
			talker = ptt
		}
		wg.Go(func() { dev.Run(ctx, triggers, talker) })
	}
	if bridge != nil {
		wg.Go(func() { bridge.Connect(ctx, hopts) })
	}
	mctx, stopMQTT := context.WithCancel(context.Background())
	defer stopMQTT()
	if svc != nil {
		wg.Go(func() { svc.Run(mctx) })
	}
	wy.run(ctx, mctx, &wg, log)
	if web != nil {
		wg.Go(func() {
			if err := web.Serve(ctx, webLn); err != nil {
				log.Error("HTTP API stopped", "err", err)
			}
		})
	}
	err = core.Run(ctx)
	stopMQTT()
	wg.Wait()
	if ptt != nil {
		ptt.Wait()
	}
	triggers.Wait()
	log.Info("stopped")
	return err
}
