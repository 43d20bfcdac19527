package engine

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/geisten/geist/engine/chat"
	"github.com/geisten/geist/storage"
)

// TestWarm: a fresh engine on the cache file of an earlier one restores
// its most recent prefix at Warm, read in place from the file
// (storage.Cache's LookupFunc); the first request then reuses the system
// prompt held in memory (nothing restored, nothing of it evaluated) and
// answers exactly as a cold engine does.
func TestWarm(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cache.db")
	open := func() *storage.Cache {
		c, err := storage.OpenCache(path, &storage.CacheOptions{MaxBytes: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	system := chat.Message{Role: "system", Content: "You are the house assistant. The kitchen lights are on, the garden lights are off and the front door is locked."}
	req := func(q string, out *[]int32) Request {
		return Request{Messages: []chat.Message{system, {Role: "user", Content: q}}, MaxTokens: 8, Sampling: greedy(),
			Spec: SpecOptions{Mode: SpecOff}, OnToken: func(id int32) { *out = append(*out, id) }}
	}
	var cold []int32
	e0 := load(t, "stories260K-Q4_0", Options{Ctx: 256})
	if _, err := e0.Generate(t.Context(), req("Is the door locked?", &cold)); err != nil {
		t.Fatal(err)
	}

	c1 := open()
	e1 := load(t, "stories260K-Q4_0", Options{Ctx: 256, Cache: c1})
	var first []int32
	if _, err := e1.Generate(t.Context(), req("Are the lights on?", &first)); err != nil {
		t.Fatal(err)
	}
	e1.Close()
	c1.Close()

	c2 := open()
	defer c2.Close()
	e2 := load(t, "stories260K-Q4_0", Options{Ctx: 256, Cache: c2})
	n, _ := e2.Warm()
	if n < minRestore || len(e2.State().Tokens()) != n {
		t.Fatalf("Warm restored %d tokens, the state holds %d", n, len(e2.State().Tokens()))
	}
	var got []int32
	r := req("Is the door locked?", &got)
	prompt, _ := e2.Tokens(&r)
	st, err := e2.Generate(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	if st.ReusedTokens < minRestore || st.RestoredTokens != 0 || st.EvaluatedTokens != len(prompt)-st.ReusedTokens {
		t.Errorf("after Warm: %d prompt tokens, %d reused, %d restored, %d evaluated", len(prompt), st.ReusedTokens, st.RestoredTokens, st.EvaluatedTokens)
	}
	if !slices.Equal(got, cold) {
		t.Errorf("after Warm\n got %v\nwant %v (cold)", got, cold)
	}
}
