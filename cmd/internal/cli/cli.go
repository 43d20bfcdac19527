// Package cli is what geist's commands share: the environment a command
// runs in, its flags (every command that takes a model takes a stored
// model's name), usage errors, the data directory and the version.
// cmd/geist dispatches to the commands; the daemon (cmd/internal/daemon)
// and the bench harness (cmd/internal/bench) are commands too.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/geisten/geist/cmd/internal/models"
)

// Env is where a command reads and writes.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Interrupts, when set, lets an interactive command take Ctrl-C
	// (SIGINT) over until release is called: fn runs for each one instead
	// of ending the command's context (the chat stops the answer being
	// generated and keeps the conversation). Nil in tests run in-process.
	Interrupts func(fn func()) (release func())
}

// Func runs a command with its arguments (the command's name removed).
type Func func(ctx context.Context, e *Env, args []string) error

// UsageError marks errors that are the caller's (exit status 2).
type UsageError struct{ Err error }

func (u UsageError) Error() string { return u.Err.Error() }
func (u UsageError) Unwrap() error { return u.Err }

// Usagef returns a UsageError.
func Usagef(format string, a ...any) error { return UsageError{fmt.Errorf(format, a...)} }

// OneLine folds s's whitespace, newlines included, into single spaces.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// NewFlags returns a flag set that reports errors instead of exiting. Its
// usage (-h, --help) goes to stdout: asked for, it is the output.
func NewFlags(e *Env, name, usage string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(e.Stdout)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(e.Stdout, "usage: geist %s\n", usage)
		fs.PrintDefaults()
	}
	return fs
}

// Parse parses args, turning flag errors into usage errors. -h and --help
// print the command's usage and flags. A stored model's name given to -m
// becomes its file, for every command.
func Parse(fs *pflag.FlagSet, args []string) error {
	usage := fs.Usage
	fs.Usage = func() {}
	addModelsDir(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			usage()
			return err
		}
		return UsageError{err}
	}
	return resolveModelFlags(fs)
}

// ModelsDirHelp describes --models-dir; the store lives in the data
// directory unless the flag moves it.
func ModelsDirHelp() string {
	return fmt.Sprintf("directory of stored models (default: DATA-DIR/models, %s)", filepath.Join(DefaultDataDir(), "models"))
}

// ModelStore is the store a command's flags point at: --models-dir, else
// the models directory of --data-dir (when the command has it), else of
// the default data directory.
func ModelStore(fs *pflag.FlagSet) *models.Store {
	if f := fs.Lookup("models-dir"); f != nil && f.Value.String() != "" {
		return models.New(f.Value.String())
	}
	if f := fs.Lookup("data-dir"); f != nil && f.Value.String() != "" {
		return models.New(filepath.Join(f.Value.String(), "models"))
	}
	return models.New(filepath.Join(DefaultDataDir(), "models"))
}

// ModelRefError is a model name that names no stored model (and no file).
type ModelRefError struct{ Err error }

func (m ModelRefError) Error() string { return m.Err.Error() }
func (m ModelRefError) Unwrap() error { return m.Err }

// modelFlagNames are the flags that take a model file, in every command.
var modelFlagNames = []string{"model", "draft-model", "embed-model"}

// addModelsDir gives every command that takes a model (-m) the
// --models-dir flag its model names are looked up in. Parse calls it
// before parsing.
func addModelsDir(fs *pflag.FlagSet) {
	if fs.Lookup("model") != nil && fs.Lookup("models-dir") == nil {
		fs.String("models-dir", "", ModelsDirHelp())
	}
}

// resolveModelFlags turns a stored model's name given to -m (or
// --draft-model) into its file, for every command: Parse calls it after
// parsing. A value that is a file stays as it is.
func resolveModelFlags(fs *pflag.FlagSet) error {
	for _, name := range modelFlagNames {
		f := fs.Lookup(name)
		if f == nil || f.Value.String() == "" {
			continue
		}
		p, err := ModelStore(fs).Resolve(f.Value.String())
		if err != nil {
			return ModelRefError{err}
		}
		if p != f.Value.String() {
			if err := f.Value.Set(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// serviceDir is the service's data directory: systemd's
// StateDirectory=geist, and the home of the geist system user that
// scripts/INSTALL.md creates.
const serviceDir = "/var/lib/geist"

// DefaultDataDir is the one data directory of every command (sessions.db,
// cache.db, models/, geist.sock): $STATE_DIRECTORY (set by systemd for the
// service), else $XDG_DATA_HOME/geist, else /var/lib/geist for the
// service's user (whose home it is, so that `sudo -u geist geist ...`
// finds what the service keeps), else ~/.local/share/geist, else
// /var/lib/geist.
func DefaultDataDir() string {
	if d := os.Getenv("STATE_DIRECTORY"); d != "" {
		// systemd may pass several, separated by colons: the first is ours.
		d, _, _ = strings.Cut(d, ":")
		return d
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "geist")
	}
	// The account database rather than $HOME, which sudo may keep.
	if u, err := user.Current(); err == nil && filepath.Clean(u.HomeDir) == serviceDir {
		return serviceDir
	}
	if h, err := os.UserHomeDir(); err == nil && h != "" && h != "/" {
		return filepath.Join(h, ".local", "share", "geist")
	}
	return serviceDir
}

// Version is the binary's version, set by the command from its
// -ldflags "-X main.version=..." ("" for a build without it).
var Version = ""

// VersionString is Version, or for a build without it the module's
// version and commit from the build information.
func VersionString() string {
	v := Version
	if v == "" {
		v = "devel"
		if bi, ok := debug.ReadBuildInfo(); ok {
			if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
				v = bi.Main.Version
			}
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && len(s.Value) >= 12 {
					v += "+" + s.Value[:12]
				}
			}
		}
	}
	return v
}

// Widen is the float64 a person means by a float32: 0.8, not
// 0.800000011920929 (as help texts and logs print it).
func Widen(f float32) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	return v
}

// RepackHelp is --repack-budget's help, the same for every command.
const RepackHelp = "memory the weights repacked for the kernels may take: auto (what is available less two reserves), all, none or a size (6GiB); the rest is read from the mapped file"
