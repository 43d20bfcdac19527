package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/daemon"
	"github.com/geisten/geist/storage"
)

// dataFlags are the storage flags of run.
type dataFlags struct {
	dir       string
	cacheSize int64
	session   string
	// sessionHelp describes --session: run's implies --chat, chat is one.
	sessionHelp string
}

func (d *dataFlags) register(fs interface {
	StringVar(*string, string, string, string)
	Int64Var(*int64, string, int64, string)
}) {
	fs.StringVar(&d.dir, "data-dir", cli.DefaultDataDir(), "directory of sessions.db and cache.db")
	fs.Int64Var(&d.cacheSize, "cache-size", 1<<30, "prompt cache budget in bytes (0: no prompt cache)")
	fs.StringVar(&d.session, "session", "", d.sessionHelp)
}

// openCache opens the prompt cache, or returns nil when it is disabled or
// cannot be opened (the run goes on without it and says why).
func (d *dataFlags) openCache(log *slog.Logger) *storage.Cache {
	if d.cacheSize <= 0 {
		return nil
	}
	if pid, ok := daemon.Running(d.dir); ok {
		// The daemon holds cache.db: go without it rather than wait for
		// a lock it never gives up.
		log.Debug("prompt cache skipped: geist serve holds it", "data_dir", d.dir, "pid", pid)
		return nil
	}
	if err := os.MkdirAll(d.dir, 0o750); err != nil {
		log.Warn("prompt cache disabled", "err", err)
		return nil
	}
	c, err := storage.OpenCache(filepath.Join(d.dir, "cache.db"), &storage.CacheOptions{MaxBytes: d.cacheSize, Logger: log})
	if err != nil {
		log.Warn("prompt cache disabled", "err", err)
		return nil
	}
	return c
}

// openStore opens the data directory's sessions.db (and prompt cache)
// for a conversation of session: the core's store, with its bounds (the
// newest 1,000 turns, maxHistoryBytes of text, the database's limits),
// as geist chat --session and serve use it. It refuses when geist serve
// holds the directory or sessions.db cannot be opened: the turn would
// not be saved.
func (d *dataFlags) openStore(model string, log *slog.Logger) (*daemon.Storage, error) {
	if err := d.serveHolds(); err != nil {
		return nil, err
	}
	store := daemon.OpenStorage(d.dir, daemon.StorageOptions{CacheSize: d.cacheSize, MaxSessions: 16, MaxHistory: 1000, Model: model, Logger: log})
	if store.DB() == nil {
		why := strings.TrimSuffix(store.Problem, ": conversations are kept in memory until a restart")
		if why == "" {
			why = "no data directory (--data-dir)"
		}
		store.Close()
		return nil, fmt.Errorf("--session %s cannot be saved: %s", d.session, why)
	}
	return store, nil
}

// serveHolds refuses a --session while geist serve holds the data
// directory: the session would not be saved.
func (d *dataFlags) serveHolds() error {
	if pid, ok := daemon.Running(d.dir); d.dir != "" && ok {
		return fmt.Errorf("%w on %s%s and holds its sessions: --session %s would not be saved; ask the running geist (HTTP or MQTT) or stop it first", daemon.ErrRunning, d.dir, pid, d.session)
	}
	return nil
}

