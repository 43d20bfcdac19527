package engine

import (
	"testing"

	"github.com/geisten/geist/engine/chat"
)

func TestStablePrefix(t *testing.T) {
	const sys = "You are a voice assistant for Home Assistant.\nAnswer in plain text."
	ha := []chat.Message{{Role: "system", Content: sys + "\nCurrent time is 07:45:12. Today's date is 2025-06-03."},
		{Role: "user", Content: "turn on the kitchen light"}, {Role: "assistant", Content: "", ToolCalls: []chat.ToolCall{{Name: "HassTurnOn"}}},
		{Role: "tool", Content: `{"success":true}`}}
	got := stablePrefix(ha)
	if got[0].Content != sys || got[1].Content != "turn on the kitchen light\n\nCurrent time is 07:45:12. Today's date is 2025-06-03." || got[3].Content != ha[3].Content {
		t.Errorf("moved: %q / %q", got[0].Content, got[1].Content)
	}
	if ha[0].Content == sys {
		t.Error("the caller's messages were modified")
	}
	// Not Home Assistant's exact form: left alone.
	for _, s := range []string{sys + "\nCurrent time is 7:45. Today's date is 2025-06-03.", sys + "\nCurrent time is 07:45:12. Today's date is 2025-06-03. Be brief.", sys} {
		msgs := []chat.Message{{Role: "system", Content: s}, {Role: "user", Content: "hi"}}
		if out := stablePrefix(msgs); out[0].Content != s || out[1].Content != "hi" {
			t.Errorf("%q changed to %q / %q", s, out[0].Content, out[1].Content)
		}
	}
}

// TestStablePrefixReuse: with StablePrefix two requests whose clock lines
// differ share the system prompt's tokens; without it they part at the
// clock.
func TestStablePrefixReuse(t *testing.T) {
	const sys = "You are a voice assistant. The kitchen lights are on and the front door is locked. Answer briefly."
	ask := func(e *Engine, clock string) Stats {
		req := Request{Messages: []chat.Message{{Role: "system", Content: sys + "\nCurrent time is " + clock + ". Today's date is 2025-06-03."},
			{Role: "user", Content: "Is the door locked?"}}, MaxTokens: 1, Sampling: greedy(), Spec: SpecOptions{Mode: SpecOff}}
		st, err := e.Generate(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	var reused [2]int
	for i, stable := range []bool{false, true} {
		e := load(t, "stories260K-Q4_0", Options{Ctx: 256, StablePrefix: stable})
		ask(e, "07:45:12")
		reused[i] = ask(e, "07:46:40").ReusedTokens
	}
	// Stable, the reuse runs through the system prompt's date and the
	// question to the clock's minutes, now at the end.
	question := len(load(t, "stories260K-Q4_0", Options{Ctx: 256}).encode("Is the door locked?"))
	if reused[1] < reused[0]+question {
		t.Errorf("reused %d tokens with stable_prefix, %d without (the question is %d)", reused[1], reused[0], question)
	}
}
