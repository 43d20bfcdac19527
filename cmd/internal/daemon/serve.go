package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/httpapi"
	"github.com/geisten/geist/cmd/internal/models"
	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/firmware"
	"github.com/geisten/geist/mqtt"
)

const Usage = "serve [--config FILE] [-m MODEL] [--broker URL] [--device NAME] [--data-dir DIR] [flags]"

// ParseConfig reads --config, the file and then the flags (which win).
func ParseConfig(e *cli.Env, args []string) (Config, error) {
	// First pass: find --config (and reject bad flags, print help).
	probe := DefaultConfig()
	fs := cli.NewFlags(e, "serve", Usage)
	configPath := fs.String("config", "", "TOML configuration file (flags override it)")
	check := fs.Bool("check", false, "check the configuration, the model file, the data directory, the broker, the GPIO pins, the voice commands and the listening addresses, print one line each, and exit (1 if one fails) without serving")
	probe.bind(fs)
	var me cli.ModelRefError
	if err := cli.Parse(fs, args); err != nil && !errors.As(err, &me) {
		return probe, err // parse printed the usage for --help
	}
	if fs.NArg() > 0 {
		return probe, cli.Usagef("unexpected arguments %q", fs.Args())
	}
	c := DefaultConfig()
	c.check, c.configPath = *check, *configPath
	if *configPath != "" {
		if err := loadServeConfig(*configPath, &c); err != nil {
			return c, cli.UsageError{Err: configError{err}}
		}
		c.filePassword = c.MQTT.Password != "" || c.Hermes != nil && c.Hermes.Password != ""
	}
	// Second pass: the flags over the file.
	fs2 := cli.NewFlags(e, "serve", Usage)
	fs2.String("config", "", "")
	fs2.Bool("check", false, "")
	c.bind(fs2)
	if err := cli.Parse(fs2, args); err != nil {
		// A model name the store does not have is reported with the other
		// checks (serve --check) and before anything loads.
		var me cli.ModelRefError
		if !errors.As(err, &me) {
			return c, err
		}
		c.modelErr = me.Err
	}
	if err := c.applyDeviceFlags(fs2); err != nil {
		return c, cli.UsageError{Err: configError{err}}
	}
	if h := os.Getenv("OLLAMA_HOST"); h != "" && !fs2.Changed("http") {
		// As Ollama: OLLAMA_HOST is where the API listens (--http wins).
		addr, err := OllamaHost(h)
		if err != nil {
			return c, cli.UsageError{Err: configError{err}}
		}
		c.HTTP.Addr = addr
		c.notes = append(c.notes, "the HTTP API listens on "+addr+", from OLLAMA_HOST (--http overrides it)")
	}
	if err := c.validate(); err != nil {
		return c, cli.UsageError{Err: configError{err}}
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
func newLogger(w io.Writer, c *Config, lv *slog.LevelVar) *slog.Logger {
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
func (c *Config) coreConfig(eng appliance.Engine, sessions appliance.SessionStore, log *slog.Logger) appliance.Config {
	temp := c.Generation.Temperature
	return appliance.Config{
		Engine: eng, Sessions: sessions,
		Limits: appliance.Limits{
			Queue:           c.Limits.Queue,
			MaxTokens:       c.Limits.MaxTokens,
			MaxPromptTokens: c.Limits.MaxPromptTokens,
			DefaultTTL:      seconds(c.Limits.TTL),
			StallTimeout:    stallTimeout(c.Limits.StallTimeout),
		},
		System:        c.Generation.System,
		Defaults:      appliance.Options{Temperature: &temp},
		ShutdownGrace: max(seconds(c.Limits.ShutdownGrace), time.Millisecond),
		Model:         ModelName(c.Model),
		Version:       cli.VersionString(),
		Logger:        log,
		RecentText:    c.HTTP.PageTexts && c.HTTP.Addr != "",
		Think:         c.Generation.think(),
	}
}

// think is [generation] think as the core's policy.
func (g *generationSection) think() map[appliance.Source]bool {
	out := make(map[appliance.Source]bool, len(g.Think))
	for src, on := range g.Think {
		out[appliance.Source(src)] = on
	}
	return out
}

// mqttConfig turns the serve configuration into the MQTT front end's.
func (c *Config) mqttConfig(broker string, buttons []mqtt.Button, log *slog.Logger) mqtt.Config {
	m := c.MQTT
	return mqtt.Config{
		Broker: broker, Username: m.Username, Password: m.Password,
		CAFile: m.CAFile, CertFile: m.CertFile, KeyFile: m.KeyFile, ClientID: m.ClientID,
		Device: c.Device, Discovery: m.Discovery, DiscoveryPrefix: m.DiscoveryPrefix, Pool: m.Pool,
		Version: cli.VersionString(), Model: ModelName(c.Model), Buttons: buttons,
		MaxPayload:    c.Limits.MaxPayload,
		ReplyPrefix:   m.ReplyPrefix,
		ShutdownGrace: max(seconds(c.Limits.ShutdownGrace), time.Millisecond),
		Logger:        log,
	}
}

// ModelName is the model file's name without directory and .gguf.
func ModelName(path string) string { return strings.TrimSuffix(filepath.Base(path), ".gguf") }

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// stallTimeout is stall_timeout_s as the core's: 0 is never (-1).
func stallTimeout(s float64) time.Duration {
	if s == 0 {
		return -1
	}
	return max(seconds(s), time.Millisecond)
}

func Command(ctx context.Context, e *cli.Env, args []string) error {
	c, err := ParseConfig(e, args)
	var ce configError
	if err != nil && c.check && errors.As(err, &ce) {
		printConfigFailure(e.Stdout, ce.err)
		return errors.New("the configuration failed its check")
	}
	if err != nil {
		return err
	}
	if c.check {
		return serveCheck(e, &c, c.configPath)
	}
	lv := new(slog.LevelVar)
	log := newLogger(e.Stderr, &c, lv)
	watchHangups(ctx, args, &c, lv, log)
	return Run(ctx, &c, log, Hooks{WrapEngine: TestEngine})
}

// TestEngine, nil but in the fault suite's geist processes
// (TestHelperGeist), slows the engine of geist serve down.
var TestEngine func(appliance.Engine) appliance.Engine

// Hooks let tests replace the hardware and slow the model down; the
// zero value is production.
type Hooks struct {
	// openGPIO opens the buttons and LEDs (firmware.Open when nil).
	OpenGPIO func(firmware.Config, *slog.Logger) (*firmware.Device, error)
	// wrapEngine wraps the engine the core runs (nothing when nil).
	WrapEngine func(appliance.Engine) appliance.Engine
	// mountHTTP, if set, sees the HTTP server before it serves (tests
	// learn its address; other front ends mount their handlers here).
	MountHTTP func(*httpapi.Server)
}

// Run runs the daemon until ctx ends: the appliance core over the
// engine, and the front ends around it (MQTT, buttons and LEDs, voice,
// Hermes), each talking to the core and to nothing else.
func Run(ctx context.Context, c *Config, log *slog.Logger, hooks Hooks) error {
	if c.modelErr != nil {
		return c.modelErr
	}
	for _, w := range c.warnings {
		log.Warn(w)
	}
	for _, n := range c.notes {
		log.Info(n)
	}
	if c.DataDir != "" {
		if err := os.MkdirAll(c.DataDir, 0o750); err != nil {
			return dataDirError(c.DataDir, err)
		}
		release, err := LockDataDir(c.DataDir)
		if err != nil {
			return err
		}
		defer release()
	}
	start := time.Now()
	store := OpenStorage(c.DataDir, StorageOptions{CacheSize: c.CacheSize, MaxSessions: c.Generation.MaxSessions,
		MaxHistory: c.Generation.MaxHistory, Model: c.Model, SessionLimits: c.Sessions.Limits(), Logger: log})
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
	// The listeners first: a taken port fails now, not after the load.
	early, err := bindEarly(c, log)
	if err != nil {
		return err
	}
	c.early = early
	defer early.close() // what no front end took
	draft := c.DraftFile()
	opt := engine.Options{Threads: c.Threads, Ctx: int(c.Ctx), Parallel: c.Parallel.engine(), MemInfo: os.Getenv("GEIST_MEMINFO"), KVType: c.KVType, RepackBudget: c.Repack, DraftModel: draft, Cache: store.Cache, StablePrefix: c.Prompt.StablePrefix, Logger: log.With("component", "engine"), OnLoadProgress: loadLog(log, c.Model)}
	eng, err := engine.Load(c.Model, opt)
	if err != nil {
		return err
	}
	// The first model unloads by keep_alive and loads again on demand.
	first := newFirstModel(eng, c.Model, opt, log)
	stuck := false
	defer func() {
		// A worker stuck in the engine (appliance.ErrStuck) may still
		// read the weights: the process ends without unmapping them.
		if !stuck {
			first.Close()
		}
	}()
	loadTime := time.Since(start)
	log.Info("model loaded", "model", c.Model, "ctx", eng.Ctx(), "max_ctx", eng.MaxCtx(), "parallel", eng.Parallel(), "context", eng.ContextChoice().String(), "kv_bytes", eng.State().KVBytes(), "repack", eng.Model().Repack.String(), "ms", loadTime.Milliseconds(),
		"version", cli.VersionString(), "device", c.Device, "data_dir", c.DataDir, "prompt_cache", store.Cache != nil, "draft_model", draft)
	// The prefix served last (the system prompt, Home Assistant's
	// instructions and tools) back in memory before the first request.
	if n, took := eng.Warm(); n > 0 {
		log.Info("prompt cache warmed", "tokens", n, "ms", took.Milliseconds())
	}
	var ae appliance.Engine = first
	if hooks.WrapEngine != nil {
		ae = hooks.WrapEngine(ae)
	}
	// The other stored models, loaded on demand by name for every front
	// end (HTTP, MQTT, Wyoming), with the prompt cache of the first.
	pool := newModelPool(c, models.New(c.modelsDir()), log)
	pool.cache, pool.storage = store.Cache, store.Core()
	first.room = pool.roomForFirst // a reload unloads idle pooled models it needs the memory of
	defer pool.Close()             // after the front ends and the core
	cc := c.coreConfig(ae, store.Sessions, log)
	cc.ModelLoad, cc.Storage, cc.ToolFormat, cc.ThinkMarks, cc.NoTools = loadTime, store.Core(), eng.Template().ToolFormat(), eng.Template().ThinkMarks(), appliance.NoTools(eng.Template())
	cc.Models = pool.router(c.Model)
	core, err := appliance.New(cc)
	if err != nil {
		return err
	}
	if store.Problem != "" {
		core.SetDegraded(appliance.PartStorage, store.Problem)
	}
	pool.group = appliance.NewGroup(core) // MQTT's state and the status page count every model's requests
	if ctl != nil {
		ctl.core.Store(core)
		st := Status{Model: ModelName(c.Model), Path: c.Model, Ctx: eng.Ctx(), MaxCtx: eng.MaxCtx(), Since: time.Now()}
		if fi, err := os.Stat(c.Model); err == nil {
			st.Size = fi.Size()
		}
		ctl.setStatus(st)
		if store.Cache != nil {
			ctl.shareCache(store.Cache, eng.ModelID(), c.Model, c.CacheSize, first.CheckSnapshot) // run and chat beside the daemon
		}
	}
	fronts, err := startFronts(c, core, serveModels{first: eng, unload: first, pool: pool}, loadTime, hooks, log)
	defer fronts.close()
	if err != nil {
		return err
	}

	// The front ends stop with ctx; the core finishes (or cancels) the
	// running request within the shutdown grace; then the front ends that
	// deliver answers (MQTT, Wyoming) publish the last ones and stop.
	drain, stopDrain := context.WithCancel(context.Background())
	defer stopDrain()
	var wg sync.WaitGroup
	for _, f := range fronts {
		f.run(ctx, drain, &wg)
	}
	err = core.Run(ctx)
	stuck = errors.Is(err, appliance.ErrStuck)
	stopDrain()
	wg.Wait()
	fronts.wait()
	log.Info("stopped")
	return err
}

// OllamaHost reads OLLAMA_HOST as Ollama does: [scheme://]HOST[:PORT] or
// :PORT, the host 127.0.0.1 and the port 11434 when left out.
func OllamaHost(v string) (string, error) {
	h := strings.TrimSpace(v)
	if i := strings.Index(h, "://"); i >= 0 {
		h = h[i+3:]
	}
	h = strings.TrimRight(h, "/")
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		host, port = strings.Trim(h, "[]"), "11434"
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 || strings.ContainsAny(host, "/ ") {
		return "", fmt.Errorf("OLLAMA_HOST %q is not HOST[:PORT] (e.g. 0.0.0.0:11434); unset it or give --http", v)
	}
	return net.JoinHostPort(host, port), nil
}
