package engine

import (
	"bytes"
	"context"
	"fmt"
	"math"

	"github.com/geisten/geist/engine/chat"
	"github.com/geisten/geist/engine/grammar"
	"github.com/geisten/geist/engine/spec"
)

// Constrained decoding.
//
// A request with a Grammar samples every token from the logits with the
// tokens the grammar forbids masked out (set to -Inf before penalties,
// top-k, top-p, min-p and temperature, so the sampler draws from the
// masked distribution), and end-of-generation is allowed only where the
// grammar may end. A lazy grammar (GrammarTrigger) applies from the end
// of the trigger text on: the model writes freely up to it.
//
// Speculation stays exact: the walk over a verified tree samples each
// token from the masked logits of exactly the tokens emitted before it,
// as plain constrained decoding does. Drafted tokens the grammar forbids
// are pruned before the pass (they could never be accepted), and where
// the grammar forces the next bytes (keys, punctuation), the grammar
// drafts their tokens itself.

// grammarVocab returns the grammar view of the vocabulary, built once.
func (e *Engine) grammarVocab() *grammar.Vocab {
	if e.gvocab != nil {
		return e.gvocab
	}
	n := e.model.NVocab
	pieces := make([][]byte, n)
	var eog []int32
	for id := int32(0); id < int32(n); id++ {
		if int(id) >= e.tok.NTokens() {
			continue
		}
		if e.tok.IsEOG(id) {
			eog = append(eog, id)
			continue
		}
		pieces[id] = e.tok.TokenToPiece(id, false)
	}
	e.gvocab = grammar.NewVocab(pieces, eog)
	return e.gvocab
}

// CompileGrammar compiles GBNF text for this model's vocabulary (cached
// by the source's hash).
func (e *Engine) CompileGrammar(src string) (*grammar.Compiled, error) {
	return e.grammarVocab().Compile(src)
}

// Phases of a constraint.
const (
	phActive   = iota // the grammar applies
	phOpening         // a thinking block may open: its opening or the grammar's first bytes
	phThinking        // inside the thinking block: free text up to its end
	phWaiting         // lazy: free text up to the trigger
)

// thinkOpen opens a <think> block, which a vocabulary may have as a token
// of its own.
const thinkOpen = "<think>"

// openingBlank bounds the blank space a constrained answer may open with
// before its thinking block, where the grammar itself does not allow it:
// <think> opens after fewer bytes of it, and at openingBlank the opening
// is over and the grammar applies (its text follows the blank space the
// grammar did not read). Thinking models write <think> first, a blank
// line or two at most; without the bound a model that writes white space
// wrote it to max tokens, never the forced answer (stories260K under
// Granite 3.3's template, whose <think> makes it a thinking model, with
// tool_choice required). llama.cpp forces such an answer's grammar from
// its first token, no thinking block before it unless the template
// opened one, and bounds white space by its rules (space: one blank, or
// one or two newlines and 20 blanks).
const openingBlank = 8

// constraint is a generation's grammar state.
type constraint struct {
	m     *grammar.Matcher
	v     *grammar.Vocab
	phase int
	// lazy: the grammar applies from the end of trigger on, and where it
	// may end, a token it does not allow ends it: the model writes free
	// text again (and the trigger starts it once more).
	lazy    bool
	trigger []byte
	// open and close are the texts around the model's thinking block
	// (its template's chat.Template.ThinkMarks: <think> and </think>, or
	// Gemma 4's <|channel>thought\n and <channel|>).
	open, close []byte
	tail        []byte // the generated text's end, to find the trigger (or, opening, the beginning of <think> so far)
	rest        []byte // what follows a trigger in its token
	gramOK      bool   // opening: the grammar allowed every token so far (blank space it did not read aside)
	blank       int    // opening: the bytes of blank space before tail
	// The opening's text is held back until it is known whose it is:
	// all of it goes out if a thinking block opens, only what the
	// grammar read (heldRead) if the grammar applies, so that no byte
	// the grammar forbids is delivered (the blank space before a
	// <think> that did not come). readLast: the grammar read the last
	// token.
	held, heldRead []byte
	readLast       bool
	err            error // the grammar refused a token it allowed: the generation ends
	mask           []uint64
	masked         []float32 // [NVocab] the logits with the mask applied
	forced         []byte
	path           []int32
	draft          []int32
}

