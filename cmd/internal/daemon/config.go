package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/mattn/go-shellwords"
	"github.com/spf13/pflag"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/sample"
	"github.com/geisten/geist/firmware"
	"github.com/geisten/geist/firmware/voice"
	"github.com/geisten/geist/mqtt"
	"github.com/geisten/geist/mqtt/hermes"
	"github.com/geisten/geist/storage"
)

// Config is geist serve's configuration: a TOML file (see
// scripts/geist.toml) whose every setting is also a flag; flags win.
type Config struct {
	Model     string  `toml:"model"`
	ModelsDir string  `toml:"models_dir"` // the model store (/api/pull, -m NAME); default DATA-DIR/models
	Device    string  `toml:"device"`
	DataDir   string  `toml:"data_dir"`
	Threads   int     `toml:"threads"`
	Ctx       ctxSize `toml:"ctx"` // "auto" (0) or tokens
	// Parallel is the most requests decoded together (continuous
	// batching): "auto" (up to 4, as many KV caches of ctx as the memory
	// holds) or 1 (one at a time, every drafter) to 16.
	Parallel  parallelN `toml:"parallel"`
	CacheSize int64     `toml:"cache_size"`    // prompt cache budget in bytes; 0: no cache.db
	KVType    string    `toml:"kv_type"`       // f16 or q8_0
	Repack    string    `toml:"repack_budget"` // engine.RepackBudget's spec
	// DraftModel drafts for speculative decoding: a smaller model with
	// the same vocabulary or a model-native drafter (a Gemma 4 assistant,
	// an EAGLE-3 head). Empty: the sidecar MODEL.draft.gguf beside a model
	// file, when there.
	DraftModel string `toml:"draft_model"`
	// EmbedModel is the embedding model the HTTP API's /api/embed,
	// /api/embeddings and /v1/embeddings use when a request names none
	// (or names it); requests may also name another stored embedding
	// model, loaded on demand.
	EmbedModel string `toml:"embed_model"`
	LogLevel   string `toml:"log_level"`
	LogFormat  string `toml:"log_format"`

	MQTT       mqttSection       `toml:"mqtt"`
	HTTP       httpSection       `toml:"http"`
	Limits     limitsSection     `toml:"limits"`
	Generation generationSection `toml:"generation"`
	Prompt     promptSection     `toml:"prompt"`
	Wyoming    wyomingSection    `toml:"wyoming"`
	Sessions   SessionsSection   `toml:"sessions"`

	// Device triggers (issue 7): buttons and LEDs, voice on the device,
	// the Hermes (Rhasspy) bridge. A nil part is off.
	GPIO   firmware.Config `toml:"gpio"`
	Voice  voice.Config    `toml:"voice"`
	Hermes *hermesSection  `toml:"hermes"`

	flags      *deviceFlags // the device-trigger flags, applied over the file
	modelErr   error        // the model named no file and no stored model
	check      bool         // serve --check
	configPath string       // --config
	// filePassword: the configuration file holds a password itself;
	// warnings are said once the log exists (readCredentials).
	filePassword bool
	warnings     []string
	notes        []string        // logged at info level at the start (OLLAMA_HOST)
	early        *earlyListeners // bound before the model loads; the front ends take them
}

// hermesSection is [hermes]: the bridge's settings and, for a broker of
// its own (Rhasspy's), the credentials to connect with.
type hermesSection struct {
	hermes.Config
	ClientID     string `toml:"client_id"` // default: geist's client id + "-hermes"
	Username     string `toml:"username"`
	Password     string `toml:"password"`
	PasswordFile string `toml:"password_file"` // default: $CREDENTIALS_DIRECTORY/hermes-password when there
	CAFile       string `toml:"ca_file"`       // for ssl:// with a private CA
	CertFile     string `toml:"cert_file"`     // client certificate, with key_file
	KeyFile      string `toml:"key_file"`
}

