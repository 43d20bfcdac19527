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
	"syscall"

	"github.com/spf13/pflag"
)

// version is set with -ldflags "-X main.version=..."; see versionString.
var version = ""

type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

type command struct {
	name, usage, summary string
	run                  func(ctx context.Context, e *env, args []string) error
}

var commands []command

func init() {
	commands = []command{
		{"run", "run -m MODEL [flags] PROMPT", "generate text from a prompt (PROMPT - reads stdin)", cmdRun},
		{"tokenize", "tokenize -m MODEL [--no-special] [--no-parse-special] TEXT", "print token ids as a JSON array", cmdTokenize},
		{"score", "score -m MODEL --tokens '[1,2,3]' [--top N]", "teacher-forced top log-probabilities per position", cmdScore},
		{"inspect", "inspect MODEL|-m MODEL [--json]", "describe a GGUF model file", cmdInspect},
		{"bench", "bench -m MODEL [-p 128] [-n 64] [-t 1,2] [--batch 1,2,4,8] [--json]", "measure prefill, decode and verification cost; speculation speed-ups", cmdBench},
		{"synth", synthUsage, "write a GGUF with random weights in the shape of a real model", cmdSynth},
		{"quantize", quantizeUsage, "convert an F32/F16/BF16 GGUF to Q4_0, Q8_0 or Q4_K_M", cmdQuantize},
		{"serve", serveUsage, "answer requests over MQTT (and Home Assistant) as an appliance", cmdServe},
		{"gpio", gpioUsage, "list the board's GPIO lines, watch buttons", cmdGPIO},
		{"sessions", "sessions list|show|delete|export [NAME]", "manage stored conversations", cmdSessions},
		{"pull", pullUsage, "download a model into the model store (Hugging Face or a URL)", cmdPull},
		{"models", modelsUsage, "list and remove stored models", cmdModels},
		{"init", initUsage, "write the sample configuration and the systemd unit", cmdInit},
		{"version", "version", "print the version", cmdVersion},
	}
}

// usageError marks errors that are the caller's (exit status 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], &env{os.Stdin, os.Stdout, os.Stderr})
	stop()
	os.Exit(code)
}

// Main dispatches a command line and returns the exit status: 0 on success,
// 1 on failure, 2 on a usage error. Every error is one line on stderr.
func Main(ctx context.Context, args []string, e *env) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(e.stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
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
			fmt.Fprintf(e.stderr, "geist %s: %s\n", c.name, oneLine(err.Error()))
			var ue usageError
			if errors.As(err, &ue) {
				return 2
			}
			return 1
		}
	}
	fmt.Fprintf(e.stderr, "geist: unknown command %q (run 'geist help')\n", args[0])
	return 2
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: geist COMMAND [flags]")
	fmt.Fprintln(w)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(e *env, name, usage string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: geist %s\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args, turning flag errors into usage errors. -h and --help
// print the command's usage and flags. A stored model's name given to -m
// becomes its file, for every command (models.go).
func parse(fs *pflag.FlagSet, args []string) error {
	usage := fs.Usage
	fs.Usage = func() {}
	addModelsDir(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			usage()
			return err
		}
		return usageError{err}
	}
	return resolveModelFlags(fs)
}
