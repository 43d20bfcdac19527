// Package appliancetest provides a scripted engine for tests of the
// appliance core and of its front ends: fast, deterministic, and
// controllable (slow, endless, failing) without a model.
package appliancetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/chat"
)

// Engine implements appliance.Engine. It answers " w0 w1 … wN-1." (Words
// words, 3 when zero), one word every Delay, with PromptTokens 3,
// GeneratedTokens Words and 100 tokens/s. The last message (or the raw
// prompt) steers it:
//
//	"long"             1000 words: runs until cancelled, in practice
//	containing TOOLONG engine.ErrPromptTooLong ("9999 tokens")
//	containing PANIC   a panic
//	containing FAIL    an error
//	containing STALL   the first word, then nothing until cancelled (a
//	                   generation that stopped making progress)
//	containing HANG    the first word, then nothing until Unhang, deaf
//	                   to its context (work that never looks at it)
//	containing PREFILL 20 prefill passes first, one every Delay (OnPrefill
//	                   64, 128, …; OnPromptProgress the same of 1280)
type Engine struct {
	Words int
	Delay time.Duration
	// Varied makes the statistics differ from answer to answer, as a
	// real engine's do (decode speed, prompt tokens and their reuse,
	// drafted and accepted tokens), for status pages and their charts.
	Varied bool
	// Script, if set, answers instead: the pieces it returns are streamed
	// one every Delay (a model's output with tool calls, say), each a
	// token (more than the request's MaxTokens are cut off, stop reason
	// "length"); it sees the request (messages, tools) as the engine would.
	Script func(req engine.Request) []string
	// Speculation, if its TargetPasses is set, gives every answer these
	// speculative decoding figures (passes, tree passes, drafted and
	// accepted tokens, the deepest accepted path, the drafters' counts).
	Speculation engine.Stats
	// Par is what Parallel reports: the requests the core runs at once
	// (0: 1, one at a time).
	Par int

	mu       sync.Mutex
	requests []engine.Request
	gate     chan struct{}
	answers  int
	hang     chan struct{}
}

// Parallel implements appliance.Paralleler.
func (e *Engine) Parallel() int { return max(e.Par, 1) }

// Unhang ends the HANG requests' wait (and the later ones').
func (e *Engine) Unhang() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hang == nil {
		e.hang = make(chan struct{})
	}
	select {
	case <-e.hang:
	default:
		close(e.hang)
	}
}

// Requests returns the requests generated so far, in order.
func (e *Engine) Requests() []engine.Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]engine.Request(nil), e.requests...)
}

// Hold makes the next generations wait before their first word until
// Release is called.
func (e *Engine) Hold() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gate == nil {
		e.gate = make(chan struct{})
	}
}

// Release lets held generations go on.
func (e *Engine) Release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gate != nil {
		close(e.gate)
		e.gate = nil
	}
}

// Prompt is the text that steers a request: the raw prompt or the last
// message.
func Prompt(req engine.Request) string {
	if len(req.Messages) > 0 {
		return req.Messages[len(req.Messages)-1].Content
	}
	return req.Prompt
}

