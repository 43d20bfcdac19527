// The session writer: every write of sessions.db goes through write, which
// keeps the index of sizes and enforces the SessionLimits in the same
// transaction.

package storage

import (
	"errors"
	"fmt"
	"maps"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
)

// SessionLimits bound what the sessions database holds. Writes past a
// limit evict, oldest first: the oldest turns of a conversation past
// MaxTurns, the least recently updated conversations past MaxConversations
// or MaxBytes.
type SessionLimits struct {
	// MaxTurns is the most turns one conversation keeps.
	MaxTurns int
	// MaxConversations is the most conversations the file keeps.
	MaxConversations int
	// MaxBytes bounds the bytes of all stored turns and metadata (an
	// estimate of their footprint in the file: the file itself is larger
	// by bbolt's free pages, and never shrinks below its high-water mark).
	MaxBytes int64
}

// DefaultSessionLimits suit a 4 GB board writing to an SD card. 1000 turns
// are 500 exchanges, several times what any context the board runs can
// take (older turns are never read again); 1000 conversations outnumber
// the ones a household keeps (Home Assistant starts a new one per voice
// session, and those are evicted first); 128 MiB hold some 60,000 turns of
// a typical 2 KiB (text plus token ids), keep bbolt's memory map small, and
// copy aside or salvage in seconds even at an SD card's 20 MB/s.
var DefaultSessionLimits = SessionLimits{MaxTurns: 1000, MaxConversations: 1000, MaxBytes: 128 << 20}

func (l SessionLimits) withDefaults() SessionLimits {
	if l.MaxTurns <= 0 {
		l.MaxTurns = DefaultSessionLimits.MaxTurns
	}
	if l.MaxConversations <= 0 {
		l.MaxConversations = DefaultSessionLimits.MaxConversations
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultSessionLimits.MaxBytes
	}
	return l
}

// ErrDiskFull reports a write that failed for want of space (or of quota):
// nothing of it was stored, the database is intact and stays usable, and
// the caller may still deliver what it was saving.
var ErrDiskFull = errors.New("storage: no space left to save")

// ErrWrite reports any other failed write (an I/O error): as with
// ErrDiskFull, nothing of it was stored.
var ErrWrite = errors.New("storage: save failed")

// writeErr classifies the error of a failed write transaction.
func writeErr(err error) error {
	switch {
	case err == nil, errors.Is(err, errDamaged), errors.Is(err, ErrNotFound), errors.Is(err, ErrExists), errors.Is(err, ErrClosed):
		return err
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT), errors.Is(err, syscall.EFBIG):
		return fmt.Errorf("%w: %v", ErrDiskFull, err)
	case errors.Is(err, syscall.EIO), errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%w: %v", ErrWrite, err)
	}
	return err
}

// convStat is what eviction needs of a conversation.
type convStat struct {
	updated time.Time
	bytes   int64
}

// convOverhead is the estimated footprint of a conversation besides its
// turns (its buckets and metadata record): a page, for its bucket holds
// a bucket (its turns) and so is never inlined; at 256 bytes, 1000 small
// conversations accounted as 0.7 MB made an 8 MiB file. turnOverhead is
// that of a turn besides its key and value. With them the file stays
// within twice MaxBytes (bbolt doubles a small file as it grows).
const (
	convOverhead = 4096
	turnOverhead = 16
)

func turnCost(v []byte) int64 { return 8 + int64(len(v)) + turnOverhead }

func statOf(id string, ci convInfo) convStat {
	return convStat{updated: ci.Updated, bytes: convOverhead + int64(len(id)+len(ci.Model)+len(ci.System)) + ci.Bytes}
}

// countTurns counts the turns of tb and their bytes (nil: none).
func countTurns(tb *bolt.Bucket) (n int, bytes int64) {
	if tb == nil {
		return 0, 0
	}
	_ = tb.ForEach(func(_, v []byte) error {
		n++
		bytes += turnCost(v)
		return nil
	})
	return n, bytes
}

// loadIndex reads every conversation's stat into s.idx.
func (s *Sessions) loadIndex() error {
	idx := map[string]convStat{}
	var total int64
	err := s.view(func(tx *bolt.Tx) error {
		convs := tx.Bucket(bktConvs)
		return convs.ForEachBucket(func(k []byte) error {
			ci, err := readConvInfo(convs.Bucket(k), string(k))
			if err != nil {
				return err
			}
			st := statOf(string(k), ci)
			idx[string(k)] = st
			total += st.bytes
			return nil
		})
	})
	if err != nil {
		return err
	}
	s.imu.Lock()
	s.idx, s.total = idx, total
	s.imu.Unlock()
	return nil
}

