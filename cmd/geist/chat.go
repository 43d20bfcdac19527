package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/peterh/liner"
	"golang.org/x/term"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/daemon"
	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/sample"
)

const chatUsage = "chat -m MODEL [--session NAME] [--system TEXT] [--temp F] [-n N] [--verbose] [flags]"

// chatOptions configure an interactive chat (geist chat, geist run --chat
// without a prompt).
type chatOptions struct {
	mf      modelFlags
	df      dataFlags
	system  string
	opts    appliance.Options
	n       int // most tokens per answer; -1: up to the context
	verbose bool
}

// testChatEngine, when set (by tests), wraps the engine the chat's core
// runs, to slow it down.
var testChatEngine func(appliance.Engine) appliance.Engine

func cmdChat(ctx context.Context, e *cli.Env, args []string) error {
	fs := cli.NewFlags(e, "chat", chatUsage)
	var o chatOptions
	o.mf.register(fs)
	o.df.sessionHelp = "continue the conversation NAME, kept in DATA-DIR/sessions.db (default: a new one, not kept)"
	o.df.register(fs)
	def := sample.DefaultParams()
	temp := fs.Float64("temp", cli.Widen(def.Temperature), "temperature (0: greedy)")
	topK := fs.Int("top-k", def.TopK, "top-k sampling (0: off)")
	topP := fs.Float64("top-p", float64(def.TopP), "top-p (nucleus) sampling (1: off)")
	minP := fs.Float64("min-p", float64(def.MinP), "min-p sampling (0: off)")
	rep := fs.Float64("repeat-penalty", float64(def.RepeatPenalty), "repetition penalty (1: off)")
	seed := fs.Int64("seed", -1, "random seed (-1: random)")
	fs.IntVarP(&o.n, "n-predict", "n", -1, "most tokens per answer (-1: until the end of the answer or the context)")
	fs.StringVar(&o.system, "system", "", "system message (/system changes it)")
	fs.BoolVar(&o.verbose, "verbose", false, "print each answer's statistics (tokens, speed) on stderr")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("chat takes no PROMPT: it reads questions from the terminal or stdin (geist run -m MODEL PROMPT answers one)")
	}
	o.opts = appliance.Options{Temperature: temp, TopK: topK, TopP: topP, MinP: minP, RepeatPenalty: rep}
	if *seed >= 0 {
		s := uint64(*seed)
		o.opts.Seed = &s
	}
	return runChat(ctx, e, &o)
}

// chatFromRun is geist run --chat without a PROMPT: the chat, with run's
// settings.
func chatFromRun(ctx context.Context, e *cli.Env, mf modelFlags, df dataFlags, p sample.Params, seeded bool, system string, n int) error {
	temp, topK, topP, minP, rep := float64(p.Temperature), p.TopK, float64(p.TopP), float64(p.MinP), float64(p.RepeatPenalty)
	o := chatOptions{mf: mf, df: df, system: system, n: n,
		opts: appliance.Options{Temperature: &temp, TopK: &topK, TopP: &topP, MinP: &minP, RepeatPenalty: &rep}}
	if seeded {
		o.opts.Seed = &p.Seed
	}
	return runChat(ctx, e, &o)
}

// chatLoop is one interactive chat: the appliance core over the model (as
// geist serve runs it: the session's history fitted into the context,
// the prompt cache), questions from the terminal or stdin, answers
// streamed to stdout.
type chatLoop struct {
	e        *cli.Env
	core     *appliance.Core
	sessions *chatSessions
	session  string
	system   string
	verbose  bool
	terminal bool
	out      *bufio.Writer
}

