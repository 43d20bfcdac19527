package storage

import "testing"

// TestCacheDrop: Drop evicts exactly the entry of its tokens (the next
// lookup finds the shorter prefix), frees its bytes, and is a no-op for
// prefixes not stored, another model, or no tokens.
func TestCacheDrop(t *testing.T) {
	c, _ := testCache(t, &CacheOptions{MaxBytes: 8 << 20, ChunkSize: 4096})
	base := seq(100, 40)
	for _, n := range []int{10, 20} {
		if err := c.Put(modelA, base[:n], blobFor(base[:n], 1, 20000)); err != nil {
			t.Fatal(err)
		}
	}
	live := c.Stats().LiveBytes
	if c.Drop(modelB, base[:20]) || c.Drop(modelA, base[:15]) || c.Drop(modelA, nil) {
		t.Fatal("dropped an entry not stored")
	}
	if !c.Drop(modelA, base[:20]) {
		t.Fatal("the entry of 20 tokens was not dropped")
	}
	if c.Drop(modelA, base[:20]) {
		t.Fatal("dropped twice")
	}
	if n, _, ok := c.Lookup(modelA, base); !ok || n != 10 {
		t.Errorf("after the drop: hit %d (%v), want the 10-token prefix", n, ok)
	}
	if st := c.Stats(); st.Entries != 1 || st.LiveBytes >= live {
		t.Errorf("after the drop: %+v (live bytes were %d)", st, live)
	}
}
