package engine

import (
	"bytes"
	"slices"
	"testing"

	"github.com/geisten/geist/engine/chat"
)

// dropCache is a memCache that can evict (PromptCacheDropper) and counts
// its evictions.
type dropCache struct {
	memCache
	drops int
}

func (c *dropCache) Drop(model []byte, toks []int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.entries)
	c.entries = slices.DeleteFunc(c.entries, func(en memEntry) bool { return bytes.Equal(en.model, model) && slices.Equal(en.toks, toks) })
	c.drops += n - len(c.entries)
	return len(c.entries) < n
}

// TestPromptCacheEvictsUnusable: an entry the state refuses to restore (a
// blob of the right model and tokens but the wrong size) is evicted at
// the first restore that refuses it; the answer equals the cold run's,
// and the prefix, recomputed, is stored anew and restored by the next
// process instead of being refused again.
func TestPromptCacheEvictsUnusable(t *testing.T) {
	const path = "tiny-qwen2-Q4_0"
	system := "You are the house assistant. You answer briefly. The kitchen lights are on, the garden lights are off and the front door is locked."
	req := func() Request {
		return Request{Messages: []chat.Message{{Role: "system", Content: system}, {Role: "user", Content: "Are the garden lights on?"}},
			MaxTokens: 12, Sampling: greedy(), Spec: SpecOptions{Mode: SpecOff}}
	}
	gen := func(e *Engine) ([]int32, Stats) {
		t.Helper()
		r := req()
		var ids []int32
		r.OnToken = func(id int32) { ids = append(ids, id) }
		st, err := e.Generate(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		return ids, st
	}
	cold, _ := gen(load(t, path, Options{Ctx: 512, Batch: 32}))

	cache := &dropCache{}
	e1 := load(t, path, Options{Ctx: 512, Batch: 32, Cache: cache})
	gen(e1)
	e1.Close()
	if len(cache.entries) == 0 {
		t.Fatal("nothing stored")
	}
	for i := range cache.entries { // damaged: one byte short
		cache.entries[i].blob = cache.entries[i].blob[:len(cache.entries[i].blob)-1]
	}
	damaged := len(cache.entries)
	e2 := load(t, path, Options{Ctx: 512, Batch: 32, Cache: cache})
	ids, st := gen(e2)
	e2.Close()
	if st.RestoredTokens != 0 || !slices.Equal(ids, cold) {
		t.Errorf("after an unusable entry: restored %d, answer %v, want 0 and the cold %v", st.RestoredTokens, ids, cold)
	}
	if cache.drops == 0 || cache.drops > damaged {
		t.Errorf("%d entries evicted of %d damaged", cache.drops, damaged)
	}
	e3 := load(t, path, Options{Ctx: 512, Batch: 32, Cache: cache})
	ids, st = gen(e3)
	if st.RestoredTokens == 0 || !slices.Equal(ids, cold) {
		t.Errorf("the next process: restored %d, answer %v, want a restore and the cold %v", st.RestoredTokens, ids, cold)
	}
}