// deviceFlags are the device-trigger settings reachable as flags. The
// sections they belong to are optional (nil), so they are applied after
// parsing, only when given.
type deviceFlags struct {
	gpio                                 bool
	hermes                               bool
	hermesBroker, hermesMode, hermesLang string
	hermesPasswordFile, hermesCA         string
	hermesCert, hermesKey                string
	hermesSites                          []string
	speech, speechPlay                   string
	talkCapture, talkSTT, talkSession    string
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
	ReplyPrefix     string `toml:"reply_prefix"` // reply_to must start with it (geist/<device>/reply/)
}

// wyomingSection is [wyoming]: the Wyoming conversation service for
// Home Assistant (issue 13).
type wyomingSection struct {
	Addr      string   `toml:"addr"`      // host:port to listen on; "": off
	MDNS      bool     `toml:"mdns"`      // announce it over mDNS as _wyoming._tcp
	Languages []string `toml:"languages"` // languages advertised; empty: any
	// Model is the stored model that answers transcripts whose context
	// names none (context.model); "": the one serve started with.
	Model string `toml:"model"`
}

type limitsSection struct {
	Queue           int     `toml:"queue"`
	MaxPayload      int     `toml:"max_payload"`
	MaxPromptTokens int     `toml:"max_prompt_tokens"`
	MaxTokens       int     `toml:"max_tokens"`
	TTL             float64 `toml:"ttl_s"`
	ShutdownGrace   float64 `toml:"shutdown_grace_s"`
	// StallTimeout ends a generation that makes no progress (no token,
	// no prefill pass) for this long; 0: never.
	StallTimeout float64 `toml:"stall_timeout_s"`
}

// SessionsSection is [sessions]: the bounds of sessions.db (0: the
// defaults, storage.DefaultSessionLimits); the oldest go first.
type SessionsSection struct {
	MaxTurns         int   `toml:"max_turns"`         // turns kept per conversation (1000)
	MaxConversations int   `toml:"max_conversations"` // conversations kept (1000)
	MaxBytes         int64 `toml:"max_bytes"`         // bytes of turns kept (128 MiB)
}

func (s SessionsSection) Limits() storage.SessionLimits {
	return storage.SessionLimits{MaxTurns: s.MaxTurns, MaxConversations: s.MaxConversations, MaxBytes: s.MaxBytes}
}

// promptSection normalizes prompts for the prompt cache.
type promptSection struct {
	// StablePrefix moves Home Assistant 2025.4-2025.9's clock line
	// behind the tools (engine.Options.StablePrefix).
	StablePrefix bool `toml:"stable_prefix"`
}

type generationSection struct {
	Temperature float64 `toml:"temperature"`
	System      string  `toml:"system"`
	MaxHistory  int     `toml:"max_history"`
	MaxSessions int     `toml:"max_sessions"`
	// Think is the thinking policy per source (mqtt, http, wyoming,
	// button, voice, hermes, cli): think = { mqtt = false, voice = true }
	// over appliance.DefaultThink (the spoken sources do not think).
	Think map[string]bool `toml:"think"`
}