// writeState is a write transaction's copy of the index, installed when
// the transaction commits.
type writeState struct {
	idx     map[string]convStat
	total   int64
	evicted []string
	trimmed int
}

func (w *writeState) set(id string, ci convInfo) {
	st := statOf(id, ci)
	w.total += st.bytes - w.idx[id].bytes
	w.idx[id] = st
}

func (w *writeState) remove(id string) {
	w.total -= w.idx[id].bytes
	delete(w.idx, id)
}

// write runs fn in a write transaction with a copy of the index, installs
// the copy when the transaction commits, and reports evictions.
func (s *Sessions) write(fn func(tx *bolt.Tx, w *writeState) error) error {
	s.imu.Lock()
	w := &writeState{idx: maps.Clone(s.idx), total: s.total}
	s.imu.Unlock()
	err := s.update(func(tx *bolt.Tx) error { return fn(tx, w) })
	if err != nil {
		return err
	}
	s.imu.Lock()
	s.idx, s.total = w.idx, w.total
	s.imu.Unlock()
	if len(w.evicted) > 0 || w.trimmed > 0 {
		s.log.Info("storage: sessions over their limits: evicted the oldest", "conversations", len(w.evicted), "turns", w.trimmed,
			"max_conversations", s.lim.MaxConversations, "max_bytes", s.lim.MaxBytes, "max_turns", s.lim.MaxTurns)
	}
	if len(w.evicted) > 0 && s.onEvict != nil {
		s.onEvict(w.evicted)
	}
	return nil
}

// trimTurns deletes the oldest turns of b while over (given the updated
// info) holds, keeping at least keep turns, and updates ci.
func trimTurns(b *bolt.Bucket, ci *convInfo, keep int, over func(*convInfo) bool, w *writeState) error {
	tb := b.Bucket(bktTurns)
	c := tb.Cursor()
	for k, v := c.First(); k != nil && ci.Turns > keep && over(ci); k, v = c.First() {
		cost := turnCost(v)
		if err := c.Delete(); err != nil {
			return fmt.Errorf("storage: %w", err)
		}
		ci.Turns--
		ci.Bytes -= cost
		w.trimmed++
	}
	return nil
}

// enforce brings the file within the limits after a write to conversation
// keep (whose info is ci): the oldest other conversations go first; if
// keep alone is over the byte limit, its oldest turns go (never its last).
func (s *Sessions) enforce(tx *bolt.Tx, w *writeState, keep string, ci convInfo) error {
	convs := tx.Bucket(bktConvs)
	for len(w.idx) > s.lim.MaxConversations || w.total > s.lim.MaxBytes {
		oldest, found := "", false
		for id, st := range w.idx {
			if id == keep {
				continue
			}
			if !found || st.updated.Before(w.idx[oldest].updated) || st.updated.Equal(w.idx[oldest].updated) && id < oldest {
				oldest, found = id, true
			}
		}
		if !found {
			break
		}
		if err := convs.DeleteBucket([]byte(oldest)); err != nil {
			return fmt.Errorf("storage: evict %q: %w", oldest, err)
		}
		w.remove(oldest)
		w.evicted = append(w.evicted, oldest)
	}
	if keep == "" || w.total <= s.lim.MaxBytes {
		return nil
	}
	b := convs.Bucket([]byte(keep))
	base := w.total - w.idx[keep].bytes
	over := func(ci *convInfo) bool { return base+statOf(keep, *ci).bytes > s.lim.MaxBytes }
	if err := trimTurns(b, &ci, 1, over, w); err != nil {
		return err
	}
	c := Conversation{ID: keep, Model: ci.Model, System: ci.System, Created: ci.Created, Updated: ci.Updated}
	ci, err := writeInfo(b, c, &ci)
	if err != nil {
		return err
	}
	w.set(keep, ci)
	return nil
}

// migrateCounts stores every conversation's turn count and size in its
// info (schema 2 to 3).
func migrateCounts(tx *bolt.Tx) error {
	convs := tx.Bucket(bktConvs)
	if convs == nil {
		return errors.New("no conversations bucket")
	}
	return convs.ForEachBucket(func(id []byte) error {
		b := convs.Bucket(id)
		c, err := readInfo(b, string(id))
		if err != nil {
			return err
		}
		_, err = writeInfo(b, c, nil)
		return err
	})
}
