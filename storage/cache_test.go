package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	bolt "go.etcd.io/bbolt"
)

var (
	modelA = []byte("model A: sha256 of header+tensors, kv f16")
	modelB = []byte("model B: another file")
)

// blobFor is the deterministic blob stored for a token prefix: its size lies
// in [lo, hi) and its bytes depend on every token, so any hit can be checked
// without knowing what was stored.
func blobFor(tokens []int32, lo, hi int) []byte {
	h := prefixHashes(tokens)[len(tokens)]
	r := rand.New(rand.NewPCG(h, uint64(len(tokens))))
	n := lo
	if hi > lo {
		n += r.IntN(hi - lo)
	}
	// 4 KiB of random bytes, repeated, with each block's first 8 bytes
	// marked by its index (fast even under the race detector).
	b := make([]byte, n)
	for i := 0; i < min(n, 4096); i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64())
		copy(b[i:], w[:])
	}
	for done := 4096; done < n; done *= 2 {
		copy(b[done:], b[:done])
	}
	for off := 4096; off+8 <= n; off += 4096 {
		binary.LittleEndian.PutUint64(b[off:], binary.LittleEndian.Uint64(b[off:])^uint64(off))
	}
	return b
}

func seq(start, n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(start + i)
	}
	return s
}

// has reports whether an entry for exactly tokens exists, without touching
// it.
func (c *Cache) has(model []byte, tokens []int32) bool {
	mk := modelKey(model)
	slot := prefixSlot(len(tokens), prefixHashes(tokens)[len(tokens)])
	found := false
	_ = c.run(0, false, func(tx *bolt.Tx) error {
		if mb := tx.Bucket(bktModels).Bucket(mk[:]); mb != nil {
			found = mb.Bucket(bktSlots).Get(slot) != nil
		}
		return nil
	})
	return found
}

