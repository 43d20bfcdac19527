package storage

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestCacheRecent: Recent names the prefix stored or used last, also after a
// reopen (the hits are written at Close), and nothing for another model.
func TestCacheRecent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	c, err := OpenCache(path, &CacheOptions{MaxBytes: 16 << 20, ChunkSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	model := []byte("model-a")
	if _, ok := c.Recent(model); ok {
		t.Error("Recent on an empty cache")
	}
	a, b := []int32{1, 2, 3, 4}, []int32{5, 6, 7, 8, 9}
	for _, toks := range [][]int32{a, b} {
		if err := c.Put(model, toks, make([]byte, 10000)); err != nil {
			t.Fatal(err)
		}
	}
	if got, ok := c.Recent(model); !ok || !slices.Equal(got, b) {
		t.Errorf("after two puts Recent %v %v, want %v", got, ok, b)
	}
	var pieces int
	if n, ok := c.LookupFunc(model, []int32{1, 2, 3, 4, 0}, 0, func(_ int, blob [][]byte) bool { pieces = len(blob); return true }); n != 4 || !ok || pieces != 3 {
		t.Errorf("LookupFunc: %d tokens %v, %d pieces (want 4 tokens in 3 pieces of 4 KiB)", n, ok, pieces)
	}
	c.Close()
	if c, err = OpenCache(path, &CacheOptions{MaxBytes: 16 << 20, ChunkSize: 4096}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got, ok := c.Recent(model); !ok || !slices.Equal(got, a) {
		t.Errorf("after a hit and a reopen Recent %v %v, want %v", got, ok, a)
	}
	if _, ok := c.Recent([]byte("model-b")); ok {
		t.Error("Recent for a model never stored")
	}
}

// TestCacheLookupAbove: LookupFunc with above skips, unread, the prefixes
// not longer than what the caller holds (a warm request's system prompt
// and tools, already in memory) and still finds a shorter stored prefix
// when above is below it; a longer one is found whatever the shorter ones.
func TestCacheLookupAbove(t *testing.T) {
	c, err := OpenCache(filepath.Join(t.TempDir(), "cache.db"), &CacheOptions{MaxBytes: 16 << 20, ChunkSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	model := []byte("model-a")
	long := seq(0, 40)
	for _, toks := range [][]int32{long[:20], long[:30]} {
		if err := c.Put(model, toks, make([]byte, 10000)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ query, above, want int }{
		{40, 0, 30}, {40, 29, 30}, {40, 30, 0}, {25, 19, 20}, {25, 20, 0}, {25, 0, 20},
	} {
		called := false
		n, ok := c.LookupFunc(model, long[:tc.query], tc.above, func(int, [][]byte) bool { called = true; return true })
		if n != tc.want || ok != (tc.want > 0) || called != ok {
			t.Errorf("query %d above %d: %d tokens %v (use called %v), want %d", tc.query, tc.above, n, ok, called, tc.want)
		}
	}
}

// TestCachePutPaused: PutPaused calls pause before each of the write
// transactions a large blob takes (the engine waits there while a request
// runs), and the blob reads back whole.
func TestCachePutPaused(t *testing.T) {
	c, err := OpenCache(filepath.Join(t.TempDir(), "cache.db"), &CacheOptions{MaxBytes: 4 << 20, ChunkSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	model, toks := []byte("model-a"), seq(0, 30)
	blob := make([]byte, 1<<20) // the budget's 32nd is 128 KiB: 8 transactions
	for i := range blob {
		blob[i] = byte(i * 7)
	}
	pauses := 0
	if err := c.PutPaused(model, toks, blob, func() { pauses++ }); err != nil {
		t.Fatal(err)
	}
	if pauses < 8 {
		t.Errorf("%d pauses for a blob of 8 transactions", pauses)
	}
	if n, got, ok := c.Lookup(model, toks); !ok || n != 30 || string(got) != string(blob) {
		t.Errorf("after PutPaused: %d tokens %v, blob equal %v", n, ok, string(got) == string(blob))
	}
}

// TestCacheLookupAboveUnread: an entry not longer than above is not even
// read: a damaged one stays unnoticed (no corruption counted, no drop)
// until a lookup with a lower above reads it.
func TestCacheLookupAboveUnread(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	c, err := OpenCache(path, &CacheOptions{MaxBytes: 16 << 20, ChunkSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	model, long := []byte("model-a"), seq(0, 40)
	if err := c.Put(model, long[:30], bytes.Repeat([]byte("<blob 30>"), 2000)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	findAndFlip(t, path, []byte("<blob 30>"), 3)
	if c, err = OpenCache(path, &CacheOptions{MaxBytes: 16 << 20, ChunkSize: 4096}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n, ok := c.LookupFunc(model, long, 30, func(int, [][]byte) bool { return true }); ok || c.Stats().Corrupt != 0 {
		t.Fatalf("above 30: %d tokens %v, %d corrupt entries: the entry of 30 was read", n, ok, c.Stats().Corrupt)
	}
	if n, ok := c.LookupFunc(model, long, 29, func(int, [][]byte) bool { return true }); ok || c.Stats().Corrupt != 1 {
		t.Fatalf("above 29: %d tokens %v, %d corrupt entries, want the damaged entry read and dropped", n, ok, c.Stats().Corrupt)
	}
}

// TestCacheCompactBesideLookup: a compaction (a background snapshot's
// put makes room) copies the file beside lookups: a lookup made while
// the copy is under way answers at once rather than after the copy, and
// the compacted file holds what the old one did.
func TestCacheCompactBesideLookup(t *testing.T) {
	c, err := OpenCache(filepath.Join(t.TempDir(), "cache.db"), &CacheOptions{MaxBytes: 16 << 20, ChunkSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	model, long := []byte("model-a"), seq(0, 40)
	blob := bytes.Repeat([]byte("<blob 20>"), 3000)
	if err := c.Put(model, long[:20], blob); err != nil {
		t.Fatal(err)
	}
	looked := make(chan time.Duration, 1)
	c.copied = func() { // inside the compaction, between its copy and the swap
		go func() {
			t0 := time.Now()
			c.LookupFunc(model, long, 0, func(int, [][]byte) bool { return true })
			looked <- time.Since(t0)
		}()
		select {
		case d := <-looked:
			t.Logf("a lookup during the compaction's copy took %v", d)
		case <-time.After(10 * time.Second):
			t.Error("a lookup waited for the compaction's copy (10 s)")
		}
	}
	if err := c.Compact(); err != nil {
		t.Fatal(err)
	}
	c.copied = nil
	if n, got, ok := c.Lookup(model, long); !ok || n != 20 || !bytes.Equal(got, blob) {
		t.Errorf("after the compaction: %d tokens %v", n, ok)
	}
	if c.Stats().Compactions != 1 {
		t.Errorf("%d compactions, want 1", c.Stats().Compactions)
	}
}
