package appliance

import (
	"errors"

	"github.com/geisten/geist/engine"
)

// Storage is the appliance's state as the core sees it: conversations
// and the prompt cache. The core opens no file: the daemon opens
// sessions.db and cache.db (cmd/internal/daemon.OpenStorage) and passes
// them in as these interfaces, so the core, below the engine, imports no
// storage. Without a data directory the sessions live in memory
// (MemorySessions) and there is no prompt cache.
type Storage struct {
	Sessions SessionStore
	// Cache keeps KV states of prompt prefixes across restarts, for
	// engine.Options.Cache (nil: none).
	Cache PromptCache
	// Problem says, in words safe for any client, why the sessions live
	// in memory although a data directory was given ("" when they do
	// not): the core reports it as PartStorage degraded.
	Problem string
}

// CacheStats are the prompt cache's counters and sizes (State.Cache).
// They are the fields of storage.CacheStats, field for field, so that
// the daemon's adapter converts one into the other.
type CacheStats struct {
	Entries     int64 // stored blobs (prefixes and drafting statistics)
	LiveBytes   int64 // estimated file bytes they occupy
	FileBytes   int64 // size of the cache file
	Budget      int64
	Hits        int64
	Misses      int64
	Evictions   int64
	Compactions int64
	Resets      int64 // damaged files moved aside
	Corrupt     int64 // damaged entries dropped
}

// CacheStats returns the prompt cache's counters, and false when there
// is no prompt cache.
func (s *Storage) CacheStats() (CacheStats, bool) {
	if s.Cache == nil {
		return CacheStats{}, false
	}
	return s.Cache.Stats(), true
}

// PromptCache is the prompt cache as the core uses it (the daemon's
// adapter of *storage.Cache): the engine's, deleting a conversation's
// entries, and its figures.
type PromptCache interface {
	engine.PromptCache
	DeletePrefix(model []byte, prefixes ...[]int32) (int, error)
	Stats() CacheStats
}

// What went wrong with a SessionStore, for the words the core says to a
// client (the store's own errors name files): a store's errors wrap one
// of these when they are of that kind (the daemon's adapter maps
// storage's errors to them).
var (
	ErrStoreFull    = errors.New("appliance: the session store's disk is full")
	ErrStoreWrite   = errors.New("appliance: the session store cannot be written")
	ErrStoreCorrupt = errors.New("appliance: the session store is damaged")
)

// storageProblem says what went wrong with a session store in words safe
// for any client: the error itself names files.
func storageProblem(err error) string {
	switch {
	case errors.Is(err, ErrStoreFull):
		return "the device's disk is full"
	case errors.Is(err, ErrStoreWrite):
		return "the device's storage cannot be written"
	case errors.Is(err, ErrStoreCorrupt):
		return "the sessions database is damaged"
	}
	return "a storage error (details in the device's log)"
}