func TestCacheLongestPrefix(t *testing.T) {
	log, lb := newLog(t)
	c, _ := testCache(t, &CacheOptions{Logger: log, MaxBytes: 8 << 20, ChunkSize: 4096})
	base := seq(100, 40)
	for _, n := range []int{3, 10, 20} {
		if err := c.Put(modelA, base[:n], blobFor(base[:n], 1, 20000)); err != nil {
			t.Fatal(err)
		}
	}
	other := append(seq(100, 9), 7) // same length as a stored prefix, different tokens
	if err := c.Put(modelA, other, []byte("other")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		query []int32
		want  int
	}{
		{base, 20},
		{base[:20], 20},
		{base[:19], 10},
		{append(append([]int32{}, base[:15]...), 1, 2, 3), 10},
		{base[:9], 3},
		{base[:3], 3},
		{base[:2], 0},
		{append(append([]int32{}, other...), 5), 10},
		{seq(0, 50), 0},
	} {
		n, blob, ok := c.Lookup(modelA, tc.query)
		if tc.want == 0 {
			if ok {
				t.Errorf("lookup %v: hit %d, want miss", tc.query, n)
			}
			continue
		}
		var want []byte
		if len(tc.query) > 9 && tc.query[9] == 7 {
			want = []byte("other")
		} else {
			want = blobFor(base[:tc.want], 1, 20000)
		}
		if !ok || n != tc.want || !bytes.Equal(blob, want) {
			t.Errorf("lookup %d tokens: n=%d ok=%v (want %d), blob equal %v", len(tc.query), n, ok, tc.want, bytes.Equal(blob, want))
		}
	}
	if _, _, ok := c.Lookup(modelB, base); ok {
		t.Fatal("hit for another model")
	}
	lb.expect(t, "cache miss: no entries for this model identity", "other_models=1")
	if _, _, ok := c.Lookup(modelA, nil); ok {
		t.Fatal("hit for no tokens")
	}
	st := c.Stats()
	if st.Entries != 4 || st.Hits != 7 || st.Corrupt != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestCacheReplaceAndLargeBlob(t *testing.T) {
	c, path := testCache(t, &CacheOptions{MaxBytes: 64 << 20, ChunkSize: 64 << 10})
	toks := seq(1, 30)
	if err := c.Put(modelA, toks, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(modelA, toks, []byte("second")); err != nil {
		t.Fatal(err)
	}
	if _, blob, ok := c.Lookup(modelA, toks); !ok || string(blob) != "second" {
		t.Fatalf("after replace: %q %v", blob, ok)
	}
	if err := c.Put(modelA, toks, []byte("second")); err != nil { // unchanged: a touch
		t.Fatal(err)
	}
	if e := c.Stats().Entries; e != 1 {
		t.Fatalf("entries %d", e)
	}
	// Larger than one transaction's worth of chunks.
	big := blobFor(toks[:20], txBytes+3*(64<<10)+123, txBytes+3*(64<<10)+124)
	if err := c.Put(modelA, toks[:20], big); err != nil {
		t.Fatal(err)
	}
	if n, blob, ok := c.Lookup(modelA, toks[:25]); !ok || n != 20 || !bytes.Equal(blob, big) {
		t.Fatalf("large blob: n=%d ok=%v equal=%v", n, ok, bytes.Equal(blob, big))
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c2, err := OpenCache(path, &CacheOptions{MaxBytes: 64 << 20, ChunkSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if n, blob, ok := c2.Lookup(modelA, toks); !ok || n != 30 || string(blob) != "second" {
		t.Fatalf("after reopen: %d %q %v", n, blob, ok)
	}
	if st := c2.Stats(); st.Entries != 2 || st.LiveBytes < int64(len(big)) {
		t.Fatalf("stats after reopen %+v", st)
	}
	c2.audit(t)
	if err := c.Put(modelA, toks, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("put after close: %v", err)
	}
	if err := c2.Put(modelA, toks, make([]byte, 60<<20)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
}

func TestCacheEvictionOrder(t *testing.T) {
	c, _ := testCache(t, &CacheOptions{MaxBytes: 1 << 20, ChunkSize: 16 << 10})
	key := func(i int) []int32 { return seq(1000*i, 5) }
	blob := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 50000) }
	cost := c.cost(len(encodeEntry(entry{tokens: key(0)})), 50000)
	k := int(c.target() / cost)
	if k < 4 {
		t.Fatalf("budget fits only %d entries", k)
	}
	// The expected order, least recently used first; -1 stands for the
	// drafting statistics (a smaller record, the same blob size).
	var order []int
	use := func(i int) {
		for j, x := range order {
			if x == i {
				order = append(order[:j], order[j+1:]...)
				break
			}
		}
		order = append(order, i)
		if len(order) > k {
			order = order[1:]
		}
	}
	put := func(i int) {
		t.Helper()
		var err error
		if i < 0 {
			err = c.PutDraftStats(modelA, blob(99))
		} else {
			err = c.Put(modelA, key(i), blob(i))
		}
		if err != nil {
			t.Fatal(err)
		}
		use(i)
	}
	hit := func(i int) {
		t.Helper()
		var ok bool
		if i < 0 {
			_, ok = c.DraftStats(modelA)
		} else {
			_, _, ok = c.Lookup(modelA, append(key(i), 77))
		}
		if !ok {
			t.Fatalf("entry %d missing; expected order %v", i, order)
		}
		use(i)
	}
	check := func() {
		t.Helper()
		want := map[int]bool{}
		for _, i := range order {
			want[i] = true
		}
		for i := -1; i < k+20; i++ {
			var got bool
			if i < 0 {
				got = c.hasStats(modelA)
			} else {
				got = c.has(modelA, key(i))
			}
			if got != want[i] {
				t.Fatalf("entry %d present=%v; expected LRU order %v", i, got, order)
			}
		}
	}
	for i := range k {
		put(i)
	}
	if ev := c.Stats().Evictions; ev != 0 {
		t.Fatalf("%d evictions while filling %d entries", ev, k)
	}
	check()
	hit(0) // 0 becomes the most recently used: 1 goes first, then 2
	put(k)
	check()
	put(k + 1)
	check()
	if order[0] != 3 || order[len(order)-1] != k+1 {
		t.Fatalf("order %v", order)
	}
	hit(3)
	put(-1)
	check()
	hit(order[0]) // the oldest, now the newest
	put(k + 2)
	put(k + 3)
	check()
	hit(-1)
	for i := k + 4; i < k+4+k-1; i++ { // all but the statistics replaced
		put(i)
	}
	check()
	if order[0] != -1 {
		t.Fatalf("order %v", order)
	}
	put(k + 4 + k)
	check()
	if st := c.Stats(); st.Entries != int64(k) {
		t.Fatalf("stats %+v (k=%d)", st, k)
	}
	c.audit(t)
}

// hasStats reports whether drafting statistics exist, without touching them.
func (c *Cache) hasStats(model []byte) bool {
	mk := modelKey(model)
	found := false
	_ = c.run(0, false, func(tx *bolt.Tx) error {
		if mb := tx.Bucket(bktModels).Bucket(mk[:]); mb != nil {
			found = mb.Bucket(bktSlots).Get(slotNgram) != nil
		}
		return nil
	})
	return found
}

func TestCacheBudgetRandomized(t *testing.T) {
	for _, tc := range []struct {
		name           string
		budget         int64
		chunk          int
		lo, hi         int // blob sizes
		puts, shortRun int
		readers        int // goroutines looking up meanwhile
	}{
		{"4MiB-32KiB-chunks", 4 << 20, 32 << 10, 1000, 800 << 10, 600, 100, 0},
		{"48MiB-1MiB-chunks", 48 << 20, 1 << 20, 100 << 10, 9 << 20, 120, 20, 0},
		{"8MiB-64KiB-chunks-2-readers", 8 << 20, 64 << 10, 1000, 2 << 20, 100, 30, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, path := testCacheIn(t, memDir(t), &CacheOptions{MaxBytes: tc.budget, ChunkSize: tc.chunk})
			r := rand.New(rand.NewPCG(1, 2))
			var (
				stored [][]int32
				mu     sync.Mutex
				wg     sync.WaitGroup
				done   = make(chan struct{})
				wrong  atomic.Int64
			)
			for w := range tc.readers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(w), 3))
					for {
						select {
						case <-done:
							return
						default:
						}
						mu.Lock()
						var q []int32
						if len(stored) > 0 {
							q = stored[r.IntN(len(stored))]
						}
						mu.Unlock()
						if q == nil {
							continue
						}
						if n, blob, ok := c.Lookup(modelA, q); ok && !bytes.Equal(blob, blobFor(q[:n], tc.lo, tc.hi)) {
							wrong.Add(1)
						}
					}
				}()
			}
			defer func() { close(done); wg.Wait() }()
			maxSize, puts := int64(0), tc.puts
			if testing.Short() || raceEnabled || runtime.GOARCH != "amd64" { // qemu
				puts = tc.shortRun
			}
			for i := range puts {
				var toks []int32
				if len(stored) > 0 && r.IntN(3) == 0 {
					// Extend a stored prefix, as a conversation does.
					p := stored[r.IntN(len(stored))]
					toks = append(append([]int32{}, p...), seq(r.IntN(1000), 1+r.IntN(50))...)
				} else {
					toks = seq(r.IntN(1<<20), 1+r.IntN(300))
				}
				if err := c.Put(modelA, toks, blobFor(toks, tc.lo, tc.hi)); err != nil {
					t.Fatalf("put %d: %v", i, err)
				}
				mu.Lock()
				stored = append(stored, toks)
				mu.Unlock()
				st, _ := os.Stat(path)
				maxSize = max(maxSize, st.Size())
				if st.Size() > tc.budget*11/10 {
					t.Fatalf("put %d: file %d bytes, budget %d (+%.1f%%)", i, st.Size(), tc.budget, 100*float64(st.Size()-tc.budget)/float64(tc.budget))
				}
				for range 2 {
					q := stored[r.IntN(len(stored))]
					if n, blob, ok := c.Lookup(modelA, q); ok && !bytes.Equal(blob, blobFor(q[:n], tc.lo, tc.hi)) {
						t.Fatalf("lookup returned wrong data for %d tokens", n)
					}
				}
			}
			if wrong.Load() != 0 {
				t.Fatal("concurrent lookups returned wrong data")
			}
			st := c.Stats()
			t.Logf("%d puts: max file %d bytes (%.1f%% of budget), final %+v", puts, maxSize, 100*float64(maxSize)/float64(tc.budget), st)
			if st.Evictions == 0 {
				t.Fatal("no evictions")
			}
			c.audit(t)
		})
	}
}

