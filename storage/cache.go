package storage

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Prompt-cache layout:
//
//	meta/magic                         cacheMagic
//	models/<sha256(identity)>/identity the identity bytes, for inspection
//	models/<mk>/slots/<slot>           entry record (encodeEntry)
//	models/<mk>/atime/<slot>           stamp u64 | blob id u64 | cost u64
//	models/<mk>/lens/<n u32 BE>        number of stored prefixes of n tokens
//	chunks/<blob id u64>|<i u32>/d     blob bytes, ChunkSize per chunk
//	lru/<stamp u64>                    <mk>|<slot>, oldest stamp first
//	pending/<blob id u64>              blob whose chunks are being written
//
// A slot is 'p'|n u32|hash u64 for a stored prefix of n tokens and "n" for
// the drafting statistics. Stamps come from a counter (the lru bucket's
// sequence), so the eviction order is exact and independent of the clock.
// All integers are big-endian in keys and little-endian inside records.

const (
	// DefaultCacheBytes is the cache budget when CacheOptions.MaxBytes is 0.
	DefaultCacheBytes = 1 << 30
	// DefaultChunkSize is the chunk size when CacheOptions.ChunkSize is 0.
	DefaultChunkSize = 1 << 20

	cacheMagic = "geist-cache/1"
	entryMagic = "GKC1"

	// liveFraction of the budget is what eviction keeps the live data
	// under; the rest is room for bbolt's free pages and page rounding.
	liveFraction = 0.85
	// The file is compacted once it exceeds the budget.
	compactFraction = 1.0
	// txBytes bounds the chunk bytes written by one transaction, so a large
	// blob does not need a second copy of itself in bbolt's dirty pages.
	txBytes = 8 << 20
	// maxPrefixTokens bounds a stored prefix.
	maxPrefixTokens = 1 << 22
)

