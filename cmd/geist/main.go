// Command geist runs int4-quantized GGUF language models on small boards
// and answers requests from the command line, MQTT and GPIO buttons.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/geisten/geist/cmd/internal/bench"
	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/daemon"
	"github.com/geisten/geist/cmd/internal/models"
)

// version is set with -ldflags "-X main.version=..."; see cli.VersionString.
var version = ""

type command struct {
	name, usage, summary string
	run                  func(ctx context.Context, e *cli.Env, args []string) error
}

var commands []command

func init() {
	cli.Version = version
	commands = []command{
		{"run", "run -m MODEL [flags] PROMPT", "generate text from a prompt (PROMPT - reads stdin)", cmdRun},
		{"chat", chatUsage, "chat with a model interactively (or answer stdin's lines)", cmdChat},
		{"tokenize", "tokenize -m MODEL [--no-special] [--no-parse-special] TEXT", "print token ids as a JSON array", cmdTokenize},
		{"embed", embedUsage, "print the embeddings of texts as JSON (an embedding model: all-minilm, nomic-embed-text, ...)", cmdEmbed},
		{"score", "score -m MODEL --tokens '[1,2,3]' [--top N]", "teacher-forced top log-probabilities per position", cmdScore},
		{"inspect", "inspect MODEL|-m MODEL [--json]", "describe a GGUF model file", cmdInspect},
		{"bench", "bench -m MODEL [-p 128] [-n 64] [-t 1,2] [--batch 1,2,4,8] [--json]", "measure prefill, decode and verification cost; speculation speed-ups", bench.Command},
		{"synth", synthUsage, "write a GGUF with random weights in the shape of a real model", cmdSynth},
		{"quantize", quantizeUsage, "convert an F32/F16/BF16 GGUF to Q4_0, Q8_0 or Q4_K_M", cmdQuantize},
		{"serve", daemon.Usage, "run the appliance: answer over HTTP (Ollama and OpenAI APIs), MQTT, Wyoming and the device's buttons", daemon.Command},
		{"gpio", gpioUsage, "list the board's GPIO lines, watch buttons", cmdGPIO},
		{"sessions", "sessions list|show|delete|export [NAME]", "manage stored conversations", cmdSessions},
		{"pull", pullUsage, "download a model into the model store (Hugging Face or a URL)", cmdPull},
		{"models", modelsUsage, "list, remove and find models (catalog: the names geist pull takes; ps: what serve has loaded)", cmdModels},
		{"list", listUsage, "the stored models (geist models list)", modelsAlias("list", listUsage)},
		{"ps", psUsage, "the model geist serve has loaded (geist models ps)", modelsAlias("ps", psUsage)},
		{"rm", rmUsage, "remove stored models (geist models rm)", modelsAlias("rm", rmUsage)},
		{"init", initUsage, "write the sample configuration and the systemd unit", cmdInit},
		{"version", "version", "print the version", cmdVersion},
	}
}

func main() { os.Exit(mainProcess(os.Args[1:])) }

// mainProcess runs geist as a process: SIGTERM, and SIGINT unless a
// command took it over (env.Interrupts), end the command's context, so
// that it finishes or cancels its work within its grace (geist serve:
// shutdown_grace_s). A second one while it does exits at once, with
// 128 + the signal's number and a line on stderr: an operator who
// insists is not kept waiting.
func mainProcess(args []string) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	var mu sync.Mutex
	var handler func()
	go func() {
		for sig := range sigs {
			mu.Lock()
			h := handler
			mu.Unlock()
			if sig == os.Interrupt && h != nil {
				h()
				continue
			}
			if ctx.Err() != nil {
				os.Exit(exitAtOnce(os.Stderr, sig))
			}
			cancel()
		}
	}()
	interrupts := func(fn func()) func() {
		mu.Lock()
		handler = fn
		mu.Unlock()
		return func() {
			mu.Lock()
			handler = nil
			mu.Unlock()
		}
	}
	return Main(ctx, args, &cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Interrupts: interrupts})
}

// exitAtOnce says that a second signal ends geist without finishing and
// returns the exit status: 128 + the signal's number, as a shell reports
// a process the signal killed.
func exitAtOnce(w io.Writer, sig os.Signal) int {
	n := 15
	if s, ok := sig.(syscall.Signal); ok {
		n = int(s)
	}
	fmt.Fprintf(w, "geist: %s again while shutting down: exiting now without waiting for the running work (status %d)\n", unix.SignalName(syscall.Signal(n)), 128+n)
	return 128 + n
}

// Main dispatches a command line and returns the exit status: 0 on success
// (and for --help, printed on stdout), 1 on failure, 2 on a usage error
// (one line on stderr). Every error is one line on stderr.
func Main(ctx context.Context, args []string, e *cli.Env) int {
	switch {
	case len(args) == 0:
		printUsage(e.Stderr)
		return 2
	case args[0] == "-h" || args[0] == "--help" || args[0] == "help" && len(args) == 1:
		printUsage(e.Stdout)
		return 0
	case args[0] == "help":
		return Main(ctx, []string{args[1], "--help"}, e)
	case args[0] == "--version" || args[0] == "-V":
		args = []string{"version"}
	}
	for _, c := range commands {
		if c.name == args[0] {
			err := c.run(ctx, e, args[1:])
			if err == nil {
				return 0
			}
			if errors.Is(err, pflag.ErrHelp) {
				return 0
			}
			fmt.Fprintf(e.Stderr, "geist %s: %s\n", c.name, cli.OneLine(err.Error()))
			var ue cli.UsageError
			if errors.As(err, &ue) {
				return 2
			}
			return 1
		}
	}
	if strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(e.Stderr, "geist: unknown flag %q before the command (run 'geist help')\n", args[0])
		return 2
	}
	hint := ""
	if sim := models.Similar(args[0], commandNames(), 2); len(sim) > 0 {
		hint = fmt.Sprintf("; did you mean %s?", strings.Join(quoteAll(sim), " or "))
	}
	fmt.Fprintf(e.Stderr, "geist: unknown command %q%s (run 'geist help')\n", args[0], hint)
	return 2
}

const (
	listUsage = "list [--json] [--models-dir DIR]"
	psUsage   = "ps [--json] [--data-dir DIR]"
	rmUsage   = "rm NAME... [--models-dir DIR]"
)

func commandNames() []string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return append(names, "help")
}

func quoteAll(s []string) []string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = fmt.Sprintf("%q", x)
	}
	return q
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: geist COMMAND [flags]")
	fmt.Fprintln(w)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "geist COMMAND --help describes a command; geist --version prints the version.")
}