func DefaultConfig() Config {
	return Config{
		Device:    defaultDevice(),
		DataDir:   cli.DefaultDataDir(), // the same as every other command's
		CacheSize: 1 << 30,
		KVType:    "f16",
		Repack:    engine.RepackAuto,
		LogLevel:  "info",
		LogFormat: "text",
		MQTT: mqttSection{
			Discovery:       true,
			DiscoveryPrefix: "homeassistant",
			Pool:            true,
			EmbeddedAddr:    "127.0.0.1:1883",
		},
		HTTP: httpSection{Addr: "127.0.0.1:11434", MaxBody: 512 << 10},
		Limits: limitsSection{
			Queue:         8,
			MaxPayload:    64 << 10,
			TTL:           300,
			ShutdownGrace: 10,
			StallTimeout:  appliance.DefaultStallTimeout.Seconds(),
		},
		Generation: generationSection{
			// One default for run, chat and serve: llama.cpp's (and
			// Ollama's) 0.8, sample.DefaultParams.
			Temperature: cli.Widen(sample.DefaultParams().Temperature),
			MaxHistory:  20,
			MaxSessions: 64,
		},
		Wyoming: wyomingSection{MDNS: true},
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
func (c *Config) bind(fs *pflag.FlagSet) {
	fs.StringVarP(&c.Model, "model", "m", c.Model, "GGUF model file")
	fs.StringVar(&c.ModelsDir, "models-dir", c.ModelsDir, cli.ModelsDirHelp())
	fs.StringVar(&c.Device, "device", c.Device, "device name in topics and Home Assistant ids, unique per broker ([a-zA-Z0-9_-]; default: the host name)")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory of sessions.db, cache.db, models/ and geist.sock, as for every command (\"\": sessions in memory, no prompt cache)")
	fs.IntVarP(&c.Threads, "threads", "t", c.Threads, "threads for matrix products (0: all performance cores)")
	fs.Var(&c.Ctx, "ctx", "context in tokens of a request without num_ctx: auto (the model's trained context, capped by the memory available) or N")
	fs.Int64Var(&c.CacheSize, "cache-size", c.CacheSize, "prompt cache (data-dir/cache.db) budget in bytes (0: off)")
	fs.StringVar(&c.KVType, "kv-type", c.KVType, "KV cache type: f16 or q8_0")
	fs.Var(&c.Parallel, "parallel", "requests decoded together: auto (up to 4, as many KV caches of the context as the memory holds) or N (1: one at a time; batched requests draft with every drafter, each with its own drafter state); each answer is bit for bit the one it would be alone")
	fs.StringVar(&c.Repack, "repack-budget", c.Repack, cli.RepackHelp)
	fs.StringVar(&c.DraftModel, "draft-model", c.DraftModel, "GGUF that drafts for speculative decoding: a smaller model with the same vocabulary, a Gemma 4 assistant or an EAGLE-3 head (default: MODEL.draft.gguf beside the model file, when there)")
	fs.StringVar(&c.EmbedModel, "embed-model", c.EmbedModel, "embedding model (name or GGUF) for /api/embed, /api/embeddings and /v1/embeddings when a request names none: all-minilm, nomic-embed-text, bge-small, qwen3-embedding:0.6b, embeddinggemma")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "text or json")

	m := &c.MQTT
	fs.StringVar(&m.Broker, "broker", m.Broker, "MQTT broker URL: mqtt://host (port 1883), mqtts://host (TLS, 8883), ws://host:9001 (empty: MQTT off)")
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
	fs.StringVar(&m.ReplyPrefix, "reply-prefix", m.ReplyPrefix, "topics a request's reply_to may name start with this (default geist/<device>/reply/; geist/pool/reply/ too with --pool)")

	h := &c.HTTP
	fs.StringVar(&h.Addr, "http", h.Addr, "address of the Ollama/OpenAI HTTP API, metrics and health checks (\"\": off)")
	fs.StringSliceVar(&h.Allow, "http-allow", h.Allow, "networks (CIDR, comma-separated) besides loopback allowed to use the HTTP API, e.g. 192.168.1.0/24")
	fs.StringVar(&h.TokenFile, "http-token-file", h.TokenFile, "file holding a bearer token every non-loopback HTTP request must carry")
	fs.Int64Var(&h.MaxBody, "http-max-body", h.MaxBody, "largest HTTP request body in bytes (more: 413)")
	fs.StringSliceVar(&h.Hosts, "http-host", h.Hosts, "names besides IP addresses, localhost and this machine's host name (and NAME.local) that HTTP requests may address, e.g. geist.lan or *.home.arpa (others: 403, against DNS rebinding)")
	fs.StringSliceVar(&h.Origins, "http-origins", h.Origins, "origins of other web pages allowed to use the HTTP API from a browser, e.g. http://localhost:* (like OLLAMA_ORIGINS; pulls and the page's texts still need the token)")
	fs.StringVar(&h.Pull, "http-pull", h.Pull, "who may pull models over the HTTP API: loopback (this machine), on (every allowed client) or off")
	fs.Int64Var(&h.MaxModelSize, "max-model-size", h.MaxModelSize, "largest file in bytes /api/pull may write (0: the free space less 64 MiB)")
	fs.BoolVar(&h.PullAllowPrivate, "pull-allow-private", h.PullAllowPrivate, "let /api/pull fetch from loopback, link-local and private addresses (your own mirror); off, only public ones")
	fs.BoolVar(&h.PageTexts, "http-page-texts", h.PageTexts, "let the status page at / show the questions and answers of recent requests (when its reader asks)")

	l := &c.Limits
	fs.IntVar(&l.Queue, "queue", l.Queue, "requests that may wait behind the running one (more: busy)")
	fs.IntVar(&l.MaxPayload, "max-payload", l.MaxPayload, "largest request payload in bytes (more: too_long)")
	fs.IntVar(&l.MaxPromptTokens, "max-prompt-tokens", l.MaxPromptTokens, "most prompt tokens (0: the context less one)")
	fs.IntVar(&l.MaxTokens, "max-tokens", l.MaxTokens, "cap on tokens generated per request (0: none; an answer ends at its end, the context or its TTL)")
	fs.Float64Var(&l.TTL, "ttl", l.TTL, "default time to live of a request in seconds (queue and generation)")
	fs.Float64Var(&l.ShutdownGrace, "shutdown-grace", l.ShutdownGrace, "seconds the running request may finish at shutdown")
	fs.Float64Var(&l.StallTimeout, "stall-timeout", l.StallTimeout, "seconds a generation may make no progress (no token, no prefill pass) before it is ended (0: never)")

	g := &c.Generation
	fs.Float64Var(&g.Temperature, "temp", g.Temperature, "default sampling temperature")
	fs.StringVar(&g.System, "system", g.System, "default system message")
	fs.IntVar(&g.MaxHistory, "max-history", g.MaxHistory, "messages of a session's history kept")
	fs.IntVar(&g.MaxSessions, "max-sessions", g.MaxSessions, "sessions kept in memory")
	fs.BoolVar(&c.Prompt.StablePrefix, "stable-prefix", c.Prompt.StablePrefix, "move Home Assistant 2025.4-2025.9's clock line (\"Current time is HH:MM:SS. Today's date is YYYY-MM-DD.\") from the end of the system prompt to the end of the last user message, so the prompt cache holds the prefix (the model sees the time there)")

	w := &c.Wyoming
	fs.StringVar(&w.Addr, "wyoming", w.Addr, "serve Wyoming (Home Assistant's conversation agents) on this host:port, e.g. 0.0.0.0:10500 (empty: off)")
	fs.BoolVar(&w.MDNS, "wyoming-mdns", w.MDNS, "announce the Wyoming service over mDNS (_wyoming._tcp) so Home Assistant discovers it")
	fs.StringVar(&w.Model, "wyoming-model", w.Model, "the stored model that answers Wyoming's transcripts (default: the one serve started with; a transcript's context.model names another)")
	fs.StringSliceVar(&w.Languages, "wyoming-lang", w.Languages, "languages the Wyoming service offers answers in (repeat or comma-separate; default: any)")

	ss := &c.Sessions
	fs.IntVar(&ss.MaxTurns, "sessions-max-turns", ss.MaxTurns, "turns kept per conversation in sessions.db, the oldest go first (0: 1000)")
	fs.IntVar(&ss.MaxConversations, "sessions-max-conversations", ss.MaxConversations, "conversations kept in sessions.db, the least recently used go first (0: 1000)")
	fs.Int64Var(&ss.MaxBytes, "sessions-max-bytes", ss.MaxBytes, "bytes of conversation text kept in sessions.db (0: 128 MiB)")

	f := &deviceFlags{gpio: true, hermes: c.Hermes != nil}
	c.flags = f
	fs.BoolVar(&f.gpio, "gpio", f.gpio, "drive the buttons and LEDs of [gpio] (false: leave the pins alone)")
	fs.BoolVar(&f.hermes, "hermes", f.hermes, "run the Hermes (Rhasspy) bridge (false: off even when [hermes] is configured)")
	fs.StringVar(&f.hermesBroker, "hermes-broker", "", "Hermes broker URL, e.g. Rhasspy's tcp://host:12183 (default: geist's own broker; implies --hermes)")
	fs.StringVar(&f.hermesMode, "hermes-mode", "", "asr (answer every hermes/asr/textCaptured) or dialogue (intentNotRecognized); implies --hermes")
	fs.StringSliceVar(&f.hermesSites, "hermes-site", nil, "siteIds to answer (repeat or comma-separate; default: all); implies --hermes")
	fs.StringVar(&f.hermesLang, "hermes-lang", "", "language sent with hermes/tts/say; implies --hermes")
	fs.StringVar(&f.hermesPasswordFile, "hermes-password-file", "", "file holding the Hermes broker's password (with [hermes] username)")
	fs.StringVar(&f.hermesCA, "hermes-ca", "", "CA certificates (PEM) for an ssl:// Hermes broker")
	fs.StringVar(&f.hermesCert, "hermes-cert", "", "client certificate (PEM) for the Hermes broker")
	fs.StringVar(&f.hermesKey, "hermes-key", "", "client key (PEM) for the Hermes broker")
	fs.StringVar(&f.speech, "speech", "", "speak device answers with this command, split into words as a shell would (\"espeak-ng -v en-us\"; {text} or stdin)")
	fs.StringVar(&f.speechPlay, "speech-play", "", "pipe the speech command's output into this player (\"aplay -q -r 22050 -f S16_LE -t raw\")")
	fs.StringVar(&f.talkCapture, "talk-capture", "", "push-to-talk capture command, split as a shell would, recording into {file}")
	fs.StringVar(&f.talkSTT, "talk-stt", "", "push-to-talk speech-to-text command, split as a shell would, reading {file}, printing the transcript")
	fs.StringVar(&f.talkSession, "talk-session", "", "session of push-to-talk questions (default: the dashboard's)")
}

// splitCommand splits a command flag into words as a POSIX shell would
// (quotes and backslashes; no variables, globs or substitutions), so a
// path with a space can be quoted: --speech "piper -m '/opt/my voices/x.onnx'".
// {text} and {file} stay words of their own, replaced later.
func splitCommand(flag, s string) ([]string, error) {
	w, err := shellwords.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("--%s %q: %v", flag, s, err)
	}
	return w, nil
}