func (e *Engine) newConstraint(req *Request, prompt []int32) (*constraint, error) {
	var c *grammar.Compiled
	switch {
	case req.Parsed != nil:
		// Compiled before the request was queued (engine/constraint, on
		// the request's goroutine): bound to the vocabulary, not parsed
		// again.
		c = e.grammarVocab().BindCached(req.Parsed)
	case req.Grammar != "":
		// Text: the compile is bounded and the request's context ends it.
		ctx := req.ctx
		if ctx == nil {
			ctx = context.Background()
		}
		var err error
		if c, err = e.grammarVocab().CompileContext(ctx, req.Grammar); err != nil {
			return nil, err
		}
	default:
		return nil, nil
	}
	nv := e.model.NVocab
	k := &constraint{m: c.NewMatcher(), v: c.Vocab(), lazy: req.GrammarTrigger != "", trigger: []byte(req.GrammarTrigger),
		mask: make([]uint64, (nv+63)/64), masked: make([]float32, nv),
		forced: make([]byte, 0, 64), path: make([]int32, 0, spec.MaxTree), draft: make([]int32, 0, spec.MaxDraft)}
	marks := e.Template().ThinkMarks()
	k.open, k.close = []byte(marks.Open), []byte(marks.Close)
	k.tail = make([]byte, 0, max(len(k.trigger), len(k.close))+64)
	k.rest = make([]byte, 0, 64)
	k.held, k.heldRead = make([]byte, 0, 64), make([]byte, 0, 64)
	switch {
	case req.GrammarAfterThink && e.thinksInPrompt(prompt):
		k.phase = phThinking
	case req.GrammarAfterThink && e.thinks() && !e.thoughtInPrompt(prompt):
		k.phase, k.gramOK = phOpening, true
	case k.lazy:
		k.phase = phWaiting
	}
	return k, nil
}

// thinks reports whether the model thinks first: its template has a
// thinking switch or thinking blocks (<think>, or Gemma 4's thought
// channel, whose control tokens the engine renders in generated text:
// chat.Template.ThinkTokens), or its vocabulary has <think> as a token of
// its own (Qwen3, SmolLM3, DeepSeek-R1's).
func (e *Engine) thinks() bool {
	if _, ok := e.tok.TokenID(thinkOpen); ok && e.Template().ThinkMarks() == chat.ThinkTags {
		return true
	}
	return e.Template().SupportsThinking()
}

// thinksInPrompt reports whether the prompt ends inside an open thinking
// block (a template that opens it for the model).
func (e *Engine) thinksInPrompt(prompt []int32) bool {
	tail, marks := e.promptTail(prompt), e.Template().ThinkMarks()
	return bytes.LastIndex(tail, []byte(marks.Open)) > bytes.LastIndex(tail, []byte(marks.Close))
}

// promptTail is the text of the prompt's last 16 tokens, special ones
// included: where a template's generation prompt opens or closes a
// thinking block.
func (e *Engine) promptTail(prompt []int32) []byte {
	var tail []byte
	for _, id := range prompt[max(len(prompt)-16, 0):] {
		tail = append(tail, e.tok.TokenToPiece(id, true)...)
	}
	return tail
}

// thoughtInPrompt reports whether the prompt ends with a closed thinking
// block: a template that turned thinking off renders an empty one in the
// generation prompt (Qwen3 with enable_thinking false, SmolLM3 told
// /no_think, Gemma 4 with it false), and the answer, the grammar's,
// starts after it.
func (e *Engine) thoughtInPrompt(prompt []int32) bool {
	return bytes.HasSuffix(bytes.TrimRight(e.promptTail(prompt), " \t\r\n"), []byte(e.Template().ThinkMarks().Close))
}

// thoughtFirst reports whether an answer (its generated tokens) opened
// with a thinking block (whatever the template: the front ends split one
// from the content, chat.ThinkSplitter, and sessions keep the content).
func (e *Engine) thoughtFirst(answer []int32) bool {
	open := []byte(e.Template().ThinkMarks().Open)
	var head []byte
	for _, id := range answer {
		head = append(head, e.tok.TokenToPiece(id, true)...)
		if t := bytes.TrimLeft(head, " \t\r\n"); len(t) >= len(open) || len(head) > 64 {
			return bytes.HasPrefix(t, open)
		}
	}
	return false
}

// errGrammarDead is returned if the grammar allows no token (only a
// grammar that cannot be completed gets there).
var errGrammarDead = fmt.Errorf("engine: the grammar allows no next token")

// free reports whether the next token is unconstrained.
func (k *constraint) free() bool {
	switch k.phase {
	case phThinking, phWaiting:
		return true
	case phOpening:
		return k.lazy
	case phActive:
		return k.lazy && k.m.CanEnd() // a token the grammar refuses ends it
	}
	return false
}

