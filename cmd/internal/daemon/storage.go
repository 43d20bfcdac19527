package daemon

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/storage"
)

// The storage-backed implementations of the core's stores: the core
// (engine/appliance) sits below the engine and imports no storage; the
// daemon opens sessions.db and cache.db and passes them to it as its
// interfaces (appliance.SessionStore, appliance.PromptCache).

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

// Storage is the appliance's state: the core's view of it
// (appliance.Storage: Sessions, Cache, Problem) and the files behind it.
// Without a directory, or when a file cannot be opened, the sessions live
// in memory and there is no prompt cache; OpenStorage logs why.
type Storage struct {
	appliance.Storage
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
	s := &Storage{Storage: appliance.Storage{Sessions: appliance.NewMemorySessions(o.MaxSessions, o.MaxHistory)}}
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
			s.Cache = promptCache{cache}
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

// Core is the core's view of the storage, for appliance.Config.Storage.
func (s *Storage) Core() *appliance.Storage { return &s.Storage }

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

// promptCache is cache.db as the core's appliance.PromptCache. Embedding
// keeps every method of *storage.Cache, so the engine still finds the
// optional ones it asks for (in-place restore, paused writes, drafting
// statistics, recent prefixes).
type promptCache struct{ *storage.Cache }

// Stats implements appliance.PromptCache.
func (c promptCache) Stats() appliance.CacheStats { return appliance.CacheStats(c.Cache.Stats()) }

// dbSessions is the durable appliance.SessionStore: conversations in
// sessions.db, so an unplugged appliance remembers them. Every Append
// has committed (and fsynced) when it returns. Its errors wrap the
// core's kinds (storeError) besides storage's.
type dbSessions struct {
	db         *storage.Sessions
	model      string
	maxHistory int
}

// Load implements SessionStore: it reads only the newest maxHistory
// turns (and at most appliance.MaxHistoryBytes of them), however long
// the conversation.
func (d *dbSessions) Load(id string) ([]appliance.Message, error) {
	if d.maxHistory <= 0 {
		return nil, nil
	}
	c, turns, err := d.db.Recent(id, d.maxHistory, appliance.MaxHistoryBytes)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, storeError(err)
	}
	return appliance.WithSystem(c.System, messagesOf(turns)), nil
}

// Turns implements SessionStore.
func (d *dbSessions) Turns(id string) ([]appliance.Message, error) {
	c, turns, err := d.db.Get(id)
	if err != nil {
		return nil, storeError(err)
	}
	return appliance.WithSystem(c.System, messagesOf(turns)), nil
}

// messagesOf is stored turns as messages.
func messagesOf(turns []storage.Turn) []appliance.Message {
	msgs := make([]appliance.Message, len(turns))
	for i, t := range turns {
		msgs[i] = appliance.Message{Role: t.Role, Content: t.Text, Tokens: t.Tokens}
	}
	return msgs
}

// Append implements SessionStore.
func (d *dbSessions) Append(id string, msgs ...appliance.Message) error {
	return storeError(d.append(id, msgs))
}

func (d *dbSessions) append(id string, msgs []appliance.Message) error {
	system, set, msgs := appliance.SplitSystem(msgs)
	info, err := d.db.Info(id)
	if errors.Is(err, storage.ErrNotFound) {
		info, err = d.db.Create(storage.Conversation{ID: id, Model: d.model, System: system})
		if errors.Is(err, storage.ErrExists) {
			info, err = d.db.Info(id)
		}
	}
	if err != nil {
		return err
	}
	if set && system != info.System {
		if err := d.db.SetMeta(id, info.Model, system); err != nil {
			return err
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	turns := make([]storage.Turn, len(msgs))
	for i, m := range msgs {
		turns[i] = storage.Turn{Role: m.Role, Text: m.Content, Tokens: m.Tokens}
	}
	_, err = d.db.Append(id, turns...)
	return err
}

// Forget implements SessionStore: it deletes the conversation.
func (d *dbSessions) Forget(id string) error {
	if err := d.db.Delete(id); err != nil && !errors.Is(err, storage.ErrNotFound) {
		return storeError(err)
	}
	return nil
}

// List implements SessionStore.
func (d *dbSessions) List() ([]appliance.SessionInfo, error) {
	list, err := d.db.List()
	if err != nil {
		return nil, storeError(err)
	}
	out := make([]appliance.SessionInfo, len(list))
	for i, c := range list {
		out[i] = appliance.SessionInfo{ID: c.ID, Messages: c.Turns, Updated: c.Updated}
	}
	slices.SortStableFunc(out, func(a, b appliance.SessionInfo) int { return b.Updated.Compare(a.Updated) })
	return out, nil
}

// Count returns the number of stored conversations (State.Sessions).
func (d *dbSessions) Count() int {
	n, _ := d.db.Usage()
	return n
}

// Counter implements SessionStore.
func (d *dbSessions) Counter(key string) (int, error) {
	v, ok, err := d.db.Setting(key)
	if err != nil || !ok {
		return 0, storeError(err)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, errors.New("appliance: setting " + key + " is not a number")
	}
	return n, nil
}

// Increment implements SessionStore.
func (d *dbSessions) Increment(key string) (int, error) {
	n, err := d.db.Increment(key)
	return int(n), storeError(err)
}

func (d *dbSessions) Close() error { return d.db.Close() }

// storeError marks an error of sessions.db with the core's kind of it
// (appliance.ErrStoreFull, ErrStoreWrite, ErrStoreCorrupt), so that the
// core says what went wrong in words safe for any client. The message is
// storage's, unchanged, and errors.Is still finds storage's errors.
func storeError(err error) error {
	var kind error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, storage.ErrDiskFull):
		kind = appliance.ErrStoreFull
	case errors.Is(err, storage.ErrWrite):
		kind = appliance.ErrStoreWrite
	case errors.Is(err, storage.ErrCorrupt):
		kind = appliance.ErrStoreCorrupt
	default:
		return err
	}
	return kindError{err, kind}
}

// kindError is err, which errors.Is also finds to be kind.
type kindError struct{ err, kind error }

func (e kindError) Error() string   { return e.err.Error() }
func (e kindError) Unwrap() []error { return []error{e.err, e.kind} }