// applyDeviceFlags applies the device-trigger flags that were given
// (fs.Changed) over the configuration file's sections.
func (c *Config) applyDeviceFlags(fs *pflag.FlagSet) error {
	f := c.flags
	if f == nil {
		return nil
	}
	var errs []error
	split := func(flag, s string) []string {
		w, err := splitCommand(flag, s)
		errs = append(errs, err)
		return w
	}
	if fs.Changed("gpio") && !f.gpio {
		c.GPIO = firmware.Config{}
	}
	if fs.Changed("hermes-broker") || fs.Changed("hermes-mode") || fs.Changed("hermes-site") || fs.Changed("hermes-lang") ||
		fs.Changed("hermes") && f.hermes {
		if c.Hermes == nil {
			c.Hermes = &hermesSection{}
		}
	}
	if h := c.Hermes; h != nil {
		if fs.Changed("hermes-broker") {
			h.Broker = f.hermesBroker
		}
		if fs.Changed("hermes-mode") {
			h.Mode = f.hermesMode
		}
		if fs.Changed("hermes-site") {
			h.Sites = f.hermesSites
		}
		if fs.Changed("hermes-lang") {
			h.Lang = f.hermesLang
		}
		for _, x := range []struct {
			flag     string
			dst, val *string
		}{{"hermes-password-file", &h.PasswordFile, &f.hermesPasswordFile}, {"hermes-ca", &h.CAFile, &f.hermesCA},
			{"hermes-cert", &h.CertFile, &f.hermesCert}, {"hermes-key", &h.KeyFile, &f.hermesKey}} {
			if fs.Changed(x.flag) {
				*x.dst = *x.val
			}
		}
	}
	if fs.Changed("hermes") && !f.hermes {
		c.Hermes = nil
	}
	if fs.Changed("speech") || fs.Changed("speech-play") {
		if c.Voice.Speech == nil {
			c.Voice.Speech = &voice.SpeakerConfig{}
		}
		if fs.Changed("speech") {
			c.Voice.Speech.Command = split("speech", f.speech)
		}
		if fs.Changed("speech-play") {
			c.Voice.Speech.Play = split("speech-play", f.speechPlay)
		}
		if len(c.Voice.Speech.Command) == 0 {
			c.Voice.Speech = nil // --speech "" turns speech off
		}
	}
	if fs.Changed("talk-capture") || fs.Changed("talk-stt") || fs.Changed("talk-session") {
		if c.Voice.Talk == nil {
			c.Voice.Talk = &voice.TalkConfig{}
		}
		t := c.Voice.Talk
		if fs.Changed("talk-capture") {
			t.Capture = split("talk-capture", f.talkCapture)
		}
		if fs.Changed("talk-stt") {
			t.STT = split("talk-stt", f.talkSTT)
		}
		if fs.Changed("talk-session") {
			t.Session = f.talkSession
		}
	}
	return errors.Join(errs...)
}

