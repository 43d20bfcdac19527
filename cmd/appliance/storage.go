package appliance

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/storage"
)

// StorageOptions configure OpenStorage; zero values take the defaults
// noted.
type StorageOptions struct {
	CacheSize   int64  // prompt cache (cache.db) budget in bytes; 0: no prompt cache
	MaxSessions int    // sessions kept when they live in memory (64)
	MaxHistory  int    // messages of a session's history kept and rendered (0: none)
	Model       string // recorded with new sessions
	// SessionLimits bound sessions.db (storage.DefaultSessionLimits for
	// zero fields): turns per conversation, conversations, bytes; the
	// oldest go first.
	SessionLimits storage.SessionLimits
	Logger        *slog.Logger
}

// Storage is the appliance's state: conversations and the prompt cache.
// Without a directory, or when a file cannot be opened, the sessions live
// in memory and there is no prompt cache; OpenStorage logs why.
type Storage struct {
	Sessions SessionStore
	// Cache keeps KV states of prompt prefixes across restarts, for
	// engine.Options.Cache (nil: none).
	Cache PromptCache
	// Problem says, in words safe for any client, why the sessions live
	// in memory although a data directory was given ("" when they do
	// not): the core reports it as PartStorage degraded.
	Problem string
	db      *storage.Sessions // nil: the sessions are in memory
	closers []io.Closer
}

// OpenStorage opens sessions.db and cache.db in dir (creating dir). It
// does not fail: what cannot be opened is replaced by memory (or nothing,
// for the cache) with a warning.
func OpenStorage(dir string, o StorageOptions) *Storage {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 64
	}
	o.MaxHistory = max(o.MaxHistory, 0)
	s := &Storage{Sessions: NewMemorySessions(o.MaxSessions, o.MaxHistory)}
	if dir == "" {
		log.Warn("no data directory: sessions and the prompt cache stay in memory (set --data-dir)")
		return s
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		log.Warn("data directory unusable: sessions and the prompt cache stay in memory", "err", err)
		s.Problem = "the data directory is unusable: conversations are kept in memory until a restart"
		return s
	}
	if o.CacheSize > 0 {
		cache, err := storage.OpenCache(filepath.Join(dir, "cache.db"), &storage.CacheOptions{MaxBytes: o.CacheSize, Logger: log.With("component", "cache")})
		if err != nil {
			log.Warn("prompt cache unavailable, continuing without it", "err", err)
		} else {
			s.Cache = cache
			s.closers = append(s.closers, cache)
		}
	}
	db, err := openSessions(filepath.Join(dir, "sessions.db"), o, log)
	if err != nil {
		log.Warn("sessions database unavailable, keeping sessions in memory until a restart", "err", err)
		s.Problem = "the sessions database cannot be opened: conversations are kept in memory until a restart"
		if errors.Is(err, storage.ErrReadOnly) {
			s.Problem = "the data directory is on a read-only file system: conversations are kept in memory until a restart"
		} else if errors.Is(err, storage.ErrDiskFull) {
			s.Problem = "the data directory's disk is full: conversations are kept in memory until a restart"
		} else if errors.Is(err, storage.ErrCorrupt) {
			s.Problem = "the sessions database is damaged beyond salvage: conversations are kept in memory until a restart"
		}
	} else {
		d := &dbSessions{db: db, model: o.Model, maxHistory: o.MaxHistory}
		s.Sessions, s.db = d, db
		s.closers = append(s.closers, d)
	}
	return s
}

// DB returns the sessions database when the sessions live in sessions.db
// (nil when they are in memory), for commands that read it while the
// core runs (the daemon's control socket).
func (s *Storage) DB() *storage.Sessions { return s.db }

// CacheStats are the prompt cache's counters and sizes (State.Cache).
type CacheStats = storage.CacheStats

// CacheStats returns the prompt cache's counters, and false when there
// is no prompt cache.
func (s *Storage) CacheStats() (CacheStats, bool) {
	if s.Cache == nil {
		return CacheStats{}, false
	}
	return s.Cache.Stats(), true
}

// PromptCache is the prompt cache as the core uses it (*storage.Cache):
// the engine's, deleting a conversation's entries, and its figures.
type PromptCache interface {
	engine.PromptCache
	DeletePrefix(model []byte, prefixes ...[]int32) (int, error)
	Stats() CacheStats
}

// openSessions opens sessions.db within the limits. A damaged file is
// salvaged first: copied aside, every readable conversation kept, what
// could not be read logged; then it is opened again.
func openSessions(path string, o StorageOptions, log *slog.Logger) (*storage.Sessions, error) {
	opts := &storage.Options{Logger: log.With("component", "sessions"), Limits: o.SessionLimits,
		OnEvict: func(ids []string) {
			if len(ids) == 0 {
				return
			}
			log.Info("oldest conversations removed to stay within the session limits", "conversations", len(ids), "first", ids[0])
		}}
	db, err := storage.OpenSessions(path, opts)
	if !errors.Is(err, storage.ErrCorrupt) {
		return db, err
	}
	log.Error("the sessions database is damaged: salvaging what is readable", "path", path, "err", err)
	rep, serr := storage.SalvageSessions(path, opts)
	if serr != nil {
		log.Error("salvaging the sessions database failed", "path", path, "err", serr)
		return nil, err
	}
	args := []any{"copy", rep.Aside, "conversations", rep.Conversations, "turns", rep.Turns, "settings", rep.Settings, "unreadable", len(rep.Problems)}
	for i, p := range rep.Problems[:min(len(rep.Problems), 5)] {
		args = append(args, "problem_"+strconv.Itoa(i+1), p)
	}
	log.Warn("sessions database salvaged: the damaged file is kept aside; 'geist sessions check' checks the new one", args...)
	return storage.OpenSessions(path, opts)
}

// Close closes the files (after the engine, which writes the cache, and
// the core, which writes the sessions, have stopped).
func (s *Storage) Close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i].Close())
	}
	s.closers = nil
	return errors.Join(errs...)
}
