package storage

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// logBuf collects log lines for assertions.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuf) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Reset()
}

// expect fails unless a logged line contains every part.
func (l *logBuf) expect(t *testing.T, parts ...string) {
	t.Helper()
	for _, line := range strings.Split(l.String(), "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return
		}
	}
	t.Errorf("no log line contains %q; log:\n%s", parts, l.String())
}

func newLog(t *testing.T) (*slog.Logger, *logBuf) {
	lb := &logBuf{}
	return slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

// checkFile opens a closed database file and runs bbolt's consistency
// check on it, as bbolt's own test helpers do on cleanup.
func checkFile(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: DefaultTimeout, ReadOnly: true})
	if err != nil {
		t.Errorf("reopen %s: %v", path, err)
		return
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("%s: %v", filepath.Base(path), err)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}

// testSessions opens a sessions database in a temporary directory and
// checks it when the test ends.
func testSessions(t *testing.T, opts *Options) (*Sessions, string) {
	t.Helper()
	return testSessionsIn(t, t.TempDir(), opts)
}

// testSessionsIn is testSessions in dir.
func testSessionsIn(t *testing.T, dir string, opts *Options) (*Sessions, string) {
	t.Helper()
	path := filepath.Join(dir, "sessions.db")
	s, err := OpenSessions(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		checkFile(t, path)
	})
	return s, path
}

// memDir returns a temporary directory in memory (/dev/shm) when there is
// one, for tests whose subject is not durability: fsync there costs
// nothing, and the machine's disk is shared.
func memDir(t *testing.T) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "geist-storage-test-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// testCache opens a cache in a temporary directory and checks it when the
// test ends.
func testCache(t *testing.T, opts *CacheOptions) (*Cache, string) {
	t.Helper()
	return testCacheIn(t, t.TempDir(), opts)
}

func testCacheIn(t *testing.T, dir string, opts *CacheOptions) (*Cache, string) {
	t.Helper()
	path := filepath.Join(dir, "cache.db")
	c, err := OpenCache(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		checkFile(t, path)
	})
	return c, path
}

// audit checks the cache's bookkeeping: every slot has a valid record, an
// access record and an LRU record pointing back to it; the prefix-length
// index counts match; every chunk belongs to a stored blob; nothing is
// pending; the in-memory live and entry counters match the file.
func (c *Cache) audit(t *testing.T) {
	t.Helper()
	var live, entries int64
	be64 := binary.BigEndian.Uint64
	err := c.run(0, false, func(tx *bolt.Tx) error {
		lru := map[string]uint64{}
		_ = tx.Bucket(bktLRU).ForEach(func(k, v []byte) error {
			if _, dup := lru[string(v)]; dup {
				t.Errorf("audit: two LRU records for %x", v)
			}
			lru[string(v)] = be64(k)
			return nil
		})
		blobs := map[uint64]uint32{}
		models := tx.Bucket(bktModels)
		_ = models.ForEachBucket(func(mk []byte) error {
			mb := models.Bucket(mk)
			slots, at, lens := mb.Bucket(bktSlots), mb.Bucket(bktAtime), mb.Bucket(bktLens)
			if slots == nil || at == nil || lens == nil {
				t.Errorf("audit: model %x lacks sub-buckets", mk[:4])
				return nil
			}
			perLen := map[uint32]uint32{}
			nslots := 0
			_ = slots.ForEach(func(slot, rec []byte) error {
				nslots++
				e, err := decodeEntry(rec)
				if err != nil {
					t.Errorf("audit: slot %x: %v", slot, err)
					return nil
				}
				a := at.Get(slot)
				if len(a) != 24 || be64(a[8:]) != e.blobID {
					t.Errorf("audit: slot %x: access record %x for blob %d", slot, a, e.blobID)
					return nil
				}
				ref := string(mk) + string(slot)
				if stamp, ok := lru[ref]; !ok || stamp != be64(a) {
					t.Errorf("audit: slot %x: LRU stamp %d, access record %d", slot, stamp, be64(a))
				}
				delete(lru, ref)
				blobs[e.blobID] = e.chunks
				if slot[0] == 'p' {
					n := binary.BigEndian.Uint32(slot[1:5])
					perLen[n]++
					if int(n) != len(e.tokens) {
						t.Errorf("audit: slot for %d tokens holds %d", n, len(e.tokens))
					}
				}
				live += int64(be64(a[16:]))
				entries++
				return nil
			})
			if nslots == 0 {
				t.Errorf("audit: empty model bucket %x", mk[:4])
			}
			if n := at.Stats().KeyN; n != nslots {
				t.Errorf("audit: %d access records for %d slots", n, nslots)
			}
			_ = lens.ForEach(func(k, v []byte) error {
				n := binary.BigEndian.Uint32(k)
				if binary.BigEndian.Uint32(v) != perLen[n] {
					t.Errorf("audit: length index says %d prefixes of %d tokens, found %d", binary.BigEndian.Uint32(v), n, perLen[n])
				}
				delete(perLen, n)
				return nil
			})
			if len(perLen) != 0 {
				t.Errorf("audit: prefix lengths missing from the index: %v", perLen)
			}
			return nil
		})
		if len(lru) != 0 {
			t.Errorf("audit: %d stale LRU records", len(lru))
		}
		_ = tx.Bucket(bktChunks).ForEach(func(k, _ []byte) error {
			n, ok := blobs[be64(k)]
			if !ok || binary.BigEndian.Uint32(k[8:]) >= n {
				t.Errorf("audit: orphan chunk %x", k)
			}
			return nil
		})
		if n := tx.Bucket(bktPending).Stats().KeyN; n != 0 {
			t.Errorf("audit: %d pending blobs", n)
		}
		return nil
	})
	if err != nil {
		t.Errorf("audit: %v", err)
	}
	if live != c.live.Load() || entries != c.entries.Load() {
		t.Errorf("audit: file holds %d entries, %d bytes; counters say %d, %d", entries, live, c.entries.Load(), c.live.Load())
	}
}
