package appliance

import (
	"cmp"
	"context"

	"github.com/geisten/geist/engine/constraint"
	"maps"
	"strings"
	"time"

	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/chat"
)

// generate runs j on eng: the session's history and the request rendered
// through the model's chat template (the engine leaves out the oldest
// history when the prompt is too long, rendering and tokenizing once when
// it fits), the answer streamed to the sink, the exchange saved to the
// session.
func (c *Core) generate(eng Engine, j *job) (Outcome, error) {
	r := &j.req
	ereq := engine.Request{
		MaxTokens:       r.MaxTokens,
		NumCtx:          r.NumCtx,
		MaxPromptTokens: c.cfg.Limits.MaxPromptTokens,
		Sampling:        j.params,
		Stop:            r.Stop,
	}
	if j.con != nil {
		ereq.Grammar, ereq.GrammarTrigger, ereq.Parsed = j.con.Source, j.con.Trigger, j.con.Grammar
	}
	var turn []Message
	var conv *Conversation
	if r.Raw {
		ereq.Prompt = r.Text
	} else {
		system := r.System
		turn = r.Messages
		if len(turn) == 0 {
			turn = []Message{{Role: "user", Content: r.Text}}
		}
		if turn[0].Role == "system" {
			system, turn = turn[0].Content, turn[1:]
		}
		var err error
		if conv, err = OpenConversation(c.sessions, r.Session, system, c.cfg.System); err != nil {
			why := storageProblem(err)
			c.log.Error("reading the session failed", "session", r.Session, "err", err)
			c.storageFailed("reading a conversation failed: " + why)
			return Outcome{}, errorf(CodeInternal, "the conversation's history could not be read: %s", why)
		}
		ereq.Messages, ereq.History = conv.Messages(turn, r.History)
		ereq.Tools, ereq.TemplateVars = r.Tools, thinkingVars(r.TemplateVars, c.thinks(r))
		// A thinking model thinks before a constrained answer too.
		ereq.GrammarAfterThink = c.thinks(r)
	}
	// The answer is shaped here once for every front end: a leading
	// thinking block is split from the content (think off, a template
	// without enable_thinking may still think: it is kept, not shown).
	// With tools offered, the calls are parsed out of the content (the
	// template's form of them, chat.ToolParser); the session keeps the
	// content as the model wrote it, calls included, for the template
	// to render again.
	ans := NewAnswerSplit(c.cfg.ThinkMarks)
	var content, thinking, written strings.Builder
	var calls []ToolCall
	var tools *chat.ToolParser
	if len(r.Tools) > 0 && !r.Raw {
		tools = chat.NewToolParser(c.cfg.ToolFormat, chat.ToolNames(r.Tools))
		tools.Schemas(r.Tools)
		if r.OneToolCall {
			tools.FirstOnly()
		}
	}
	ereq.OnToken = func(id int32) {
		ans.Token(id)
		j.progress.token()
	}
	ereq.OnPromptProgress = func(done, total int) {
		j.progress.prompt(done, total)
		c.emit(Event{Kind: EventChanged}) // the State's running job shows it (MQTT's state, the status page)
		if r.OnPromptProgress != nil {
			r.OnPromptProgress(done, total)
		}
	}
	cut := false // the answer was cut off by its token limit or the context
	deliver := func(p Piece, final bool) {
		written.WriteString(p.Content)
		if tools != nil {
			p.Content, p.Calls = parseCalls(tools, p.Content, final, cut)
			calls = append(calls, p.Calls...)
		}
		content.WriteString(p.Content)
		thinking.WriteString(p.Thinking)
		if j.sink != nil && (p.Content != "" || p.Thinking != "" || len(p.Calls) > 0) {
			j.sink(p)
		}
	}
	ereq.OnText = func(b []byte) error {
		// A cancelled request stops at the next piece, also inside a
		// speculative step that accepted several drafted tokens (the
		// engine looks at ctx once per step): nothing more reaches the
		// sink once Cancel returned.
		if err := j.ctx.Err(); err != nil {
			return err
		}
		th, co := ans.Text(string(b))
		j.progress.thinking.Store(ans.InBlock())
		deliver(Piece{Content: co, Thinking: th}, false)
		if tools != nil && tools.Done() {
			return engine.ErrStop // the one call asked for is complete (OneToolCall)
		}
		return nil
	}
	start := time.Now()
	st, err := eng.Generate(j.ctx, ereq)
	if j.ctx.Err() == nil {
		// A call the limit cut off is dropped, not returned as markup;
		// the calls complete before it are kept.
		cut = err == nil && (st.StopReason == "length" || st.StopReason == "context")
		th, co := ans.Flush() // what was held back
		deliver(Piece{Content: co, Thinking: th}, true)
	}
	o := Outcome{Text: content.String(), Thinking: thinking.String(), Calls: calls, Usage: usage(st, start.Sub(j.queued), time.Since(start))}
	o.Usage.ThinkingTokens = min(ans.ThinkingTokens(), o.Usage.GeneratedTokens)
	if err != nil {
		return o, err
	}
	var check func([]byte) error
	if j.con != nil {
		check = j.con.Check
	}
	for _, check := range []func([]byte) error{check, r.Check} {
		if check == nil {
			continue
		}
		if err := check([]byte(o.Text)); err != nil {
			c.log.Warn("the answer fails its schema's check", "err", err)
			return o, errorf(CodeInternal, "the answer does not satisfy the schema: %v", err)
		}
	}
	if r.Session != "" && !r.Raw {
		answer := Message{Role: "assistant", Content: written.String(), Tokens: ans.ContentTokens()}
		if err := conv.Save(turn, answer); err != nil {
			// The answer is generated: deliver it, and say that the
			// conversation will not remember it. The error itself (with
			// the file's path) goes to the log only.
			why := storageProblem(err)
			c.log.Error("saving the session failed; the answer is delivered but not remembered", "session", r.Session, "err", err)
			o.Warning = errorf(CodeNotSaved, "the answer was not saved to the conversation: %s", why)
			c.storageFailed("the last session save failed: " + why)
		} else {
			c.storageFailed("")
		}
	}
	return o, nil
}