var (
	bktModels  = []byte("models")
	bktSlots   = []byte("slots")
	bktAtime   = []byte("atime")
	bktLens    = []byte("lens")
	bktChunks  = []byte("chunks")
	bktLRU     = []byte("lru")
	bktPending = []byte("pending")
	keyMagic   = []byte("magic")
	keyIdent   = []byte("identity")
	slotNgram  = []byte("n")
	keyData    = []byte("d")

	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// CacheOptions configures OpenCache.
type CacheOptions struct {
	// Timeout bounds the wait for a lock held by another process
	// (DefaultTimeout when zero).
	Timeout time.Duration
	// Logger receives cache misses caused by damage, evictions and
	// compactions; nil discards them.
	Logger *slog.Logger
	// MaxBytes is the budget for the cache file (DefaultCacheBytes when 0).
	MaxBytes int64
	// ChunkSize is the size of the pieces a blob is stored in
	// (DefaultChunkSize when 0).
	ChunkSize int
}

// CacheStats describes the cache.
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

// Cache is the disposable prompt cache: KV-state blobs keyed by a model
// identity and a token prefix, with a byte budget, least-recently-used
// eviction and compaction. Damage never surfaces as an error or wrong data
// from a lookup: it is a miss and a log line.
type Cache struct {
	path      string
	log       *slog.Logger
	timeout   time.Duration
	budget    int64
	chunk     int
	allocSize int
	txMax     int // chunk bytes per write transaction

	putMu sync.Mutex // serialises writers' multi-transaction work

	touchMu sync.Mutex
	touches []access // hits not yet in the LRU index

	mu       sync.RWMutex // guards db, gen and closed; held exclusively to swap the file
	db       *bolt.DB
	gen      uint64 // incremented when the file is replaced after damage
	closed   bool
	pageSize int

	// writes counts write transactions: a compaction that copied the
	// file while one ran outside putMu (a hit's record, a dropped entry)
	// throws its copy away.
	writes atomic.Int64
	// copied, when set (tests), runs when a compaction has copied the
	// file, before it swaps it in.
	copied func()

	live, entries                                           atomic.Int64
	hits, misses, evictions, compactions, resets, corrupted atomic.Int64
}

// OpenCache opens or creates the prompt cache at path. A file that is not a
// valid cache (garbage, truncated, failing bbolt's consistency check, or
// another format) is renamed to path+".broken" and replaced by an empty one.
// It fails with ErrLocked when another process holds the file.
func OpenCache(path string, opts *CacheOptions) (*Cache, error) {
	if opts == nil {
		opts = &CacheOptions{}
	}
	c := &Cache{path: path, log: opts.Logger, timeout: opts.Timeout, budget: opts.MaxBytes, chunk: opts.ChunkSize}
	if c.log == nil {
		c.log = discardLogger
	}
	if c.budget == 0 {
		c.budget = DefaultCacheBytes
	}
	if c.chunk == 0 {
		c.chunk = DefaultChunkSize
	}
	if c.chunk < 1024 || c.chunk > 64<<20 {
		return nil, fmt.Errorf("storage: cache chunk size %d out of range [1 KiB, 64 MiB]", c.chunk)
	}
	if c.budget < 4*int64(c.chunk) {
		return nil, fmt.Errorf("storage: cache budget %d smaller than four chunks of %d bytes", c.budget, c.chunk)
	}
	// bbolt grows the file by AllocSize beyond what it needs; keep that a
	// small fraction of the budget.
	c.allocSize = int(min(max(c.budget/64, 64<<10), 16<<20))
	// Between transactions a growing file can be compacted: a transaction
	// writes at most a 32nd of the budget.
	c.txMax = int(min(txBytes, max(c.budget/32, int64(c.chunk))))
	if err := c.openFile(); err != nil {
		return nil, err
	}
	c.putMu.Lock()
	defer c.putMu.Unlock()
	if err := c.enforceBudget(0); err != nil && !errors.Is(err, errDamaged) {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// openFile opens c.path, replacing it when damaged, and recovers from an
// interrupted writer. The caller holds c.mu or has not published c yet.
func (c *Cache) openFile() error {
	db, err := c.openChecked()
	if errors.Is(err, errDamaged) {
		if err = c.moveAside(err); err == nil {
			db, err = c.openChecked()
		}
	}
	if err != nil {
		return err
	}
	c.db = db
	c.pageSize = db.Info().PageSize
	// A compaction interrupted by a crash leaves its output behind.
	_ = os.Remove(c.path + ".compact")
	if err := c.recoverState(); err != nil {
		_ = guarded(db.Close)
		c.db = nil
		return err
	}
	return nil
}

// openChecked opens the file, verifies it and creates the layout.
func (c *Cache) openChecked() (*bolt.DB, error) {
	db, err := openBolt(c.path, c.timeout, bolt.FreelistMapType, false)
	if err != nil {
		return nil, err
	}
	db.AllocSize = c.allocSize
	if err := verify(db); err != nil {
		_ = guarded(db.Close)
		return nil, err
	}
	err = guarded(func() error {
		return db.Update(func(tx *bolt.Tx) error {
			meta := tx.Bucket(bktMeta)
			if meta == nil {
				empty := true
				_ = tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
				if !empty {
					return fmt.Errorf("%w: not a geist cache (no magic)", errDamaged)
				}
				m, err := tx.CreateBucket(bktMeta)
				if err != nil {
					return err
				}
				if err := m.Put(keyMagic, []byte(cacheMagic)); err != nil {
					return err
				}
			} else if got := meta.Get(keyMagic); string(got) != cacheMagic {
				return fmt.Errorf("%w: bad magic %q", errDamaged, got)
			}
			for _, name := range [][]byte{bktModels, bktChunks, bktLRU, bktPending} {
				if _, err := tx.CreateBucketIfNotExists(name); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		_ = guarded(db.Close)
		if !errors.Is(err, errDamaged) {
			err = fmt.Errorf("storage: cache %s: %w", c.path, err)
		}
		return nil, err
	}
	return db, nil
}

// moveAside renames a damaged file to path+".broken" (replacing an older
// one) so a fresh cache can be created.
func (c *Cache) moveAside(cause error) error {
	aside := c.path + ".broken"
	if err := os.Rename(c.path, aside); err != nil {
		return fmt.Errorf("storage: move damaged cache aside: %w (damage: %v)", err, cause)
	}
	_ = syncDir(filepath.Dir(c.path))
	c.resets.Add(1)
	c.log.Warn("storage: cache file damaged; moved aside and starting empty", "path", c.path, "aside", aside, "reason", cause.Error())
	return nil
}

// recoverState drops the chunks of blobs whose writer died, and recomputes
// the live byte and entry counts.
func (c *Cache) recoverState() error {
	var live, entries int64
	err := guarded(func() error {
		return c.db.Update(func(tx *bolt.Tx) error {
			pend := tx.Bucket(bktPending)
			var ids [][]byte
			_ = pend.ForEach(func(k, _ []byte) error { ids = append(ids, bytes.Clone(k)); return nil })
			for _, id := range ids {
				if len(id) == 8 {
					if err := deleteChunks(tx, binary.BigEndian.Uint64(id)); err != nil {
						return err
					}
				}
				if err := pend.Delete(id); err != nil {
					return err
				}
			}
			models := tx.Bucket(bktModels)
			return models.ForEachBucket(func(mk []byte) error {
				at := models.Bucket(mk).Bucket(bktAtime)
				if at == nil {
					return nil
				}
				return at.ForEach(func(_, v []byte) error {
					if len(v) == 24 {
						live += int64(binary.BigEndian.Uint64(v[16:]))
					}
					entries++
					return nil
				})
			})
		})
	})
	if err != nil {
		return err
	}
	c.live.Store(live)
	c.entries.Store(entries)
	return nil
}

// Close closes the cache file.
func (c *Cache) Close() error {
	c.putMu.Lock()
	defer c.putMu.Unlock()
	c.flushTouches()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.db == nil {
		return nil
	}
	err := guarded(c.db.Close)
	c.db = nil
	return err
}

// Stats returns counters and sizes.
func (c *Cache) Stats() CacheStats {
	s := CacheStats{
		Entries: c.entries.Load(), LiveBytes: c.live.Load(), Budget: c.budget,
		Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(),
		Compactions: c.compactions.Load(), Resets: c.resets.Load(), Corrupt: c.corrupted.Load(),
	}
	if st, err := os.Stat(c.path); err == nil {
		s.FileBytes = st.Size()
	}
	return s
}

// target is the live-byte level eviction keeps the cache under.
func (c *Cache) target() int64 { return int64(float64(c.budget) * liveFraction) }

var errReset = errors.New("storage: cache file was replaced during the operation")

// run executes fn in a transaction of the current file generation gen (any
// when gen is 0). Damage found on the way replaces the file.
func (c *Cache) run(gen uint64, write bool, fn func(tx *bolt.Tx) error) error {
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return ErrClosed
	}
	if c.db == nil {
		c.mu.RUnlock()
		return errors.New("storage: cache unavailable")
	}
	cur := c.gen
	if gen != 0 && gen != cur+1 {
		c.mu.RUnlock()
		return errReset
	}
	db := c.db
	if write {
		c.writes.Add(1)
	}
	err := guarded(func() error {
		if write {
			return db.Update(fn)
		}
		return db.View(fn)
	})
	c.mu.RUnlock()
	if errors.Is(err, errDamaged) {
		c.reset(cur, err)
	}
	return err
}

// generation returns a token for run that fails once the file is replaced.
func (c *Cache) generation() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.gen + 1
}

// reset replaces a file found damaged during use (once per generation).
func (c *Cache) reset(gen uint64, cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.gen != gen {
		return
	}
	c.resetLocked(cause)
}

// resetLocked moves the damaged file aside and opens a fresh one; c.mu is
// held exclusively.
func (c *Cache) resetLocked(cause error) {
	c.gen++
	c.takeTouches() // they name blobs of the old file
	if c.db != nil {
		_ = guarded(c.db.Close)
		c.db = nil
	}
	c.live.Store(0)
	c.entries.Store(0)
	if err := c.moveAside(cause); err != nil {
		c.log.Error("storage: cache unavailable", "path", c.path, "err", err.Error())
		return
	}
	if err := c.openFile(); err != nil {
		c.log.Error("storage: cache unavailable", "path", c.path, "err", err.Error())
	}
}

// entry is a decoded entry record.
type entry struct {
	model  [32]byte
	blobID uint64
	length int64
	chunks uint32
	crc    uint32
	tokens []int32
}

const entryFixed = 4 + 32 + 8 + 8 + 4 + 4 + 4 // magic .. tokens count

// encodeEntry: magic, model key, blob id, length, chunk count, blob CRC-32C,
// token count and tokens, then a CRC-32C of all of that.
func encodeEntry(e entry) []byte {
	b := make([]byte, 0, entryFixed+4*len(e.tokens)+4)
	b = append(b, entryMagic...)
	b = append(b, e.model[:]...)
	b = binary.LittleEndian.AppendUint64(b, e.blobID)
	b = binary.LittleEndian.AppendUint64(b, uint64(e.length))
	b = binary.LittleEndian.AppendUint32(b, e.chunks)
	b = binary.LittleEndian.AppendUint32(b, e.crc)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(e.tokens)))
	for _, t := range e.tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeEntry(v []byte) (entry, error) {
	var e entry
	if len(v) < entryFixed+4 || string(v[:4]) != entryMagic {
		return e, errors.New("bad entry record header")
	}
	body := v[:len(v)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(v[len(v)-4:]) {
		return e, errors.New("entry record checksum mismatch")
	}
	copy(e.model[:], v[4:36])
	e.blobID = binary.LittleEndian.Uint64(v[36:])
	e.length = int64(binary.LittleEndian.Uint64(v[44:]))
	e.chunks = binary.LittleEndian.Uint32(v[52:])
	e.crc = binary.LittleEndian.Uint32(v[56:])
	n := binary.LittleEndian.Uint32(v[60:])
	if uint64(len(body)-entryFixed) != 4*uint64(n) || e.length < 0 {
		return e, errors.New("entry record length mismatch")
	}
	e.tokens = make([]int32, n)
	for i := range e.tokens {
		e.tokens[i] = int32(binary.LittleEndian.Uint32(body[entryFixed+4*i:]))
	}
	return e, nil
}

func modelKey(model []byte) [32]byte { return sha256.Sum256(model) }

func shortKey(mk []byte) string { return hex.EncodeToString(mk[:min(len(mk), 8)]) }

func prefixSlot(n int, h uint64) []byte {
	s := make([]byte, 13)
	s[0] = 'p'
	binary.BigEndian.PutUint32(s[1:], uint32(n))
	binary.BigEndian.PutUint64(s[5:], h)
	return s
}

func chunkKey(id uint64, i uint32) []byte {
	k := make([]byte, 12)
	binary.BigEndian.PutUint64(k, id)
	binary.BigEndian.PutUint32(k[8:], i)
	return k
}

func u32key(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

// valueCost estimates the file bytes a value occupies: its bytes plus
// bbolt's per-element overhead, rounded to whole pages when it overflows a
// leaf.
func (c *Cache) valueCost(n int) int64 {
	const overhead = 64
	if n+overhead > c.pageSize/4 {
		return int64((n + overhead + c.pageSize - 1) / c.pageSize * c.pageSize)
	}
	return int64(n + overhead)
}

// cost is the estimated file footprint of an entry with a record of
// recordLen bytes and a blob of blobLen bytes, including its index keys.
func (c *Cache) cost(recordLen, blobLen int) int64 {
	total := c.valueCost(recordLen) + 3*64
	for blobLen > 0 {
		n := min(blobLen, c.chunk)
		total += c.valueCost(n)
		blobLen -= n
	}
	return total
}

// Lookup returns the longest stored prefix of tokens for model: its length
// n (1 ≤ n ≤ len(tokens)) and a copy of its blob. A miss, whatever its
// cause, returns ok false; damage is logged. It costs one pass over tokens
// and one probe per distinct stored prefix length up to len(tokens). To be
// left at least one token to evaluate, pass tokens[:len(tokens)-1].
func (c *Cache) Lookup(model []byte, tokens []int32) (n int, blob []byte, ok bool) {
	n, ok = c.LookupFunc(model, tokens, 0, func(_ int, chunks [][]byte) bool {
		blob = bytes.Join(chunks, nil)
		return true
	})
	return n, blob, ok
}

// LookupFunc is Lookup without the copy, and only for prefixes longer than
// above tokens (what the caller holds already: an entry not longer is
// neither read nor verified): use receives the longest stored prefix's
// length and its verified blob in the pieces it is stored in, the cache
// file's mapped pages, which it must not keep or modify after it returns
// (a restore copies them straight into the KV cache). use returning false
// makes it a miss.
func (c *Cache) LookupFunc(model []byte, tokens []int32, above int, use func(n int, blob [][]byte) bool) (n int, ok bool) {
	if len(model) == 0 || len(tokens) == 0 {
		c.misses.Add(1)
		return 0, false
	}
	mk := modelKey(model)
	hs := prefixHashes(tokens)
	var (
		hitSlot []byte
		hitID   uint64
		bad     [][]byte
		unknown bool
		others  int
	)
	err := c.run(0, false, func(tx *bolt.Tx) error {
		models := tx.Bucket(bktModels)
		mb := models.Bucket(mk[:])
		if mb == nil {
			unknown = true
			return models.ForEachBucket(func([]byte) error { others++; return nil })
		}
		slots, lens := mb.Bucket(bktSlots), mb.Bucket(bktLens)
		if slots == nil || lens == nil {
			return nil
		}
		cur := lens.Cursor()
		k, _ := cur.Seek(u32key(uint32(min(len(tokens), maxPrefixTokens))))
		if k == nil {
			k, _ = cur.Last()
		} else if int(binary.BigEndian.Uint32(k)) > len(tokens) {
			k, _ = cur.Prev()
		}
		for ; k != nil; k, _ = cur.Prev() {
			l := int(binary.BigEndian.Uint32(k))
			if l <= above {
				return nil // the lengths descend: none left is longer
			}
			if l == 0 || l > len(tokens) {
				continue
			}
			slot := prefixSlot(l, hs[l])
			v := slots.Get(slot)
			if v == nil {
				continue
			}
			data, id, err := c.readChunks(tx, mk, v, tokens[:l])
			if errors.Is(err, errCollision) {
				continue
			}
			if err != nil {
				c.corrupted.Add(1)
				c.log.Warn("storage: cache miss: "+err.Error(), "model", shortKey(mk[:]), "prefix_tokens", l)
				bad = append(bad, slot)
				continue
			}
			if !use(l, data) {
				return nil
			}
			n, hitSlot, hitID = l, slot, id
			return nil
		}
		return nil
	})
	if err != nil {
		c.misses.Add(1)
		if !errors.Is(err, ErrClosed) {
			c.log.Warn("storage: cache miss: cache file unreadable", "path", c.path, "err", err.Error())
		}
		return 0, false
	}
	for _, slot := range bad {
		c.dropSlot(mk, slot)
	}
	if hitSlot == nil {
		c.misses.Add(1)
		switch {
		case unknown && others > 0:
			c.log.Info("storage: cache miss: no entries for this model identity (the cache holds other models)",
				"model", shortKey(mk[:]), "other_models", others)
		case unknown:
			c.log.Debug("storage: cache miss: cache empty for this model", "model", shortKey(mk[:]))
		default:
			c.log.Debug("storage: cache miss: no stored prefix", "model", shortKey(mk[:]), "tokens", len(tokens))
		}
		return 0, false
	}
	c.hits.Add(1)
	c.touch(mk, hitSlot, hitID)
	return n, true
}

var errCollision = errors.New("prefix hash collision")

// readChunks decodes an entry record, checks it belongs to mk and to tokens
// (nil for drafting statistics), and verifies its blob, returned in the
// pieces it is stored in (valid only during tx: they are the file's mapped
// pages).
func (c *Cache) readChunks(tx *bolt.Tx, mk [32]byte, record []byte, tokens []int32) ([][]byte, uint64, error) {
	e, err := decodeEntry(record)
	if err != nil {
		return nil, 0, fmt.Errorf("corrupt entry: %v", err)
	}
	if e.model != mk {
		return nil, 0, fmt.Errorf("entry belongs to another model identity %s", shortKey(e.model[:]))
	}
	if tokens != nil && !equalTokens(e.tokens, tokens) {
		if len(e.tokens) != len(tokens) {
			return nil, 0, fmt.Errorf("corrupt entry: %d tokens stored under a %d-token key", len(e.tokens), len(tokens))
		}
		return nil, 0, errCollision
	}
	if e.length > c.budget {
		return nil, 0, fmt.Errorf("corrupt entry: blob length %d exceeds the budget", e.length)
	}
	var (
		pieces [][]byte
		length int64
		crc    uint32
	)
	prefix := binary.BigEndian.AppendUint64(nil, e.blobID)
	cur := tx.Bucket(bktChunks).Cursor()
	var i uint32
	chunks := tx.Bucket(bktChunks)
	for k, _ := cur.Seek(chunkKey(e.blobID, 0)); k != nil && bytes.HasPrefix(k, prefix); k, _ = cur.Next() {
		if len(k) != 12 || binary.BigEndian.Uint32(k[8:]) != i {
			return nil, 0, fmt.Errorf("blob truncated: chunk %d missing", i)
		}
		var v []byte
		if b := chunks.Bucket(k); b != nil {
			v = b.Get(keyData)
		}
		if v == nil {
			return nil, 0, fmt.Errorf("blob truncated: chunk %d empty", i)
		}
		if length+int64(len(v)) > e.length {
			return nil, 0, fmt.Errorf("blob corrupt: longer than its recorded %d bytes", e.length)
		}
		populate(v)
		pieces = append(pieces, v)
		length += int64(len(v))
		crc = crc32.Update(crc, castagnoli, v)
		i++
	}
	if length != e.length || i != e.chunks {
		return nil, 0, fmt.Errorf("blob truncated: %d of %d bytes in %d of %d chunks", length, e.length, i, e.chunks)
	}
	if crc != e.crc {
		return nil, 0, fmt.Errorf("blob checksum mismatch (crc32c %08x, recorded %08x)", crc, e.crc)
	}
	return pieces, e.blobID, nil
}

// readEntry is readChunks with the blob copied out of the transaction.
func (c *Cache) readEntry(tx *bolt.Tx, mk [32]byte, record []byte, tokens []int32) ([]byte, uint64, error) {
	chunks, id, err := c.readChunks(tx, mk, record, tokens)
	if err != nil {
		return nil, 0, err
	}
	return bytes.Join(chunks, nil), id, nil
}

func equalTokens(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// access is a hit not yet written to the LRU index.
type access struct {
	mk   [32]byte
	slot []byte
	id   uint64
}

// maxQueuedTouches bounds the hits held in memory before they are written.
const maxQueuedTouches = 256

// touch records that a slot holding blob id was used. The record goes into
// the next write transaction (a Put's eviction step, Close, or when many
// hits have accumulated), so a hit costs no fsync; a crash forgets recent
// hits, which only makes the eviction order slightly less exact.
//
// A hit is a request's lookup: it never waits for a write to write its
// record. When a writer (a background snapshot's Put) holds the file,
// the records wait for it, the oldest forgotten beyond
// 4·maxQueuedTouches.
func (c *Cache) touch(mk [32]byte, slot []byte, id uint64) {
	c.touchMu.Lock()
	c.touches = append(c.touches, access{mk, slot, id})
	if len(c.touches) > 4*maxQueuedTouches {
		c.touches = append(c.touches[:0], c.touches[len(c.touches)-2*maxQueuedTouches:]...)
	}
	n := len(c.touches)
	c.touchMu.Unlock()
	if n >= maxQueuedTouches && c.putMu.TryLock() {
		c.flushTouches()
		c.putMu.Unlock()
	}
}

func (c *Cache) takeTouches() []access {
	c.touchMu.Lock()
	defer c.touchMu.Unlock()
	t := c.touches
	c.touches = nil
	return t
}

func (c *Cache) flushTouches() {
	list := c.takeTouches()
	if len(list) == 0 {
		return
	}
	err := c.run(0, true, func(tx *bolt.Tx) error { return applyTouches(tx, list) })
	if err != nil && !errors.Is(err, ErrClosed) {
		c.log.Warn("storage: cache: could not record accesses", "err", err.Error())
	}
}

// applyTouches marks slots most recently used, in the order of the hits,
// skipping those evicted or replaced since; only the small index records
// are rewritten, never a blob.
func applyTouches(tx *bolt.Tx, list []access) error {
	models, lru := tx.Bucket(bktModels), tx.Bucket(bktLRU)
	for _, a := range list {
		mb := models.Bucket(a.mk[:])
		if mb == nil || mb.Bucket(bktAtime) == nil {
			continue
		}
		at := mb.Bucket(bktAtime)
		old := at.Get(a.slot)
		if len(old) != 24 || binary.BigEndian.Uint64(old[8:]) != a.id {
			continue
		}
		if err := lru.Delete(old[:8]); err != nil {
			return err
		}
		stamp, err := lru.NextSequence()
		if err != nil {
			return err
		}
		rec := bytes.Clone(old)
		binary.BigEndian.PutUint64(rec, stamp)
		if err := lru.Put(rec[:8], append(bytes.Clone(a.mk[:]), a.slot...)); err != nil {
			return err
		}
		if err := at.Put(a.slot, rec); err != nil {
			return err
		}
	}
	return nil
}

// Drop deletes the entry of model stored for exactly tokens, if there is
// one: a caller that found it unusable (a restore the model refused)
// evicts it, rather than read it again on every lookup. It reports
// whether an entry went.
func (c *Cache) Drop(model []byte, tokens []int32) bool {
	if len(model) == 0 || len(tokens) == 0 || len(tokens) > maxPrefixTokens {
		return false
	}
	mk := modelKey(model)
	before := c.entries.Load()
	c.dropSlot(mk, prefixSlot(len(tokens), prefixHashes(tokens)[len(tokens)]))
	return c.entries.Load() < before
}

// dropSlot deletes a damaged entry.
func (c *Cache) dropSlot(mk [32]byte, slot []byte) {
	var freed int64
	var found bool
	err := c.run(0, true, func(tx *bolt.Tx) error {
		var err error
		freed, found, err = deleteSlot(tx, mk[:], slot)
		return err
	})
	if err != nil {
		c.log.Warn("storage: cache: could not drop damaged entry", "err", err.Error())
		return
	}
	if found {
		c.live.Add(-freed)
		c.entries.Add(-1)
	}
}

// deleteSlot removes a slot, its index records and its chunks, returning
// the cost recorded for it.
func deleteSlot(tx *bolt.Tx, mk, slot []byte) (cost int64, found bool, err error) {
	models := tx.Bucket(bktModels)
	mb := models.Bucket(mk)
	if mb == nil {
		return 0, false, nil
	}
	slots, at, lens := mb.Bucket(bktSlots), mb.Bucket(bktAtime), mb.Bucket(bktLens)
	if slots == nil || at == nil || lens == nil {
		return 0, false, nil
	}
	rec := at.Get(slot)
	if rec == nil && slots.Get(slot) == nil {
		return 0, false, nil
	}
	if len(rec) == 24 {
		cost = int64(binary.BigEndian.Uint64(rec[16:]))
		if err := tx.Bucket(bktLRU).Delete(rec[:8]); err != nil {
			return 0, false, err
		}
		if err := deleteChunks(tx, binary.BigEndian.Uint64(rec[8:])); err != nil {
			return 0, false, err
		}
	}
	if err := at.Delete(slot); err != nil {
		return 0, false, err
	}
	if err := slots.Delete(slot); err != nil {
		return 0, false, err
	}
	if len(slot) == 13 && slot[0] == 'p' {
		lk := slot[1:5]
		if v := lens.Get(lk); len(v) == 4 && binary.BigEndian.Uint32(v) > 1 {
			err = lens.Put(lk, binary.BigEndian.AppendUint32(nil, binary.BigEndian.Uint32(v)-1))
		} else {
			err = lens.Delete(lk)
		}
		if err != nil {
			return 0, false, err
		}
	}
	if k, _ := slots.Cursor().First(); k == nil {
		if err := models.DeleteBucket(mk); err != nil {
			return 0, false, err
		}
	}
	return cost, true, nil
}

// deleteChunks removes every chunk of blob id.
func deleteChunks(tx *bolt.Tx, id uint64) error {
	b := tx.Bucket(bktChunks)
	prefix := binary.BigEndian.AppendUint64(nil, id)
	var keys [][]byte
	cur := b.Cursor()
	for k, _ := cur.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = cur.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		err := b.DeleteBucket(k)
		if errors.Is(err, berrors.ErrIncompatibleValue) {
			err = b.Delete(k) // a plain value where a chunk should be
		}
		if err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
			return err
		}
	}
	return nil
}

// Put stores blob as the state after tokens for model, replacing an entry
// for the same tokens. Older entries are evicted, least recently used
// first, to stay within the budget. Errors are worth a log line, not more:
// the cache is disposable.
func (c *Cache) Put(model []byte, tokens []int32, blob []byte) error {
	return c.PutPaused(model, tokens, blob, nil)
}

// PutPaused is Put calling pause (when not nil) before each of its write
// transactions (a large blob is written over several, each of at most a
// 32nd of the budget and 8 MiB): a caller whose requests must not compete
// with a background write for the CPU, the disk and bbolt's lock waits
// there while one runs. Between transactions the cache is consistent (the
// blob is registered as pending until its entry is written).
func (c *Cache) PutPaused(model []byte, tokens []int32, blob []byte, pause func()) error {
	if len(tokens) == 0 || len(tokens) > maxPrefixTokens {
		return fmt.Errorf("storage: cache put: %d tokens (want 1 to %d)", len(tokens), maxPrefixTokens)
	}
	hs := prefixHashes(tokens)
	return c.put(model, prefixSlot(len(tokens), hs[len(tokens)]), tokens, blob, pause)
}

// PutDraftStats stores the drafting statistics of model (an opaque blob).
func (c *Cache) PutDraftStats(model, data []byte) error {
	return c.put(model, slotNgram, nil, data, nil)
}

// DraftStats returns the drafting statistics stored for model.
func (c *Cache) DraftStats(model []byte) ([]byte, bool) {
	if len(model) == 0 {
		return nil, false
	}
	mk := modelKey(model)
	var (
		data []byte
		id   uint64
		bad  bool
	)
	err := c.run(0, false, func(tx *bolt.Tx) error {
		mb := tx.Bucket(bktModels).Bucket(mk[:])
		if mb == nil || mb.Bucket(bktSlots) == nil {
			return nil
		}
		v := mb.Bucket(bktSlots).Get(slotNgram)
		if v == nil {
			return nil
		}
		var err error
		if data, id, err = c.readEntry(tx, mk, v, nil); err != nil {
			c.corrupted.Add(1)
			c.log.Warn("storage: cache miss: drafting statistics: "+err.Error(), "model", shortKey(mk[:]))
			data, bad = nil, true
		}
		return nil
	})
	if err != nil {
		c.log.Warn("storage: cache miss: cache file unreadable", "path", c.path, "err", err.Error())
		return nil, false
	}
	if bad {
		c.dropSlot(mk, slotNgram)
	}
	if data == nil {
		return nil, false
	}
	c.touch(mk, slotNgram, id)
	return data, true
}

func (c *Cache) put(model, slot []byte, tokens []int32, blob []byte, pause func()) error {
	if pause == nil {
		pause = func() {}
	}
	if len(model) == 0 {
		return errors.New("storage: cache put: empty model identity")
	}
	mk := modelKey(model)
	// The checksum is a pass over the whole blob (190 MB for the
	// conversation of a Home Assistant turn): it waits for the requests
	// too, in parts of a transaction's size.
	crc := uint32(0)
	for b := blob; len(b) > 0; {
		pause()
		k := min(len(b), c.txMax)
		crc = crc32.Update(crc, castagnoli, b[:k])
		b = b[k:]
	}
	e := entry{model: mk, length: int64(len(blob)), crc: crc, tokens: tokens}
	e.chunks = uint32((len(blob) + c.chunk - 1) / c.chunk)
	record := encodeEntry(e)
	cost := c.cost(len(record), len(blob))
	if cost > c.target() {
		c.log.Warn("storage: cache: blob larger than the budget allows; not stored", "bytes", len(blob), "budget", c.budget)
		return fmt.Errorf("%w: %d bytes, budget %d", ErrTooLarge, len(blob), c.budget)
	}

	c.putMu.Lock()
	defer c.putMu.Unlock()
	gen := c.generation()

	// The same blob under the same key needs only a touch.
	var same bool
	var sameID uint64
	err := c.run(gen, false, func(tx *bolt.Tx) error {
		mb := tx.Bucket(bktModels).Bucket(mk[:])
		if mb == nil || mb.Bucket(bktSlots) == nil {
			return nil
		}
		if v := mb.Bucket(bktSlots).Get(slot); v != nil {
			if old, err := decodeEntry(v); err == nil && old.length == e.length && old.crc == e.crc && equalTokens(old.tokens, tokens) {
				same, sameID = true, old.blobID
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if same {
		c.touch(mk, slot, sameID)
		return nil
	}

	// Make room first, in its own transaction, so the freed pages can be
	// reused by the blob's.
	pause()
	if err := c.evict(gen, mk[:], slot, cost); err != nil {
		return err
	}
	if err := c.compactIfNeeded(cost); err != nil {
		return err
	}
	gen = c.generation()

	// Large blobs are written over several transactions, registered as
	// pending so a crash leaves nothing unreachable behind.
	var written int64
	next := 0
	pending := len(blob) > c.txMax
	if pending {
		err := c.run(gen, true, func(tx *bolt.Tx) error {
			id, err := tx.Bucket(bktChunks).NextSequence()
			if err != nil {
				return err
			}
			e.blobID = id
			return tx.Bucket(bktPending).Put(binary.BigEndian.AppendUint64(nil, id), nil)
		})
		if err != nil {
			return err
		}
		step := max(c.txMax/c.chunk, 1) * c.chunk
		for len(blob)-next > step {
			end := next + step
			pause()
			err := c.run(gen, true, func(tx *bolt.Tx) error {
				return putChunks(tx, e.blobID, c.chunk, blob, next, end)
			})
			if err != nil {
				c.abandon(gen, e.blobID, written)
				return err
			}
			written += c.cost(0, end-next) - c.cost(0, 0)
			c.live.Add(c.cost(0, end-next) - c.cost(0, 0))
			next = end
			if err := c.compactIfNeeded(int64(len(blob) - next)); err != nil {
				c.abandon(gen, e.blobID, written)
				return err
			}
		}
	}
	var freed int64
	var replaced bool
	pause()
	err = c.run(gen, true, func(tx *bolt.Tx) error {
		chunks := tx.Bucket(bktChunks)
		if e.blobID == 0 {
			id, err := chunks.NextSequence()
			if err != nil {
				return err
			}
			e.blobID = id
		}
		if err := putChunks(tx, e.blobID, c.chunk, blob, next, len(blob)); err != nil {
			return err
		}
		var err error
		if freed, replaced, err = deleteSlot(tx, mk[:], slot); err != nil {
			return err
		}
		mb, err := tx.Bucket(bktModels).CreateBucketIfNotExists(mk[:])
		if err != nil {
			return err
		}
		if mb.Get(keyIdent) == nil {
			if err := mb.Put(keyIdent, model); err != nil {
				return err
			}
		}
		sub := map[string]*bolt.Bucket{}
		for _, name := range [][]byte{bktSlots, bktAtime, bktLens} {
			if sub[string(name)], err = mb.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		if err := sub[string(bktSlots)].Put(slot, encodeEntry(e)); err != nil {
			return err
		}
		lru := tx.Bucket(bktLRU)
		stamp, err := lru.NextSequence()
		if err != nil {
			return err
		}
		rec := binary.BigEndian.AppendUint64(nil, stamp)
		rec = binary.BigEndian.AppendUint64(rec, e.blobID)
		rec = binary.BigEndian.AppendUint64(rec, uint64(cost))
		if err := lru.Put(rec[:8], append(bytes.Clone(mk[:]), slot...)); err != nil {
			return err
		}
		if err := sub[string(bktAtime)].Put(slot, rec); err != nil {
			return err
		}
		if slot[0] == 'p' {
			lens, lk := sub[string(bktLens)], slot[1:5]
			var cnt uint32
			if v := lens.Get(lk); len(v) == 4 {
				cnt = binary.BigEndian.Uint32(v)
			}
			if err := lens.Put(lk, binary.BigEndian.AppendUint32(nil, cnt+1)); err != nil {
				return err
			}
		}
		return tx.Bucket(bktPending).Delete(binary.BigEndian.AppendUint64(nil, e.blobID))
	})
	if err != nil {
		if pending {
			c.abandon(gen, e.blobID, written)
		}
		return err
	}
	c.live.Add(cost - written)
	c.entries.Add(1)
	if replaced {
		c.live.Add(-freed)
		c.entries.Add(-1)
	}
	return c.compactIfNeeded(0)
}

// putChunks stores blob[from:to] as chunks from index from/size on. Each
// chunk is the only value of its own bucket: bbolt puts at least two values
// in a leaf, so chunks sharing a bucket would be copied whenever a
// neighbour is written or deleted, and their old pages would fragment the
// file.
func putChunks(tx *bolt.Tx, id uint64, size int, blob []byte, from, to int) error {
	b := tx.Bucket(bktChunks)
	b.FillPercent = 1 // keys only ever grow: pack leaves full
	for off := from; off < to; off += size {
		end := min(off+size, to)
		cb, err := b.CreateBucket(chunkKey(id, uint32(off/size)))
		if err != nil {
			return err
		}
		if err := cb.Put(keyData, blob[off:end]); err != nil {
			return err
		}
	}
	return nil
}

// abandon removes the chunks of a blob whose write failed.
func (c *Cache) abandon(gen, id uint64, written int64) {
	err := c.run(gen, true, func(tx *bolt.Tx) error {
		if err := deleteChunks(tx, id); err != nil {
			return err
		}
		return tx.Bucket(bktPending).Delete(binary.BigEndian.AppendUint64(nil, id))
	})
	if err == nil {
		c.live.Add(-written)
	}
	// Otherwise the chunks stay registered as pending until the next open
	// (or the file was replaced, and the counters with it).
}

// evict removes least recently used entries until an entry costing need
// fits under the target (the entry in slot of model mk, which the new one
// replaces, counts as freed). The caller holds putMu.
func (c *Cache) evict(gen uint64, mk, slot []byte, need int64) error {
	var freed, n int64
	touches := c.takeTouches()
	err := c.run(gen, true, func(tx *bolt.Tx) error {
		freed, n = 0, 0
		if err := applyTouches(tx, touches); err != nil {
			return err
		}
		if mk != nil {
			cost, found, err := deleteSlot(tx, mk, slot)
			if err != nil {
				return err
			}
			if found {
				freed += cost
				n++
			}
		}
		lru := tx.Bucket(bktLRU)
		for c.live.Load()-freed+need > c.target() {
			k, v := lru.Cursor().First()
			if k == nil {
				break
			}
			if len(v) <= 32 {
				if err := lru.Delete(k); err != nil {
					return err
				}
				continue
			}
			cost, found, err := deleteSlot(tx, v[:32], bytes.Clone(v[32:]))
			if err != nil {
				return err
			}
			if !found {
				if err := lru.Delete(k); err != nil { // stale index record
					return err
				}
				continue
			}
			freed += cost
			n++
			c.log.Debug("storage: cache: evicted", "model", shortKey(v[:32]), "bytes", cost)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.live.Add(-freed)
	c.entries.Add(-n)
	c.evictions.Add(n)
	return nil
}

// enforceBudget evicts and compacts until the file fits its budget (after
// opening, possibly with a smaller budget than before). putMu is held.
func (c *Cache) enforceBudget(need int64) error {
	if err := c.evict(c.generation(), nil, nil, need); err != nil {
		return err
	}
	return c.compactIfNeeded(need)
}

// compactIfNeeded compacts when the file exceeds its budget, or when it
// would after writing need more bytes than its free pages hold, or when it
// is more than twice its live data. putMu is held.
func (c *Cache) compactIfNeeded(need int64) error {
	st, err := os.Stat(c.path)
	if err != nil {
		return nil
	}
	size, live := st.Size(), c.live.Load()
	limit := int64(float64(c.budget) * compactFraction)
	free := max(size-live, 0)
	grow := max(need-free, 0)
	if size+grow <= limit && size <= 2*live+c.budget/4 {
		return nil
	}
	return c.compactLocked()
}

// Compact rewrites the cache into a fresh file holding only live data and
// atomically replaces the old one (bbolt files never shrink by themselves).
func (c *Cache) Compact() error {
	c.putMu.Lock()
	defer c.putMu.Unlock()
	return c.compactLocked()
}

// compactLocked compacts; the caller holds putMu. The copy runs beside
// lookups (it reads the file in read transactions, as they do); only the
// swap of the files holds the cache exclusively. A write outside putMu
// during the copy (a hit's record, a dropped entry) would be missing from
// the copy: it is thrown away then, and the next put compacts again.
func (c *Cache) compactLocked() error {
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return ErrClosed
	}
	if c.db == nil {
		c.mu.RUnlock()
		return errors.New("storage: cache unavailable")
	}
	src, writes := c.db, c.writes.Load()
	before := int64(0)
	if st, err := os.Stat(c.path); err == nil {
		before = st.Size()
	}
	tmp := c.path + ".compact"
	_ = os.Remove(tmp)
	dst, err := openBolt(tmp, c.timeout, bolt.FreelistMapType, false)
	if err != nil {
		c.mu.RUnlock()
		return fmt.Errorf("storage: compact cache: %w", err)
	}
	dst.AllocSize = c.allocSize
	err = guarded(func() error { return bolt.Compact(dst, src, txBytes) })
	if c.copied != nil {
		c.copied()
	}
	c.mu.RUnlock()
	discard := func() {
		_ = guarded(dst.Close)
		_ = os.Remove(tmp)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case err != nil && errors.Is(err, errDamaged) && c.db == src:
		discard()
		c.resetLocked(err)
		return err
	case err != nil:
		discard()
		return fmt.Errorf("storage: compact cache: %w", err)
	case c.closed:
		discard()
		return ErrClosed
	case c.db != src || c.writes.Load() != writes:
		discard() // replaced, or written beside the copy
		return nil
	}
	// dst holds the lock on the new file; after the rename it is cache.db.
	if err := os.Rename(tmp, c.path); err != nil {
		discard()
		return fmt.Errorf("storage: compact cache: %w", err)
	}
	_ = syncDir(filepath.Dir(c.path))
	_ = guarded(c.db.Close)
	c.db = dst
	c.compactions.Add(1)
	after := int64(0)
	if st, err := os.Stat(c.path); err == nil {
		after = st.Size()
	}
	c.log.Info("storage: cache compacted", "path", c.path, "before", before, "after", after, "live", c.live.Load())
	return nil
}

// DeletePrefix removes every entry of model whose tokens start with one
// of prefixes, in one transaction, returning how many went: the prompt
// states a conversation left behind (its prompts all start with its
// system prompt and one of its own turns), so that deleting the
// conversation leaves none of its text in the cache. It reads every
// entry record of model (their number is bounded by the budget). A nil
// model means every model. Empty prefixes remove nothing.
func (c *Cache) DeletePrefix(model []byte, prefixes ...[]int32) (int, error) {
	prefixes = slices.DeleteFunc(slices.Clone(prefixes), func(p []int32) bool { return len(p) == 0 })
	if len(prefixes) == 0 {
		return 0, nil
	}
	shortest := len(prefixes[0])
	for _, p := range prefixes {
		shortest = min(shortest, len(p))
	}
	matches := func(toks []int32) bool {
		for _, p := range prefixes {
			if len(toks) >= len(p) && equalTokens(toks[:len(p)], p) {
				return true
			}
		}
		return false
	}
	var (
		freed   int64
		removed int
	)
	err := c.run(0, true, func(tx *bolt.Tx) error {
		var mks [][]byte
		models := tx.Bucket(bktModels)
		if model != nil {
			mk := modelKey(model)
			if models.Bucket(mk[:]) != nil {
				mks = append(mks, mk[:])
			}
		} else if err := models.ForEachBucket(func(k []byte) error {
			mks = append(mks, bytes.Clone(k))
			return nil
		}); err != nil {
			return err
		}
		for _, mk := range mks {
			slots := models.Bucket(mk).Bucket(bktSlots)
			if slots == nil {
				continue
			}
			var match [][]byte
			err := slots.ForEach(func(k, v []byte) error {
				if len(k) != 13 || k[0] != 'p' || int(binary.BigEndian.Uint32(k[1:])) < shortest {
					return nil
				}
				e, err := decodeEntry(v)
				if err != nil || len(e.tokens) < shortest || matches(e.tokens) {
					// A damaged record may be one of them: it goes too.
					match = append(match, bytes.Clone(k))
				}
				return nil
			})
			if err != nil {
				return err
			}
			for _, slot := range match {
				cost, found, err := deleteSlot(tx, mk, slot)
				if err != nil {
					return err
				}
				if found {
					freed += cost
					removed++
				}
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	c.live.Add(-freed)
	c.entries.Add(-int64(removed))
	return removed, nil
}

// Recent returns the tokens of model's most recently stored or used
// prefix, for restoring it into memory before the first request (a
// restart, a model reload). ok is false when the cache holds none.
func (c *Cache) Recent(model []byte) (tokens []int32, ok bool) {
	if len(model) == 0 {
		return nil, false
	}
	mk := modelKey(model)
	_ = c.run(0, false, func(tx *bolt.Tx) error {
		mb := tx.Bucket(bktModels).Bucket(mk[:])
		if mb == nil || mb.Bucket(bktSlots) == nil {
			return nil
		}
		slots := mb.Bucket(bktSlots)
		cur := tx.Bucket(bktLRU).Cursor()
		for k, v := cur.Last(); k != nil; k, v = cur.Prev() {
			if len(v) <= 32 || !bytes.Equal(v[:32], mk[:]) || v[32] != 'p' {
				continue
			}
			rec := slots.Get(v[32:])
			if rec == nil {
				continue
			}
			e, err := decodeEntry(rec)
			if err != nil || e.model != mk || len(e.tokens) == 0 {
				continue
			}
			tokens, ok = e.tokens, true
			return nil
		}
		return nil
	})
	return tokens, ok
}