// sample draws the next token from logits, masked when the grammar
// applies.
func (g *generation) sample(logits []float32) (int32, error) {
	k := g.con
	if k == nil || k.free() {
		return g.smp.Sample(logits, g.history), nil
	}
	// The grammar's mask is the costliest per-token work besides the
	// forward pass, and a step computes one per accepted draft: a
	// cancelled request (disconnect, ttl_s, the watchdog, shutdown)
	// stops before the next one.
	if g.cx != nil && g.cx.Err() != nil {
		return -1, g.cx.Err()
	}
	if k.err != nil {
		return -1, fmt.Errorf("engine: %w", k.err)
	}
	if k.phase == phOpening {
		k.openingMask()
	} else {
		k.m.Mask(k.mask)
	}
	any := false
	neg := float32(math.Inf(-1))
	out := k.masked[:len(logits)]
	for w, bits := range k.mask {
		base := w * 64
		if base >= len(logits) {
			break
		}
		any = any || bits != 0
		end := min(base+64, len(logits))
		for i := base; i < end; i++ {
			if bits&(1<<(i-base)) != 0 {
				out[i] = logits[i]
			} else {
				out[i] = neg
			}
		}
	}
	if !any {
		if err := k.m.Err(); err != nil {
			return -1, fmt.Errorf("engine: %w", err)
		}
		return -1, errGrammarDead
	}
	return g.smp.Sample(out, g.history), nil
}

// openingMask allows, before a thinking block may open, the tokens the
// grammar allows (while it allowed all so far) and those that keep the
// text on its way to <think> (after a little blank space).
func (k *constraint) openingMask() {
	if k.gramOK {
		k.m.Mask(k.mask)
	} else {
		clear(k.mask)
	}
	for id := int32(0); id < int32(k.v.Size()); id++ {
		if p := k.v.Piece(id); len(p) > 0 && k.thinkPrefix(p) {
			k.mask[id>>6] |= 1 << (id & 63)
		}
	}
}

// isBlank reports whether p is blank space only.
func isBlank(p []byte) bool { return len(bytes.TrimLeft(p, " \t\r\n")) == 0 }

// thinkPrefix reports whether the opening so far followed by p is blank
// space, a beginning of <think>, or starts with it. A grammar applied at
// once (not lazy) bounds the blank space: with p's, fewer than
// openingBlank bytes before <think>, at most openingBlank alone.
func (k *constraint) thinkPrefix(p []byte) bool {
	text := k.tail
	if len(text) == 0 {
		rest := bytes.TrimLeft(p, " \t\r\n")
		if n := k.blank + len(p) - len(rest); !k.lazy && (n > openingBlank || n == openingBlank && len(rest) > 0) {
			return false
		}
		p = rest
	}
	n := min(len(k.open)-len(text), len(p))
	if n < 0 {
		return false
	}
	return bytes.Equal(text, k.open[:len(text)]) && bytes.Equal(p[:n], k.open[len(text):len(text)+n])
}

// accept advances the grammar over an emitted token, or follows the
// free text (the thinking block, the text up to the trigger).
func (g *generation) accept(id int32) {
	k := g.con
	if k == nil || k.m.Done() {
		return
	}
	switch k.phase {
	case phActive:
		if k.m.AcceptToken(id) {
			return
		}
		if !k.lazy {
			// A masked token refused (only a matcher's bound gets
			// here): the generation ends at the next sample, never
			// free of the grammar.
			k.err = cmpOr(k.m.Err(), errGrammarDead)
			return
		}
		// A lazy grammar that may end, ended: free text again.
		k.m.Reset()
		k.phase, k.tail = phWaiting, k.tail[:0]
		k.follow(g.e.tok.TokenToPiece(id, true))
	case phOpening:
		p := g.e.tok.TokenToPiece(id, true)
		// Blank space the grammar does not allow precedes its text:
		// the grammar stays at its start.
		k.readLast = false
		if !k.lazy && k.gramOK {
			k.readLast = k.m.AcceptToken(id)
			if !k.readLast && !isBlank(p) {
				k.gramOK = false
			}
		}
		if !k.thinkPrefix(p) {
			// The grammar's token, not the thinking block's.
			k.phase, k.tail, k.blank = phActive, k.tail[:0], 0
			if k.lazy {
				k.m.Reset()
				k.phase = phWaiting
				k.follow(p)
			}
			return
		}
		if len(k.tail) == 0 {
			t := bytes.TrimLeft(p, " \t\r\n")
			k.blank += len(p) - len(t)
			p = t
		}
		k.tail = append(k.tail, p...)
		switch {
		case len(k.tail) >= len(k.open):
			rest := append(k.rest[:0], k.tail[len(k.open):]...)
			k.m.Reset()
			k.phase, k.tail, k.blank = phThinking, k.tail[:0], 0
			k.follow(rest)
		case !k.lazy && len(k.tail) == 0 && k.blank >= openingBlank:
			// Blank space to the bound: no thinking block, the
			// grammar's text follows.
			k.phase, k.blank = phActive, 0
		}
	default:
		k.follow(g.e.tok.TokenToPiece(id, true))
	}
}