func runChat(ctx context.Context, e *cli.Env, o *chatOptions) error {
	if o.n < -1 || o.n == 0 {
		return cli.Usagef("-n %d must be -1 or positive", o.n)
	}
	if o.df.session != "" {
		if err := appliance.CheckID("session", o.df.session); err != nil {
			return cli.UsageError{Err: err}
		}
		if err := o.df.serveHolds(); err != nil {
			return err // it holds sessions.db: this chat would store nothing
		}
	}
	if o.df.cacheSize < 0 {
		return cli.Usagef("--cache-size %d must not be negative", o.df.cacheSize)
	}
	log := slog.New(slog.NewTextHandler(e.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if o.mf.path == "" {
		return cli.Usagef("no model given (-m MODEL)")
	}
	if err := engine.CheckModelFile(o.mf.path); err != nil {
		return err
	}
	dir := o.df.dir
	pid, beside := daemon.Running(dir)
	storeLog := log
	if beside {
		dir = ""       // the daemon holds sessions.db and cache.db: the chat keeps its turns in memory, without waiting for their locks
		storeLog = nil // not "no data directory": there is one, the daemon's
		log.Info("geist serve runs on the data directory: this chat's turns stay in memory, its prompt cache is the daemon's", "data_dir", o.df.dir, "pid", pid)
	}
	store := daemon.OpenStorage(dir, daemon.StorageOptions{CacheSize: o.df.cacheSize, MaxSessions: 16,
		MaxHistory: 1000, Model: o.mf.path, Logger: storeLog})
	defer store.Close()
	o.mf.cache, o.mf.log = store.Cache, log
	if beside && o.df.cacheSize > 0 {
		// The daemon's prompt cache, through its control socket.
		if dc := daemon.DialCache(o.df.dir, pid, o.df.cacheSize, log); dc != nil {
			o.mf.cache = dc
		}
	}
	ll := newPromptLine(e.Stderr)
	o.mf.onLoad = ll.loading
	eng, err := o.mf.load()
	ll.clear()
	if err != nil {
		return err
	}
	defer eng.Close()
	var ae appliance.Engine = eng
	if testChatEngine != nil {
		ae = testChatEngine(ae)
	}
	maxTokens := o.n
	if maxTokens <= 0 {
		maxTokens = eng.Ctx()
	}
	cs := &chatSessions{mem: appliance.NewMemorySessions(1, 1000), db: store.Sessions, durable: store.DB() != nil, anon: appliance.NewID()}
	core, err := appliance.New(appliance.Config{Engine: ae, Sessions: cs, Logger: log,
		Limits:   appliance.Limits{Queue: 1, MaxTokens: maxTokens, DefaultTTL: -1},
		System:   o.system,
		Defaults: o.opts, Model: daemon.ModelName(o.mf.path), Version: cli.VersionString(), ToolFormat: eng.Template().ToolFormat(), ThinkMarks: eng.Template().ThinkMarks(), NoTools: appliance.NoTools(eng.Template())})
	if err != nil {
		return cli.UsageError{Err: err}
	}
	cctx, stop := context.WithCancel(context.Background())
	go core.Run(cctx)
	defer func() { stop(); <-core.Done() }()

	c := &chatLoop{e: e, core: core, sessions: cs, session: cs.anon, system: o.system, verbose: o.verbose, out: bufio.NewWriter(e.Stdout)}
	if o.df.session != "" {
		c.session = o.df.session
	}
	in, err := c.input(o.df.dir)
	if err != nil {
		return err
	}
	defer in.Close()
	if c.terminal {
		where := "not saved: /session NAME keeps it"
		if c.session != cs.anon {
			where = "session " + c.session
		}
		fmt.Fprintf(e.Stderr, "geist chat with %s (%s). /help for commands; Ctrl-C stops an answer, Ctrl-D or /bye leaves.\n", daemon.ModelName(o.mf.path), where)
	}
	for {
		text, err := in.read()
		switch {
		case errors.Is(err, io.EOF):
			if c.terminal {
				fmt.Fprintln(e.Stdout)
			}
			return nil
		case errors.Is(err, liner.ErrPromptAborted):
			if text == "" {
				fmt.Fprintln(e.Stderr, "Use Ctrl-D or /bye to leave.")
			}
			continue
		case err != nil:
			return err
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		if strings.HasPrefix(text, "/") {
			if c.command(text) {
				return nil
			}
			continue
		}
		if err := c.ask(ctx, text); err != nil {
			return err
		}
	}
}

// ask submits one question and streams its answer. Ctrl-C (SIGINT) stops
// the answer and keeps the chat; the main context ending (SIGTERM) ends
// the chat.
func (c *chatLoop) ask(ctx context.Context, text string) error {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	if c.e.Interrupts != nil {
		defer c.e.Interrupts(cancel)()
	}
	last := byte('\n')
	pl := newPromptLine(c.e.Stderr)
	defer pl.clear()
	sink := func(p appliance.Piece) {
		d := p.Content // the thinking is not printed
		if d == "" {
			return
		}
		pl.clear()
		last = d[len(d)-1]
		c.out.WriteString(d)
		c.out.Flush()
	}
	tk, err := c.core.Submit(actx, appliance.Request{Source: appliance.SourceCLI, Text: text, Session: c.session, System: c.system, OnPromptProgress: pl.update}, sink)
	if err != nil {
		fmt.Fprintf(c.e.Stderr, "error: %s\n", refusal(err))
		return nil
	}
	o := tk.Outcome()
	if last != '\n' {
		c.out.WriteByte('\n')
	}
	if c.terminal {
		c.out.WriteByte('\n')
	}
	c.out.Flush()
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case o.Err != nil && o.Err.Code == appliance.CodeCancelled:
		if c.terminal {
			fmt.Fprintln(c.e.Stderr, "(stopped; this answer is not kept in the conversation)")
		}
	case o.Err != nil:
		fmt.Fprintf(c.e.Stderr, "error: %s: %s\n", o.Err.Code, o.Err.Message)
	}
	if c.verbose {
		u := o.Usage
		if u.StopReason == "" && o.Err != nil {
			u.StopReason = string(o.Err.Code)
		}
		fmt.Fprintf(c.e.Stderr, "prompt %d tokens (%d cached, %d of them restored from the prompt cache, %d evaluated; %d history messages left out), answer %d tokens, %.1f tok/s, first token after %d ms, stop: %s\n",
			u.PromptTokens, u.CachedTokens, u.RestoredTokens, u.EvaluatedTokens(), u.DroppedTurns, u.GeneratedTokens, u.TokS, u.TTFT.Milliseconds(), u.StopReason)
	}
	return nil
}

const chatHelp = `Commands:
  /clear          forget the conversation so far
  /system TEXT    set the system message (/system alone shows it)
  /session NAME   continue the stored conversation NAME, or keep this one as NAME
  /session        show the conversation's name
  /bye            leave (so do Ctrl-D and /exit)
  /help           this help
Multi-line input: start and end it with """, or end lines with \.
Ctrl-C stops an answer being written; the chat goes on.
`

// command runs a slash command and reports whether the chat ends.
func (c *chatLoop) command(line string) bool {
	name, arg, _ := strings.Cut(strings.TrimSpace(line), " ")
	arg = strings.TrimSpace(arg)
	say := func(format string, a ...any) { fmt.Fprintf(c.e.Stderr, format+"\n", a...) }
	switch name {
	case "/bye", "/exit", "/quit":
		return true
	case "/help", "/?":
		fmt.Fprint(c.e.Stderr, chatHelp)
	case "/clear":
		c.core.NewConversation(c.session)
		if c.session == c.sessions.anon {
			say("Cleared the conversation.")
		} else {
			say("Cleared the conversation %s (its stored messages are deleted).", c.session)
		}
	case "/system":
		if arg == "" {
			if c.system == "" {
				say("No system message.")
			} else {
				say("System message: %s", c.system)
			}
			break
		}
		c.system = arg
		say("Set the system message.")
	case "/session":
		c.switchSession(arg, say)
	default:
		say("Unknown command %s: /help lists them.", name)
	}
	return false
}

func (c *chatLoop) switchSession(name string, say func(string, ...any)) {
	if name == "" {
		if c.session == c.sessions.anon {
			say("This conversation is not saved: /session NAME keeps it.")
		} else {
			say("Conversation %s.", c.session)
		}
		return
	}
	if err := appliance.CheckID("session", name); err != nil {
		say("%s", refusal(err))
		return
	}
	if !c.sessions.durable {
		say("Note: sessions.db is not open (held by geist serve, or no data directory): %s lives only as long as this chat.", name)
	}
	prev, _ := c.sessions.db.Load(name)
	switch {
	case len(prev) > 0:
		c.session = name
		say("Continuing the conversation %s (%d messages).", name, len(prev))
	case c.session == c.sessions.anon:
		msgs, err := c.sessions.mem.Load(c.session)
		if err == nil && len(msgs) > 0 {
			if err := c.sessions.db.Append(name, msgs...); err != nil {
				say("Could not keep the conversation as %s: %v", name, err)
				return
			}
			c.sessions.mem.Forget(c.session)
			c.session = name
			say("Keeping this conversation as %s.", name)
			return
		}
		c.session = name
		say("Started the conversation %s.", name)
	default:
		c.session = name
		say("Started the conversation %s.", name)
	}
}

// chatSessions keeps the unnamed conversation of a chat in memory and the
// named ones (--session, /session) in the data directory's store.
type chatSessions struct {
	mem     *appliance.MemorySessions
	db      appliance.SessionStore
	durable bool // db is sessions.db (else memory: nothing outlives the chat)
	anon    string
}

func (s *chatSessions) pick(id string) appliance.SessionStore {
	if id == s.anon {
		return s.mem
	}
	return s.db
}

func (s *chatSessions) Load(id string) ([]appliance.Message, error) { return s.pick(id).Load(id) }
func (s *chatSessions) Append(id string, m ...appliance.Message) error {
	return s.pick(id).Append(id, m...)
}
func (s *chatSessions) Turns(id string) ([]appliance.Message, error) { return s.pick(id).Turns(id) }
func (s *chatSessions) Forget(id string) error                       { return s.pick(id).Forget(id) }
func (s *chatSessions) List() ([]appliance.SessionInfo, error)       { return s.db.List() }
func (s *chatSessions) Count() int                                   { return s.db.Count() }
func (s *chatSessions) Counter(key string) (int, error)              { return s.db.Counter(key) }
func (s *chatSessions) Increment(key string) (int, error)            { return s.db.Increment(key) }

// chatInput reads questions: from a terminal with line editing and
// history, else line by line from stdin. Multi-line input is a block
// between """ lines, or lines ending with a backslash.
type chatInput struct {
	line    *liner.State // nil when stdin is not a terminal
	r       *bufio.Reader
	history string // the terminal's history file ("" : none)
}

// input returns the chat's reader: a line editor when stdin and stdout
// are the terminal.
func (c *chatLoop) input(dataDir string) (*chatInput, error) {
	f, ok := c.e.Stdin.(*os.File)
	o, ok2 := c.e.Stdout.(*os.File)
	if ok && ok2 && term.IsTerminal(int(f.Fd())) && term.IsTerminal(int(o.Fd())) && f == os.Stdin && o == os.Stdout {
		c.terminal = true
		in := &chatInput{line: liner.NewLiner()}
		in.line.SetCtrlCAborts(true)
		if dataDir != "" {
			in.history = filepath.Join(dataDir, "chat-history")
			if h, err := os.Open(in.history); err == nil {
				in.line.ReadHistory(h)
				h.Close()
			}
		}
		return in, nil
	}
	return &chatInput{r: bufio.NewReaderSize(c.e.Stdin, 64<<10)}, nil
}

// Close restores the terminal and saves the history.
func (in *chatInput) Close() error {
	if in.line == nil {
		return nil
	}
	if in.history != "" {
		if err := os.MkdirAll(filepath.Dir(in.history), 0o750); err == nil {
			if f, err := os.OpenFile(in.history, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err == nil {
				in.line.WriteHistory(f)
				f.Close()
			}
		}
	}
	return in.line.Close()
}

// maxChatInput bounds one question read from stdin.
const maxChatInput = 1 << 20

// readLine reads one line with prompt p (shown on a terminal only).
func (in *chatInput) readLine(p string) (string, error) {
	if in.line != nil {
		return in.line.Prompt(p)
	}
	var b strings.Builder
	for {
		chunk, isPrefix, err := in.r.ReadLine()
		b.Write(chunk)
		if b.Len() > maxChatInput {
			return "", fmt.Errorf("an input line is longer than %d bytes", maxChatInput)
		}
		if err != nil {
			if err == io.EOF && b.Len() > 0 {
				return b.String(), nil
			}
			return "", err
		}
		if !isPrefix {
			return b.String(), nil
		}
	}
}

// read returns the next question or command: one line, a """ block or
// lines continued with a trailing backslash. Ctrl-C while typing returns
// liner.ErrPromptAborted (with what was typed, if anything).
func (in *chatInput) read() (string, error) {
	first, err := in.readLine(">>> ")
	if err != nil {
		return first, err
	}
	var parts []string
	cont := first
	switch {
	case strings.HasPrefix(strings.TrimSpace(first), `"""`):
		body := strings.TrimPrefix(strings.TrimSpace(first), `"""`)
		if strings.HasSuffix(body, `"""`) {
			return strings.TrimSuffix(body, `"""`), nil
		}
		if body != "" {
			parts = append(parts, body)
		}
		for {
			l, err := in.readLine("... ")
			if errors.Is(err, io.EOF) {
				return strings.Join(parts, "\n"), nil
			}
			if err != nil {
				return "x", err // aborted: drop the block ("x": no hint)
			}
			if t := strings.TrimRight(l, " \t"); strings.HasSuffix(t, `"""`) {
				parts = append(parts, strings.TrimSuffix(t, `"""`))
				break
			}
			parts = append(parts, l)
			if size(parts) > maxChatInput {
				return "", fmt.Errorf("the input is longer than %d bytes", maxChatInput)
			}
		}
	case strings.HasSuffix(first, `\`):
		for strings.HasSuffix(cont, `\`) {
			parts = append(parts, strings.TrimSuffix(cont, `\`))
			l, err := in.readLine("... ")
			if errors.Is(err, io.EOF) {
				return strings.Join(parts, "\n"), nil
			}
			if err != nil {
				return "x", err
			}
			cont = l
			if size(parts) > maxChatInput {
				return "", fmt.Errorf("the input is longer than %d bytes", maxChatInput)
			}
		}
		parts = append(parts, cont)
	default:
		if in.line != nil && strings.TrimSpace(first) != "" {
			in.line.AppendHistory(first)
		}
		return first, nil
	}
	return strings.Join(parts, "\n"), nil
}

func size(parts []string) int {
	n := 0
	for _, p := range parts {
		n += len(p) + 1
	}
	return n
}

// refusal is what the core's refusal says to people: its message (the
// error itself when it is not the core's).
func refusal(err error) string {
	if e, ok := errors.AsType[*appliance.Error](err); ok {
		return e.Message
	}
	return err.Error()
}
