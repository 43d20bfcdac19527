package appliance

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"

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
	Logger      *slog.Logger
}

// Storage is the appliance's state: conversations and the prompt cache.
// Without a directory, or when a file cannot be opened, the sessions live
// in memory and there is no prompt cache; OpenStorage logs why.
type Storage struct {
	Sessions SessionStore
	// Cache keeps KV states of prompt prefixes across restarts, for
	// engine.Options.Cache (nil: none).
	Cache   engine.PromptCache
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
	db, err := storage.OpenSessions(filepath.Join(dir, "sessions.db"), &storage.Options{Logger: log.With("component", "sessions")})
	if err != nil {
		log.Warn("sessions database unavailable, keeping sessions in memory", "err", err)
	} else {
		d := &dbSessions{db: db, model: o.Model, maxHistory: o.MaxHistory}
		s.Sessions = d
		s.closers = append(s.closers, d)
	}
	return s
}

// DB returns the sessions database when the sessions live in sessions.db
// (nil when they are in memory), for commands that read it while the
// core runs (the daemon's control socket).
func (s *Storage) DB() *storage.Sessions {
	if d, ok := s.Sessions.(*dbSessions); ok {
		return d.db
	}
	return nil
}

// CacheStats are the prompt cache's counters and sizes (State.Cache).
type CacheStats = storage.CacheStats

// CacheStats returns the prompt cache's counters, and false when there
// is no prompt cache.
func (s *Storage) CacheStats() (CacheStats, bool) {
	if c, ok := s.Cache.(*storage.Cache); ok && c != nil {
		return c.Stats(), true
	}
	return CacheStats{}, false
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