// findAndFlip flips the byte at offset off of every occurrence of pattern
// in the file (freed pages may hold stale copies besides the live one).
func findAndFlip(t *testing.T, path string, pattern []byte, off int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := bytes.Index(data, pattern); i >= 0; {
		data[i+off] ^= 0x55
		n++
		next := bytes.Index(data[i+len(pattern):], pattern)
		if next < 0 {
			break
		}
		i += len(pattern) + next
	}
	if n == 0 {
		t.Fatalf("pattern not in %s", path)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCacheCorruptEntries(t *testing.T) {
	log, lb := newLog(t)
	opts := &CacheOptions{Logger: log, MaxBytes: 8 << 20, ChunkSize: 4096}
	path := filepath.Join(t.TempDir(), "cache.db")
	c, err := OpenCache(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	toks := seq(0x5eed0000, 40)
	for _, n := range []int{5, 10, 20, 30} {
		blob := bytes.Repeat([]byte(fmt.Sprintf("<blob %02d>", n)), 1000)
		if err := c.Put(modelA, toks[:n], blob); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.PutDraftStats(modelA, bytes.Repeat([]byte("<ngram>"), 100)); err != nil {
		t.Fatal(err)
	}
	c.Close()

	// Blob of 30: a flipped byte in its data. Record of 20: a flipped
	// token. Blob of 10: a chunk gone. Drafting statistics: flipped.
	findAndFlip(t, path, []byte("<blob 30>"), 3)
	findAndFlip(t, path, []byte("<ngram>"), 2)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		mk := modelKey(modelA)
		slots := tx.Bucket(bktModels).Bucket(mk[:]).Bucket(bktSlots)
		e, err := decodeEntry(slots.Get(prefixSlot(10, prefixHashes(toks[:10])[10])))
		if err != nil {
			return err
		}
		if err := tx.Bucket(bktChunks).DeleteBucket(chunkKey(e.blobID, 1)); err != nil {
			return err
		}
		s20 := prefixSlot(20, prefixHashes(toks[:20])[20])
		rec := bytes.Clone(slots.Get(s20))
		rec[entryFixed+4*7] ^= 1 // token 7
		return slots.Put(s20, rec)
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	c, err = OpenCache(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n, blob, ok := c.Lookup(modelA, toks)
	if !ok || n != 5 || !bytes.HasPrefix(blob, []byte("<blob 05>")) {
		t.Fatalf("want the intact 5-token prefix, got n=%d ok=%v", n, ok)
	}
	lb.expect(t, "cache miss: blob checksum mismatch", "prefix_tokens=30")
	lb.expect(t, "cache miss: corrupt entry: entry record checksum mismatch", "prefix_tokens=20")
	lb.expect(t, "cache miss: blob truncated: chunk 1 missing", "prefix_tokens=10")
	if _, ok := c.DraftStats(modelA); ok {
		t.Fatal("corrupt drafting statistics returned")
	}
	lb.expect(t, "cache miss: drafting statistics: blob checksum mismatch")
	st := c.Stats()
	if st.Corrupt != 4 || st.Entries != 1 {
		t.Fatalf("damaged entries not dropped: %+v", st)
	}
	// Dropped for good; the file stays consistent.
	if n, _, _ := c.Lookup(modelA, toks); n != 5 {
		t.Fatalf("second lookup n=%d", n)
	}
	if c.Stats().Corrupt != 4 {
		t.Fatal("damage reported twice")
	}
	c.audit(t)
}

func TestCacheForeignRecords(t *testing.T) {
	log, lb := newLog(t)
	c, _ := testCache(t, &CacheOptions{Logger: log, MaxBytes: 8 << 20, ChunkSize: 4096})
	a := seq(10, 12)
	b := append(seq(10, 11), 99) // same length, different last token
	if err := c.Put(modelA, a, []byte("state of a")); err != nil {
		t.Fatal(err)
	}
	if err := c.Put(modelB, a, []byte("state of a under B")); err != nil {
		t.Fatal(err)
	}
	ka, kb := modelKey(modelA), modelKey(modelB)
	slotA, slotB := prefixSlot(12, prefixHashes(a)[12]), prefixSlot(12, prefixHashes(b)[12])
	// Plant a's record under b's key (as a hash collision would) and B's
	// record under A's model.
	err := c.run(0, true, func(tx *bolt.Tx) error {
		sa := tx.Bucket(bktModels).Bucket(ka[:]).Bucket(bktSlots)
		sb := tx.Bucket(bktModels).Bucket(kb[:]).Bucket(bktSlots)
		if err := sa.Put(slotB, bytes.Clone(sa.Get(slotA))); err != nil {
			return err
		}
		return sa.Put(slotA, bytes.Clone(sb.Get(slotA)))
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, blob, ok := c.Lookup(modelA, b); ok {
		t.Fatalf("collision returned %d tokens: %q", n, blob)
	}
	if n, blob, ok := c.Lookup(modelA, a); ok {
		t.Fatalf("record of another model returned %d tokens: %q", n, blob)
	}
	lb.expect(t, "cache miss: entry belongs to another model identity "+shortKey(kb[:]))
	if _, blob, ok := c.Lookup(modelB, a); !ok || string(blob) != "state of a under B" {
		t.Fatalf("model B: %q %v", blob, ok)
	}
}

func TestCacheDamagedFiles(t *testing.T) {
	fill := func(t *testing.T, path string) {
		c, err := OpenCache(path, &CacheOptions{MaxBytes: 8 << 20, ChunkSize: 4096})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			if err := c.Put(modelA, seq(i*100, 20), bytes.Repeat([]byte{byte(i)}, 30000)); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
		reason string
	}{
		{"garbage", func(t *testing.T, path string) {
			os.WriteFile(path, bytes.Repeat([]byte("garbage!"), 10000), 0o600)
		}, "invalid database"},
		{"truncated", func(t *testing.T, path string) {
			fill(t, path)
			st, _ := os.Stat(path)
			os.Truncate(path, st.Size()/2)
		}, "file truncated"},
		{"cut to one page", func(t *testing.T, path string) {
			fill(t, path)
			os.Truncate(path, 4096)
		}, "damaged"},
		{"sessions file", func(t *testing.T, path string) {
			s, err := OpenSessions(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
		}, "bad magic"},
		{"wrong magic", func(t *testing.T, path string) {
			fill(t, path)
			db, _ := bolt.Open(path, 0o600, nil)
			db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bktMeta).Put(keyMagic, []byte("geist-cache/0")) })
			db.Close()
		}, "bad magic"},
		{"broken page", func(t *testing.T, path string) {
			fill(t, path)
			data, _ := os.ReadFile(path)
			// Overwrite the page holding the root of the chunks bucket's
			// neighbours: every page after the metas is a branch or leaf
			// or overflow page; clobber a run of them.
			for i := 2 * 4096; i < 6*4096 && i < len(data); i++ {
				data[i] = 0xAA
			}
			os.WriteFile(path, data, 0o600)
		}, "damaged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, lb := newLog(t)
			path := filepath.Join(t.TempDir(), "cache.db")
			tc.damage(t, path)
			c, err := OpenCache(path, &CacheOptions{Logger: log, MaxBytes: 8 << 20, ChunkSize: 4096})
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer c.Close()
			lb.expect(t, "cache file damaged; moved aside", tc.reason)
			if _, err := os.Stat(path + ".broken"); err != nil {
				t.Fatalf("not moved aside: %v", err)
			}
			if st := c.Stats(); st.Resets != 1 || st.Entries != 0 {
				t.Fatalf("stats %+v", st)
			}
			if _, _, ok := c.Lookup(modelA, seq(0, 20)); ok {
				t.Fatal("hit after reset")
			}
			if err := c.Put(modelA, seq(0, 20), []byte("fresh")); err != nil {
				t.Fatal(err)
			}
			if _, blob, ok := c.Lookup(modelA, seq(0, 20)); !ok || string(blob) != "fresh" {
				t.Fatal("fresh cache does not work")
			}
		})
	}
}

func TestCacheLocked(t *testing.T) {
	_, path := testCache(t, &CacheOptions{MaxBytes: 8 << 20})
	_, err := OpenCache(path, &CacheOptions{MaxBytes: 8 << 20, Timeout: 50e6})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
	if _, err := os.Stat(path + ".broken"); err == nil {
		t.Fatal("a locked cache was moved aside")
	}
}

func TestCacheShrinkBudget(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	c, err := OpenCache(path, &CacheOptions{MaxBytes: 16 << 20, ChunkSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := c.Put(modelA, seq(i*100, 10), blobFor(seq(i*100, 10), 100<<10, 200<<10)); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	log, lb := newLog(t)
	c, err = OpenCache(path, &CacheOptions{Logger: log, MaxBytes: 4 << 20, ChunkSize: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st := c.Stats()
	if st.FileBytes > 4<<20 || st.LiveBytes > c.target() || st.Compactions != 1 {
		t.Fatalf("after shrinking the budget: %+v", st)
	}
	lb.expect(t, "cache compacted")
	hits := 0
	for i := range 100 {
		toks := seq(i*100, 10)
		if n, blob, ok := c.Lookup(modelA, toks); ok {
			hits++
			if n != 10 || !bytes.Equal(blob, blobFor(toks, 100<<10, 200<<10)) {
				t.Fatal("wrong data after compaction")
			}
		}
	}
	if hits == 0 || hits >= 100 {
		t.Fatalf("%d hits", hits)
	}
	c.audit(t)
}

func TestCacheConcurrent(t *testing.T) {
	c, _ := testCache(t, &CacheOptions{MaxBytes: 4 << 20, ChunkSize: 16 << 10})
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range 40 {
				toks := seq(r.IntN(20)*1000, 5+r.IntN(10))
				switch r.IntN(6) {
				case 0, 1:
					if err := c.Put(modelA, toks, blobFor(toks, 1000, 150<<10)); err != nil {
						errs <- err
						return
					}
				case 2:
					if err := c.PutDraftStats(modelB, []byte(fmt.Sprint(w, i))); err != nil {
						errs <- err
						return
					}
					c.DraftStats(modelB)
				case 3:
					if w == 0 && i%10 == 0 {
						if err := c.Compact(); err != nil {
							errs <- err
							return
						}
					}
					_ = c.Stats()
				default:
					if n, blob, ok := c.Lookup(modelA, append(toks, 1, 2)); ok && !bytes.Equal(blob, blobFor(toks[:n], 1000, 150<<10)) {
						errs <- errors.New("wrong data")
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	c.audit(t)
}

func TestPrefixHashes(t *testing.T) {
	seen := map[uint64]string{}
	for _, s := range [][]int32{nil, {0}, {0, 0}, {1}, {1, 0}, {0, 1}, {-1}, {1 << 16}, {65536, 0}} {
		h := prefixHashes(s)
		if len(h) != len(s)+1 {
			t.Fatal("length")
		}
		if prev, dup := seen[h[len(s)]]; dup {
			t.Fatalf("%v and %s hash alike", s, prev)
		}
		seen[h[len(s)]] = fmt.Sprint(s)
	}
	a, b := prefixHashes(seq(0, 10)), prefixHashes(append(seq(0, 5), 9, 9))
	for i := 0; i <= 5; i++ {
		if a[i] != b[i] {
			t.Fatal("shared prefixes must share hashes")
		}
	}
	if strings.Contains(fmt.Sprint(a[6]), fmt.Sprint(b[6])) {
		t.Fatal("diverging prefixes share a hash")
	}
}

func TestCacheDamagedWhileOpen(t *testing.T) {
	log, lb := newLog(t)
	c, path := testCache(t, &CacheOptions{Logger: log, MaxBytes: 8 << 20, ChunkSize: 4096})
	for i := range 40 {
		if err := c.Put(modelA, seq(i*100, 20), bytes.Repeat([]byte{byte(i)}, 30000)); err != nil {
			t.Fatal(err)
		}
	}
	// Cut the file under the memory map: reading it now faults.
	if err := os.Truncate(path, 8192); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if n, blob, ok := c.Lookup(modelA, seq(i*100, 20)); ok && !bytes.Equal(blob, bytes.Repeat([]byte{byte(i)}, 30000)) {
			t.Fatalf("wrong data (%d tokens) from a damaged file", n)
		}
	}
	lb.expect(t, "cache file damaged; moved aside")
	if st := c.Stats(); st.Resets != 1 {
		t.Fatalf("stats %+v", st)
	}
	if err := c.Put(modelA, seq(0, 20), []byte("fresh")); err != nil {
		t.Fatal(err)
	}
	if _, blob, ok := c.Lookup(modelA, seq(0, 20)); !ok || string(blob) != "fresh" {
		t.Fatal("recreated cache does not work")
	}
	c.audit(t)
}

// BenchmarkLookup: a 4096-token request against 64 stored prefixes of 16
// distinct lengths with 64 KiB blobs: a hit on the longest, and a miss that
// probes every length.
func BenchmarkLookup(b *testing.B) {
	c, err := OpenCache(filepath.Join(memDirB(b), "cache.db"), &CacheOptions{MaxBytes: 64 << 20, ChunkSize: 16 << 10})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := seq(7, 4096)
	for i := range 64 {
		n := 256 * (1 + i%16)
		toks := append([]int32{}, req[:n]...)
		if i >= 16 {
			toks[n-1] = int32(-i) // same length, another conversation
		}
		if err := c.Put(modelA, toks, blobFor(toks, 64<<10, 64<<10+1)); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("hit", func(b *testing.B) {
		b.SetBytes(64 << 10)
		for b.Loop() {
			if n, _, ok := c.Lookup(modelA, req); !ok || n != 4096 {
				b.Fatalf("n=%d ok=%v", n, ok)
			}
		}
	})
	b.Run("miss-16-lengths", func(b *testing.B) {
		other := seq(8, 4096)
		for b.Loop() {
			if _, _, ok := c.Lookup(modelA, other); ok {
				b.Fatal("hit")
			}
		}
	})
}

func memDirB(b *testing.B) string {
	if d, err := os.MkdirTemp("/dev/shm", "geist-storage-bench-"); err == nil {
		b.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return b.TempDir()
}
