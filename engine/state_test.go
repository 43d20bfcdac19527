package engine

import (
	"slices"
	"testing"

	"github.com/geisten/geist/engine/chat"
)

// TestStateOwnsTokens: the engine keeps no copy of the tokens in the KV
// cache: after generation, a prompt-cache restore or a reset, the
// state's token list is exactly what its cache holds.
func TestStateOwnsTokens(t *testing.T) {
	cache := &memCache{}
	e := load(t, "stories260K-Q4_0", Options{Ctx: 512, Cache: cache})
	system := chat.Message{Role: "system", Content: "You are a storyteller. You tell short stories about Lily and her dog."}
	var out []int32
	req := Request{Messages: []chat.Message{system, {Role: "user", Content: "A story?"}}, MaxTokens: 12,
		Sampling: greedy(), OnToken: func(id int32) { out = append(out, id) }}
	prompt, _ := e.Tokens(&req)
	st, err := e.Generate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	// The state holds the prompt and every generated token but the last
	// (it was sampled, never fed back).
	got := e.State().Tokens()
	if wantLen := len(prompt) + st.GeneratedTokens - 1; len(got) != wantLen || !slices.Equal(got[:len(prompt)], prompt) || !slices.Equal(got[len(prompt):], out[:len(out)-1]) {
		t.Errorf("state tokens %v, want the prompt %v and %v", got, prompt, out[:len(out)-1])
	}
	e.waitSnapshots()
	// Another engine restores the system prompt's prefix from the cache:
	// its tokens come with it.
	f := load(t, "stories260K-Q4_0", Options{Ctx: 512, Cache: cache})
	req = Request{Messages: []chat.Message{system, {Role: "user", Content: "Another one?"}}, MaxTokens: 1, Sampling: greedy()}
	prompt, _ = f.Tokens(&req)
	if st, err = f.Generate(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if n := st.ReusedTokens; n < minRestore || !slices.Equal(f.State().Tokens(), prompt) {
		t.Errorf("restored %d tokens; state tokens %v, prompt %v", n, f.State().Tokens(), prompt)
	}
	if st.RestoredTokens != st.ReusedTokens || st.EvaluatedTokens != len(prompt)-st.ReusedTokens {
		t.Errorf("fresh engine: %d prompt tokens, %d reused, %d restored, %d evaluated", len(prompt), st.ReusedTokens, st.RestoredTokens, st.EvaluatedTokens)
	}
	// The same conversation continued: its prefix is held in memory,
	// nothing restored.
	req = Request{Messages: []chat.Message{system, {Role: "user", Content: "Another one?"}, {Role: "assistant", Content: "Yes."}, {Role: "user", Content: "More?"}}, MaxTokens: 1, Sampling: greedy()}
	prompt, _ = f.Tokens(&req)
	if st, err = f.Generate(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if st.ReusedTokens < minRestore || st.RestoredTokens != 0 || st.EvaluatedTokens != len(prompt)-st.ReusedTokens {
		t.Errorf("held in memory: %d prompt tokens, %d reused, %d restored, %d evaluated", len(prompt), st.ReusedTokens, st.RestoredTokens, st.EvaluatedTokens)
	}
	f.Reset()
	if len(f.State().Tokens()) != 0 {
		t.Errorf("after Reset: %v", f.State().Tokens())
	}
}
