package engine

import (
	"regexp"
	"strings"

	"github.com/geisten/geist/engine/chat"
)

// haClock is the line Home Assistant 2025.4-2025.9 ended its system prompt
// with (helpers/llm.py; since 2025.10 a GetDateTime tool tells the time
// instead): "Current time is HH:MM:SS. Today's date is YYYY-MM-DD.". It is
// matched exactly, at the end of the system message, never guessed.
var haClock = regexp.MustCompile(`(?:^|\n|\s)(Current time is [0-2][0-9]:[0-5][0-9]:[0-5][0-9]\. Today's date is [0-9]{4}-[01][0-9]-[0-3][0-9]\.)\s*$`)

// stablePrefix moves the clock line of a system prompt (haClock) behind
// the tools and the history, to the end of the last user message, so that
// the prompt's long prefix (instructions, entities, tools) stays the same
// from one request to the next and the prompt cache serves it. The model
// then reads the time after the request's words instead of in the system
// prompt. Messages without the line are returned as they are; msgs itself
// is never modified.
func stablePrefix(msgs []chat.Message) []chat.Message {
	if len(msgs) == 0 || msgs[0].Role != "system" {
		return msgs
	}
	m := haClock.FindStringSubmatchIndex(msgs[0].Content)
	if m == nil {
		return msgs
	}
	clock := msgs[0].Content[m[2]:m[3]]
	out := append([]chat.Message(nil), msgs...)
	out[0].Content = strings.TrimRight(msgs[0].Content[:m[0]], " \t\n")
	for i := len(out) - 1; i > 0; i-- {
		if out[i].Role == "user" {
			out[i].Content = strings.TrimRight(out[i].Content, " \t\n") + "\n\n" + clock
			break
		}
	}
	return out
}