// parseCalls takes the next piece of content through p: the content
// that is not a call, and the calls it completed (at the end, final,
// what p held back; cut: the answer was cut off, chat.ToolParser.Cut).
func parseCalls(p *chat.ToolParser, text string, final, cut bool) (string, []ToolCall) {
	var parsed []chat.ToolCall
	if text != "" {
		text, parsed = p.Add(text)
	}
	if final {
		end := p.Flush
		if cut {
			end = p.Cut
		}
		rest, more := end()
		text, parsed = text+rest, append(parsed, more...)
	}
	var out []ToolCall
	for _, c := range parsed {
		out = append(out, ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	return text, out
}

// thinkingVars are the template variables with enable_thinking false
// when the request does not think (and does not set it itself).
func thinkingVars(vars map[string]any, think bool) map[string]any {
	if _, set := vars["enable_thinking"]; think || set {
		return vars
	}
	out := make(map[string]any, len(vars)+1)
	maps.Copy(out, vars)
	out["enable_thinking"] = false
	return out
}

func usage(st engine.Stats, queued, took time.Duration) Usage {
	u := Usage{
		PromptTokens: st.PromptTokens, GeneratedTokens: st.GeneratedTokens, CachedTokens: st.ReusedTokens, RestoredTokens: st.RestoredTokens,
		DroppedTurns: st.DroppedTurns, StopReason: st.StopReason, Queued: queued,
		TTFT: time.Duration(st.TTFTms * float64(time.Millisecond)), Duration: took,
		PrefillTokS: st.PrefillTokS, TokS: st.DecodeTokS, Drafted: st.Drafted, Accepted: st.Accepted,
		TargetPasses: st.TargetPasses, TreePasses: st.TreePasses, MaxAcceptedDepth: st.MaxAcceptedDepth,
	}
	if len(st.Drafters) > 0 {
		u.Drafters = make(map[string]DrafterUsage, len(st.Drafters))
		for k, d := range st.Drafters {
			u.Drafters[k] = DrafterUsage{Drafted: d.Drafted, Accepted: d.Accepted, Steps: d.Steps}
		}
	}
	return u
}

// compile compiles r's Constraint for the model's dialect, on the
// caller's goroutine (never the worker's), bounded by the grammar
// package's budgets and ended by ctx or the request's TTL: what cannot
// be enforced is refused before the request is queued.
func (c *Core) compile(ctx context.Context, r *Request) (*constraint.Compiled, *Error) {
	if r.Constraint.Empty() {
		return nil, nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if ttl := cmp.Or(r.TTL, c.cfg.Limits.DefaultTTL); ttl > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ttl)
		defer cancel()
	}
	con, err := r.Constraint.Compile(ctx, c.cfg.ToolFormat)
	if err != nil {
		return nil, errorf(CodeBadRequest, "%v", err)
	}
	return con, nil
}
