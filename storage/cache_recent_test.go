package storage

import (
	"path/filepath"
	"slices"
	"testing"
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
	if n, ok := c.LookupFunc(model, []int32{1, 2, 3, 4, 0}, func(_ int, blob [][]byte) bool { pieces = len(blob); return true }); n != 4 || !ok || pieces != 3 {
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
