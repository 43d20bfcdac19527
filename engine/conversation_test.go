package engine

import (
	"bytes"
	"slices"
	"testing"

	"github.com/geisten/geist/engine/chat"
)

// TestConversationPrefix: every prompt-cache entry a conversation leaves
// (its first exchange and the next one) begins with the prefix of its
// first turn; the system prompt's own entry, shared with every other
// conversation, does not.
func TestConversationPrefix(t *testing.T) {
	for _, name := range []string{"stories260K-Q4_0", "tiny-qwen2-Q4_0"} {
		t.Run(name, func(t *testing.T) {
			if testing.Short() && name != "stories260K-Q4_0" {
				t.Skip("-short: one model")
			}
			cache := &memCache{}
			e := load(t, name, Options{Ctx: 512, Cache: cache})
			system := chat.Message{Role: "system", Content: "You are the house assistant. You answer briefly. The kitchen lights are on and the garden lights are off."}
			first := chat.Message{Role: "user", Content: "Are the garden lights on? Please tell me in one short sentence."}
			msgs := []chat.Message{system, first}
			var answer bytes.Buffer
			r := Request{Messages: msgs, MaxTokens: 12, Sampling: greedy(), OnText: func(b []byte) error { answer.Write(b); return nil }}
			if _, err := e.Generate(t.Context(), r); err != nil {
				t.Fatal(err)
			}
			// Wait for the writes: the conversation's snapshot, queued
			// behind the system prompt's, would otherwise be replaced by
			// the next turn's (the snapshotter keeps one pending).
			e.waitSnapshots()
			msgs = append(msgs, chat.Message{Role: "assistant", Content: answer.String()},
				chat.Message{Role: "user", Content: "And the kitchen lights, are they still on right now?"})
			r = Request{Messages: msgs, History: 3, MaxTokens: 8, Sampling: greedy()}
			if _, err := e.Generate(t.Context(), r); err != nil {
				t.Fatal(err)
			}
			e.waitSnapshots()
			prefix, err := e.ConversationPrefix([]chat.Message{system, first})
			if err != nil {
				t.Fatal(err)
			}
			sys, _ := e.ConversationPrefix([]chat.Message{system})
			cache.mu.Lock()
			defer cache.mu.Unlock()
			var conv, shared int
			for _, en := range cache.entries {
				if !bytes.Equal(en.model, e.ModelID()) {
					t.Errorf("entry filed under another model id")
				}
				switch {
				case len(en.toks) >= len(prefix) && slices.Equal(en.toks[:len(prefix)], prefix):
					conv++
				case len(en.toks) <= len(sys)+1:
					shared++ // the system prompt alone
				default:
					t.Errorf("entry of %d tokens starts neither with the conversation (%d) nor is the system prompt (%d)", len(en.toks), len(prefix), len(sys))
				}
			}
			t.Logf("%d entries: %d of the conversation, %d of the system prompt; prefix %d tokens", len(cache.entries), conv, shared, len(prefix))
			if conv == 0 {
				t.Error("no entry of the conversation found by its prefix")
			}
		})
	}
}