// loadServeConfig reads a TOML file over c. Unknown keys are an error that
// names them, so a typo does not silently fall back to a default.
func loadServeConfig(path string, c *Config) error {
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
func (c *Config) validate() error {
	var errs []error
	if c.Model == "" {
		errs = append(errs, errors.New("no model given (-m MODEL or model = in the config)"))
	}
	for src := range c.Generation.Think {
		if !slices.Contains([]appliance.Source{appliance.SourceMQTT, appliance.SourceHTTP, appliance.SourceWyoming, appliance.SourceButton, appliance.SourceVoice, appliance.SourceHermes, appliance.SourceCLI}, appliance.Source(src)) {
			errs = append(errs, fmt.Errorf("generation: think names an unknown source %q (mqtt, http, wyoming, button, voice, hermes, cli)", src))
		}
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
	if l.Queue < 1 || l.MaxPayload < 1 || l.MaxTokens < 0 || l.MaxPromptTokens < 0 || !(l.TTL > 0) || l.ShutdownGrace < 0 || !(l.StallTimeout >= 0) {
		errs = append(errs, errors.New("limits: queue, max_payload and ttl_s must be positive; max_tokens, max_prompt_tokens, shutdown_grace_s and stall_timeout_s not negative"))
	}
	if ss := c.Sessions; ss.MaxTurns < 0 || ss.MaxConversations < 0 || ss.MaxBytes < 0 {
		errs = append(errs, errors.New("sessions: max_turns, max_conversations and max_bytes must not be negative"))
	}
	if g := c.Generation; g.Temperature < 0 || g.Temperature > 2 || g.MaxHistory < 0 || g.MaxSessions < 1 {
		errs = append(errs, errors.New("generation: temperature must be in [0, 2], max_history not negative, max_sessions positive"))
	}
	if err := c.HTTP.validate(); err != nil {
		errs = append(errs, err)
	}
	if w := c.Wyoming; w.Addr != "" {
		if _, port, err := net.SplitHostPort(w.Addr); err != nil || port == "" {
			errs = append(errs, fmt.Errorf("wyoming: addr %q: want host:port, e.g. 0.0.0.0:10500", w.Addr))
		}
	}
	if w := c.Wyoming; w.Model != "" {
		if err := appliance.CheckModelName("wyoming: model", w.Model); err != nil {
			errs = append(errs, errors.New(err.(*appliance.Error).Message))
		}
	}
	m := &c.MQTT
	if m.Password != "" && m.PasswordFile != "" {
		errs = append(errs, errors.New("give mqtt password or password_file, not both"))
	}
	// The broker and the embedded broker's rules are checked here, before
	// the model loads, rather than when MQTT starts.
	if m.Broker != "" {
		b, err := mqtt.NormalizeBroker(m.Broker)
		if err != nil {
			errs = append(errs, fmt.Errorf("mqtt broker: %s", strings.TrimPrefix(err.Error(), "mqtt: ")))
		} else {
			m.Broker = b
		}
	}
	if m.Embedded {
		if err := mqtt.CheckEmbedded(m.EmbeddedAddr, m.Username, m.Password+m.PasswordFile); err != nil {
			errs = append(errs, errors.New(strings.TrimPrefix(err.Error(), "mqtt: ")))
		}
	}
	if (m.CertFile == "") != (m.KeyFile == "") {
		errs = append(errs, errors.New("mqtt: a client certificate needs both cert_file and key_file"))
	}
	errs = append(errs, c.validateDevice()...)
	return errors.Join(errs...)
}

// validateDevice checks [gpio], [voice] and [hermes] without touching
// hardware or starting programs.
func (c *Config) validateDevice() []error {
	var errs []error
	if err := c.GPIO.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("gpio: %w", err))
	}
	talkButton := ""
	for _, b := range c.GPIO.Buttons {
		if b.Talk {
			talkButton = b.Name
		}
	}
	if t := c.Voice.Talk; t != nil {
		if len(t.Capture) == 0 || len(t.STT) == 0 {
			errs = append(errs, errors.New("voice.talk: push-to-talk needs both capture and stt commands"))
		}
		if t.Session != "" && !validSession(t.Session) {
			errs = append(errs, fmt.Errorf("voice.talk: session %q: no spaces, /, + or #", t.Session))
		}
	}
	if talkButton != "" && c.Voice.Talk == nil {
		errs = append(errs, fmt.Errorf("gpio: button %q is push-to-talk (talk = true) but [voice.talk] is not configured", talkButton))
	}
	if sp := c.Voice.Speech; sp != nil && len(sp.Command) == 0 {
		errs = append(errs, errors.New("voice.speech: no command"))
	}
	for _, b := range c.GPIO.Buttons {
		for _, a := range []*firmware.Action{b.Press, b.LongPress, b.DoublePress} {
			if a != nil && a.Session != "" && !validSession(a.Session) {
				errs = append(errs, fmt.Errorf("gpio: button %q: session %q: no spaces, /, + or #", b.Name, a.Session))
			}
		}
	}
	if h := c.Hermes; h != nil {
		switch h.Mode {
		case "", hermes.ModeASR, hermes.ModeDialogue:
		default:
			errs = append(errs, fmt.Errorf("hermes: mode %q: want %s or %s", h.Mode, hermes.ModeASR, hermes.ModeDialogue))
		}
		if h.SessionPrefix != "" && !validSession(h.SessionPrefix) {
			errs = append(errs, fmt.Errorf("hermes: session_prefix %q: no spaces, /, + or #", h.SessionPrefix))
		}
		if h.Broker != "" {
			b, err := mqtt.NormalizeBroker(h.Broker)
			if err != nil {
				errs = append(errs, fmt.Errorf("hermes broker: %s", strings.TrimPrefix(err.Error(), "mqtt: ")))
			} else {
				h.Broker = b
			}
		}
		if h.QoS != nil && *h.QoS > 2 {
			errs = append(errs, fmt.Errorf("hermes: qos %d: want 0, 1 or 2", *h.QoS))
		}
		if h.Password != "" && h.PasswordFile != "" {
			errs = append(errs, errors.New("hermes: give password or password_file, not both"))
		}
		if (h.CertFile == "") != (h.KeyFile == "") {
			errs = append(errs, errors.New("hermes: a client certificate needs both cert_file and key_file"))
		}
		if h.Broker == "" && (h.Username != "" || h.Password != "" || h.PasswordFile != "" || h.CAFile != "" || h.CertFile != "") {
			errs = append(errs, errors.New("hermes: username, password, ca_file and cert_file are for a broker of its own ([hermes] broker); without one the bridge uses [mqtt]'s"))
		}
	}
	return errs
}

// validSession accepts the session names the MQTT contract accepts.
func validSession(s string) bool {
	return len(s) <= 128 && !strings.ContainsAny(s, "/+# \t\r\n")
}

// DraftFile is the draft model serve loads: draft_model, or the sidecar
// MODEL.draft.gguf beside a model file ("": none).
func (c *Config) DraftFile() string {
	if c.DraftModel != "" || !strings.HasSuffix(c.Model, ".gguf") {
		return c.DraftModel
	}
	side := strings.TrimSuffix(c.Model, ".gguf") + ".draft.gguf"
	if st, err := os.Stat(side); err == nil && st.Mode().IsRegular() {
		return side
	}
	return ""
}