// hold takes the text b of a token emitted in the opening (a grammar
// applied at once, not lazy) and returns what to deliver now: nothing
// while the opening lasts; when a thinking block opened, all of its text;
// when the grammar applies, the text of its tokens the grammar read (the
// blank space it did not read is dropped).
func (k *constraint) hold(b []byte) []byte {
	switch k.phase {
	case phOpening:
		k.held = append(k.held, b...)
		if k.readLast {
			k.heldRead = append(k.heldRead, b...)
		}
		return nil
	case phActive:
		if k.readLast {
			k.heldRead = append(k.heldRead, b...)
		}
		out := k.heldRead
		k.held, k.heldRead = k.held[:0], k.heldRead[:0]
		return out
	}
	out := append(k.held, b...)
	k.held, k.heldRead = out[:0], k.heldRead[:0]
	return out
}

// follow reads free text b: in the thinking block, for its end; before
// the trigger, for the trigger. What follows either in b goes on in the
// next phase.
func (k *constraint) follow(b []byte) {
	for len(b) > 0 && k.phase != phActive {
		want := k.trigger
		if k.phase == phThinking {
			want = k.close
		}
		k.tail = append(k.tail, b...)
		i := bytes.Index(k.tail, want)
		if i < 0 {
			if keep := len(want) - 1; len(k.tail) > keep {
				k.tail = append(k.tail[:0], k.tail[len(k.tail)-keep:]...)
			}
			return
		}
		b = append(k.rest[:0], k.tail[i+len(want):]...)
		k.rest = b[:0]
		k.tail = k.tail[:0]
		if k.phase == phThinking && k.lazy {
			k.phase = phWaiting
			continue
		}
		thought := k.phase == phThinking
		k.phase = phActive
		// The rest of the token starts the grammar (after a thinking
		// block, without the blank lines the grammar has no room for).
		if !k.m.AcceptBytes(b) && thought {
			k.m.AcceptBytes(bytes.TrimLeft(b, " \t\r\n"))
		}
	}
}

// pathTo appends to k.path the tokens from the tree's root to node i
// (kept nodes only), root first.
func (k *constraint) pathTo(tr *spec.Tree, i int) []int32 {
	p := k.path[:0]
	for ; i >= 0; i = int(tr.Nodes[i].Parent) {
		p = append(p, tr.Nodes[i].Tok)
	}
	for a, b := 0, len(p)-1; a < b; a, b = a+1, b-1 {
		p[a], p[b] = p[b], p[a]
	}
	return p
}

// prune removes drafted tokens the grammar forbids.
func (g *generation) prune() {
	k := g.con
	if k == nil || k.phase != phActive || k.free() {
		return
	}
	tr := g.work().tree
	tr.Prune(func(tok int32, parent int) bool {
		p := append(k.pathTo(tr, parent), tok)
		k.path = p[:0]
		return k.m.AllowsPath(p)
	})
}

// grammarDrafter drafts the tokens of the bytes the grammar forces.
type grammarDrafter struct{ g *generation }

func (d grammarDrafter) Name() string { return "grammar" }

func (d grammarDrafter) Draft(history []int32, max int, dst []int32) ([]int32, int) {
	k := d.g.con
	if k == nil || k.phase != phActive || max <= 0 {
		return dst[:0], 0
	}
	k.forced = k.m.Forced(k.forced[:0], cap(k.forced))
	if len(k.forced) == 0 {
		return dst[:0], 0
	}
	k.draft = d.g.e.grammarVocab().Longest(k.draft[:0], k.forced)
	n := min(len(k.draft), max, cap(dst))
	// The model's own tokenization may merge the last forced bytes with
	// what follows: the last token is drafted only if it is not all.
	if n == len(k.draft) && n > 1 {
		n--
	}
	return append(dst[:0], k.draft[:n]...), 0
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