// Generate implements appliance.Engine.
func (e *Engine) Generate(ctx context.Context, req engine.Request) (engine.Stats, error) {
	e.mu.Lock()
	e.requests = append(e.requests, req)
	gate := e.gate
	e.mu.Unlock()
	p := Prompt(req)
	switch {
	case strings.Contains(p, "TOOLONG"):
		return engine.Stats{PromptTokens: 9999}, fmt.Errorf("%w: 9999 tokens", engine.ErrPromptTooLong)
	case strings.Contains(p, "PANIC"):
		panic("appliancetest: asked to panic")
	case strings.Contains(p, "FAIL"):
		return engine.Stats{}, fmt.Errorf("appliancetest: asked to fail")
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return engine.Stats{}, ctx.Err()
		}
	}
	if e.Script != nil {
		pieces := e.Script(req)
		stop := "eos"
		if req.MaxTokens > 0 && len(pieces) > req.MaxTokens {
			pieces, stop = pieces[:req.MaxTokens], "length" // cut off, as the engine's token limit does
		}
		for i, p := range pieces {
			select {
			case <-ctx.Done():
				return engine.Stats{PromptTokens: 3, GeneratedTokens: i}, ctx.Err()
			case <-time.After(e.Delay):
			}
			if req.OnToken != nil {
				req.OnToken(int32(i)) // a piece is a token
			}
			if req.OnText != nil {
				if err := req.OnText([]byte(p)); errors.Is(err, engine.ErrStop) {
					return engine.Stats{PromptTokens: 3, GeneratedTokens: i + 1, DecodeTokS: 100, TTFTms: 1, StopReason: "stop"}, nil
				} else if err != nil {
					return engine.Stats{}, err
				}
			}
		}
		return engine.Stats{PromptTokens: 3, GeneratedTokens: len(pieces), DecodeTokS: 100, TTFTms: 1, StopReason: stop}, nil
	}
	words := e.Words
	if words == 0 {
		words = 3
	}
	n := words
	if p == "long" {
		n = 1000
	}
	if req.MaxTokens > 0 && n > req.MaxTokens {
		n = req.MaxTokens
	}
	if strings.Contains(p, "PREFILL") {
		for i := range 20 {
			select {
			case <-ctx.Done():
				return engine.Stats{PromptTokens: 3}, ctx.Err()
			case <-time.After(e.Delay):
			}
			if req.OnPrefill != nil {
				req.OnPrefill(64 * (i + 1))
			}
			if req.OnPromptProgress != nil {
				req.OnPromptProgress(64*(i+1), 64*20)
			}
		}
	}
	for i := range n {
		if i == 1 && strings.Contains(p, "STALL") {
			<-ctx.Done()
			return engine.Stats{PromptTokens: 3, GeneratedTokens: i}, ctx.Err()
		}
		if i == 1 && strings.Contains(p, "HANG") {
			e.mu.Lock()
			if e.hang == nil {
				e.hang = make(chan struct{})
			}
			h := e.hang
			e.mu.Unlock()
			<-h
			return engine.Stats{PromptTokens: 3, GeneratedTokens: i}, ctx.Err()
		}
		select {
		case <-ctx.Done():
			return engine.Stats{PromptTokens: 3, GeneratedTokens: i}, ctx.Err()
		case <-time.After(e.Delay):
		}
		if req.OnToken != nil {
			req.OnToken(int32(i))
		}
		d := fmt.Sprintf(" w%d", i)
		if i == n-1 {
			d += "."
		}
		if req.OnText != nil {
			if err := req.OnText([]byte(d)); err != nil {
				return engine.Stats{}, err
			}
		}
	}
	st := engine.Stats{PromptTokens: 3, GeneratedTokens: words, DecodeTokS: 100, StopReason: "eos"}
	if e.Varied {
		e.mu.Lock()
		e.answers++
		k := float64(e.answers)
		e.mu.Unlock()
		st.PromptTokens = 40 + 20*e.answers
		st.ReusedTokens = int(float64(st.PromptTokens) * (0.3 + 0.6*math.Abs(math.Sin(k))))
		st.RestoredTokens = st.ReusedTokens / 2
		st.EvaluatedTokens = st.PromptTokens - st.ReusedTokens
		st.DecodeTokS = 18 + 6*math.Sin(k/2)
		st.Drafted = words
		st.Accepted = int(float64(words) * (0.45 + 0.4*math.Abs(math.Cos(k/3))))
	}
	if sp := &e.Speculation; sp.TargetPasses > 0 {
		st.TargetPasses, st.TreePasses, st.Drafted, st.Accepted = sp.TargetPasses, sp.TreePasses, sp.Drafted, sp.Accepted
		st.MaxAcceptedDepth, st.Drafters = sp.MaxAcceptedDepth, sp.Drafters
	}
	return st, nil
}

// Thinker is a Script for a reasoning model whose template has no
// enable_thinking switch: it thinks first, whatever it is asked, in
// ThinkerPieces (a <think> block of 4 tokens, then 2 tokens of content:
// ThinkerContent).
func Thinker(engine.Request) []string { return ThinkerPieces }

// ThinkerPieces are Thinker's tokens; ThinkerThinking and ThinkerContent
// what the core makes of them.
var (
	ThinkerPieces   = []string{"<think>", "\nweigh the secret", " word", "\n</think>", "\n\nIt is four.", " Done."}
	ThinkerThinking = "\nweigh the secret word\n"
	ThinkerContent  = "It is four. Done."
)

// ToolCaller is a Script for a reasoning model offered a weather tool:
// asked anything, it thinks ("look it up"), says "Let me check." and
// calls get_weather for Paris in <tool_call> tags (8 tokens, 3 of them
// thinking); given a tool's result (the last message's role "tool"), it
// answers "It is 21 degrees.".
func ToolCaller(req engine.Request) []string {
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "tool" {
		return []string{"It is 21 degrees."}
	}
	return []string{"<think>", "look it up", "</think>", "Let me check.", "<tool_call>", `{"name": "get_weather", `, `"arguments": {"city": "Paris"}}`, "</tool_call>"}
}

// ModelID names the scripted model in prompt-cache keys.
func (e *Engine) ModelID() []byte { return []byte("appliancetest") }

// ConversationPrefix "tokenizes" msgs a byte a token: role, content and a
// separator each, as a chat template's render would begin.
func (e *Engine) ConversationPrefix(msgs []chat.Message) ([]int32, error) {
	var out []int32
	for _, m := range msgs {
		for _, b := range []byte(m.Role + ":" + m.Content + "\n") {
			out = append(out, int32(b))
		}
	}
	return out, nil
}