func cmdSessions(_ context.Context, e *cli.Env, args []string) error {
	fs := cli.NewFlags(e, "sessions", "sessions list|show|delete|export|check|salvage [NAME] [--data-dir DIR] [--json]")
	dir := fs.String("data-dir", cli.DefaultDataDir(), "directory of sessions.db")
	asJSON := fs.Bool("json", false, "list and show as JSON (show --json prints what export does)")
	force := fs.Bool("force", false, "salvage even a file that checks sound")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return cli.Usagef("want a subcommand: list, show NAME, delete NAME, export NAME, check or salvage")
	}
	sub, rest := fs.Arg(0), fs.Args()[1:]
	switch sub {
	case "show", "delete", "export":
		if len(rest) != 1 {
			return cli.Usagef("sessions %s needs exactly one NAME", sub)
		}
	case "list", "check", "salvage":
		if len(rest) != 0 {
			return cli.Usagef("sessions %s takes no NAME", sub)
		}
	default:
		return cli.Usagef("unknown subcommand %q (want list, show, delete, export, check or salvage)", sub)
	}
	path := filepath.Join(*dir, "sessions.db")
	switch sub {
	case "check":
		return checkSessions(e, path)
	case "salvage":
		return salvageSessions(e, path, *force)
	}
	// A running geist serve holds sessions.db: ask it through its
	// control socket. Otherwise read the file (only delete writes; no
	// subcommand creates a database).
	var src daemon.SessionSource
	if d := daemon.Dial(*dir); d != nil {
		src = d
	} else {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("no sessions database at %s (geist chat --session, run --session or serve creates one)", path)
		}
		db, err := storage.OpenSessions(path, &storage.Options{ReadOnly: sub != "delete"})
		switch {
		case errors.Is(err, storage.ErrNoDatabase):
			return fmt.Errorf("no sessions database at %s (geist chat --session, run --session or serve creates one)", path)
		case errors.Is(err, storage.ErrLocked):
			return fmt.Errorf("%w; a geist chat or run --session is using it (a running geist serve would answer on %s)", err, filepath.Join(*dir, daemon.SocketName))
		case err != nil:
			return err
		}
		defer db.Close()
		src = daemon.FileSessions{DB: db}
	}
	switch sub {
	case "list":
		rows, err := src.List()
		if err != nil {
			return err
		}
		if *asJSON {
			if rows == nil {
				rows = []daemon.SessionRow{}
			}
			b, _ := json.Marshal(rows)
			fmt.Fprintf(e.Stdout, "%s\n", b)
			return nil
		}
		w := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tTURNS\tUPDATED\tMODEL")
		for _, c := range rows {
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", c.ID, c.Turns, c.Updated.Local().Format("2006-01-02 15:04"), filepath.Base(c.Model))
		}
		return w.Flush()
	case "show":
		var b bytes.Buffer
		if err := src.Export(&b, rest[0]); err != nil {
			return err
		}
		if *asJSON {
			_, err := e.Stdout.Write(b.Bytes())
			return err
		}
		var doc daemon.SessionDoc
		if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
			return fmt.Errorf("reading conversation %s: %w", rest[0], err)
		}
		fmt.Fprintf(e.Stdout, "session %s (%d turns, model %s)\n", doc.ID, len(doc.Turns), filepath.Base(doc.Model))
		if doc.System != "" {
			fmt.Fprintf(e.Stdout, "\n[system]\n%s\n", doc.System)
		}
		for _, t := range doc.Turns {
			fmt.Fprintf(e.Stdout, "\n[%s]\n%s\n", t.Role, t.Text)
		}
		return nil
	case "delete":
		return src.Delete(rest[0])
	default:
		return src.Export(e.Stdout, rest[0])
	}
}

// checkSessions reports whether sessions.db is sound (exit status 0) or
// damaged, missing or held by a running geist (1), changing nothing.
func checkSessions(e *cli.Env, path string) error {
	err := storage.CheckSessions(path)
	switch {
	case err == nil:
		db, err := storage.OpenSessions(path, &storage.Options{ReadOnly: true})
		if err != nil {
			return err
		}
		n, bytes := db.Usage()
		db.Close()
		fmt.Fprintf(e.Stdout, "%s: sound (%d conversations, %d bytes stored)\n", path, n, bytes)
		return nil
	case errors.Is(err, storage.ErrNoDatabase):
		return fmt.Errorf("no sessions database at %s", path)
	case errors.Is(err, storage.ErrCorrupt):
		fmt.Fprintf(e.Stdout, "%s: DAMAGED\n", path)
		return fmt.Errorf("%w; 'geist sessions salvage --data-dir %s' copies it aside and keeps every readable conversation", err, filepath.Dir(path))
	}
	return err
}

// salvageSessions rebuilds a damaged sessions.db from what is readable,
// after copying it aside.
func salvageSessions(e *cli.Env, path string, force bool) error {
	err := storage.CheckSessions(path)
	switch {
	case errors.Is(err, storage.ErrNoDatabase):
		return fmt.Errorf("no sessions database at %s", path)
	case errors.Is(err, storage.ErrLocked):
		return fmt.Errorf("%w: stop geist serve before salvaging", err)
	case err == nil && !force:
		fmt.Fprintf(e.Stdout, "%s: sound; nothing to salvage (--force salvages anyway)\n", path)
		return nil
	case err != nil && !errors.Is(err, storage.ErrCorrupt) && !force:
		return err
	}
	rep, err := storage.SalvageSessions(path, nil)
	if err != nil {
		if rep.Aside != "" {
			return fmt.Errorf("salvage failed (the damaged file is copied to %s): %w", rep.Aside, err)
		}
		return err
	}
	fmt.Fprintf(e.Stdout, "copied the damaged file to %s\n", rep.Aside)
	fmt.Fprintf(e.Stdout, "kept %d conversations, %d turns, %d settings in %s\n", rep.Conversations, rep.Turns, rep.Settings, path)
	if len(rep.Problems) > 0 {
		fmt.Fprintf(e.Stdout, "could not read (%d shown):\n", len(rep.Problems))
		for _, p := range rep.Problems {
			fmt.Fprintf(e.Stdout, "  %s\n", p)
		}
	}
	return nil
}
