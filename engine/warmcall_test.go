package engine

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/geisten/geist/engine/chat"
	"github.com/geisten/geist/storage"
)

// stuckCache is a storage.Cache whose snapshot writes stop in the middle
// (between two of their transactions, the cache's writer lock held) until
// gate is closed, and which records the above of every in-place lookup.
type stuckCache struct {
	*storage.Cache
	gate    chan struct{}
	stuck   chan struct{} // closed when a write has stopped
	once    sync.Once
	mu      sync.Mutex
	lookups []int // above of each LookupFunc
}

func (c *stuckCache) PutPaused(model []byte, toks []int32, blob []byte, pause func()) error {
	calls := 0
	return c.Cache.PutPaused(model, toks, blob, func() {
		pause()
		if calls++; calls == 3 { // the eviction and one part of the blob written
			c.once.Do(func() { close(c.stuck) })
			<-c.gate
		}
	})
}

func (c *stuckCache) LookupFunc(model []byte, toks []int32, above int, use func(int, [][]byte) bool) (int, bool) {
	c.mu.Lock()
	c.lookups = append(c.lookups, above)
	c.mu.Unlock()
	return c.Cache.LookupFunc(model, toks, above, use)
}

func (c *stuckCache) takeLookups() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.lookups
	c.lookups = nil
	return l
}

// TestRequestBesideSnapshotWrite: the warm call of a voice turn. A
// request runs to its end while the previous request's snapshot write
// is stuck in the middle (the store's writer lock held); its lookup asks
// only for prefixes longer than what memory holds (the stored system
// prompt, which memory holds, is not read: TestCacheLookupAboveUnread),
// and a request whose prompt memory holds all but a few tokens of does
// not look the store up at all.
func TestRequestBesideSnapshotWrite(t *testing.T) {
	sc, err := storage.OpenCache(filepath.Join(t.TempDir(), "cache.db"), &storage.CacheOptions{MaxBytes: 1 << 20, ChunkSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	cache := &stuckCache{Cache: sc, gate: make(chan struct{}), stuck: make(chan struct{})}
	e := load(t, "stories260K-Q4_0", Options{Ctx: 512, Cache: cache})
	var open sync.Once
	release := func() { open.Do(func() { close(cache.gate) }) }
	t.Cleanup(release) // before the engine's Close, which waits for the writes
	system := chat.Message{Role: "system", Content: strings.Repeat("You are the house assistant. The kitchen lights are on and the garden lights are off. ", 4)}
	turn := func(user string) Stats {
		t.Helper()
		r := Request{Messages: []chat.Message{system, {Role: "user", Content: user}}, MaxTokens: 6, Sampling: greedy(), Spec: SpecOptions{Mode: SpecOff}}
		done := make(chan struct{})
		var st Stats
		go func() {
			defer close(done)
			st, err = e.Generate(t.Context(), r)
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			release()
			<-done
			t.Fatalf("a request waited for the snapshot write (20 s)")
		}
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	turn("Are the garden lights on?")
	select {
	case <-cache.stuck:
	case <-time.After(20 * time.Second):
		t.Fatal("the snapshot write did not start")
	}
	cache.takeLookups()
	st := turn("Is the front door locked?") // the warm call, beside the stuck write
	lk := cache.takeLookups()
	select {
	case <-cache.gate:
		t.Fatal("the write was released before the request ended")
	default:
	}
	release()
	sys, err := e.ConversationPrefix([]chat.Message{system}) // waits for the writes
	if err != nil {
		t.Fatal(err)
	}
	if st.ReusedTokens < len(sys)-1 || len(lk) != 1 || lk[0] < st.ReusedTokens {
		t.Errorf("warm call beside a stuck write: reused %d (system prompt %d tokens), lookups above %v", st.ReusedTokens, len(sys), lk)
	}
	// Memory holds the whole prompt but its last token: no lookup.
	turn("Is the front door locked?")
	if lk := cache.takeLookups(); len(lk) != 0 {
		t.Errorf("a prompt memory holds was looked up in the store (above %v)", lk)
	}
}
