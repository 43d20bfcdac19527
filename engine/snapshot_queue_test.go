package engine

import (
	"slices"
	"sync"
	"testing"

	"github.com/geisten/geist/engine/chat"
)

// slowCache is a memCache whose Put waits for a signal on gate: a store
// slower than the requests that fill it (a loaded machine, a slow card).
type slowCache struct {
	memCache
	gate chan struct{}
}

func (c *slowCache) Put(model []byte, toks []int32, blob []byte) error {
	<-c.gate
	return c.memCache.Put(model, toks, blob)
}

// TestSnapshotQueue: a snapshot taken while a write is still running is
// queued, not dropped. The first request of a new system prompt stores
// the system prompt's prefix and, right after it, the whole conversation:
// behind a slow store the conversation's snapshot was lost (only the
// system prompt's entry reached the cache). Of several snapshots taken
// while a write runs, the newest is kept (one pending buffer).
func TestSnapshotQueue(t *testing.T) {
	cache := &slowCache{gate: make(chan struct{})}
	e := load(t, "stories260K-Q4_0", Options{Ctx: 512, Cache: cache})
	var open sync.Once
	release := func() { open.Do(func() { close(cache.gate) }) }
	t.Cleanup(release) // before the engine's Close, which waits for the writes
	system := chat.Message{Role: "system", Content: "You are the house assistant. You answer briefly. The kitchen lights are on and the garden lights are off."}
	turn := func(user string) []int32 {
		r := Request{Messages: []chat.Message{system, {Role: "user", Content: user}}, MaxTokens: 6, Sampling: greedy()}
		if _, err := e.Generate(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		return slices.Clone(e.State().Tokens())
	}
	first := turn("Are the garden lights on?")
	// The system prompt's write waits at the gate; the conversation's
	// snapshot is pending. Two more conversations while it waits: each
	// replaces the pending one (their system prefix is being written).
	turn("Is the front door locked?")
	last := turn("Is the heating on?")
	release()
	e.waitSnapshots()
	sys, err := e.ConversationPrefix([]chat.Message{system})
	if err != nil {
		t.Fatal(err)
	}
	var got [][]int32
	for _, en := range cache.entries {
		got = append(got, en.toks)
	}
	if len(got) != 2 {
		t.Fatalf("%d entries stored (lengths %v), want 2: the system prompt's and the newest conversation's", len(got), lens(got))
	}
	if n := len(got[0]); n > len(sys)+1 || !slices.Equal(got[0], first[:n]) {
		t.Errorf("first entry: %d tokens, want the system prompt's prefix (%d)", n, len(sys))
	}
	if !slices.Equal(got[1], last) {
		t.Errorf("second entry: %d tokens, want the newest conversation (%d tokens)", len(got[1]), len(last))
	}
	// Nothing is pending or running, and a stored prefix is not stored
	// again.
	turn("Is the window open?")
	e.waitSnapshots()
	if len(cache.entries) != 3 {
		t.Errorf("%d entries after another turn, want 3 (its conversation only)", len(cache.entries))
	}
}

func lens(s [][]int32) []int {
	var n []int
	for _, t := range s {
		n = append(n, len(t))
	}
	return n
}
