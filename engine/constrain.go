package engine

import (
	"bytes"
	"fmt"
	"math"

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

// constraint is a generation's grammar state.
type constraint struct {
	m       *grammar.Matcher
	active  bool   // the trigger was seen (or there is none)
	trigger []byte // lazy: text that starts the grammar
	tail    []byte // the generated text's end, to find the trigger
	mask    []uint64
	masked  []float32 // [NVocab] the logits with the mask applied
	forced  []byte
	path    []int32
	draft   []int32
}

func (e *Engine) newConstraint(req *Request) (*constraint, error) {
	if req.Grammar == "" {
		return nil, nil
	}
	c, err := e.CompileGrammar(req.Grammar)
	if err != nil {
		return nil, err
	}
	nv := e.model.NVocab
	k := &constraint{m: c.NewMatcher(), active: req.GrammarTrigger == "", trigger: []byte(req.GrammarTrigger),
		mask: make([]uint64, (nv+63)/64), masked: make([]float32, nv),
		forced: make([]byte, 0, 64), path: make([]int32, 0, spec.MaxTree), draft: make([]int32, 0, spec.MaxDraft)}
	k.tail = make([]byte, 0, len(k.trigger)+64)
	return k, nil
}

// errGrammarDead is returned if the grammar allows no token (only a
// grammar that cannot be completed gets there).
var errGrammarDead = fmt.Errorf("engine: the grammar allows no next token")

// sample draws the next token from logits, masked when the grammar is
// active.
func (g *generation) sample(logits []float32) (int32, error) {
	k := g.con
	if k == nil || !k.active {
		return g.smp.Sample(logits, g.history), nil
	}
	k.m.Mask(k.mask)
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
		return -1, errGrammarDead
	}
	return g.smp.Sample(out, g.history), nil
}

// accept advances the grammar over an emitted token (or, before the
// trigger, looks for it).
func (g *generation) accept(id int32) {
	k := g.con
	if k == nil || k.m.Done() {
		return
	}
	if k.active {
		k.m.AcceptToken(id) // allowed: it was sampled from the mask
		return
	}
	p := g.e.tok.TokenToPiece(id, true)
	k.tail = append(k.tail, p...)
	if i := bytes.Index(k.tail, k.trigger); i >= 0 {
		k.active = true
		k.m.AcceptBytes(k.tail[i+len(k.trigger):]) // the rest of the token starts the grammar
		k.tail = k.tail[:0]
		return
	}
	if keep := len(k.trigger) - 1; len(k.tail) > keep {
		k.tail = append(k.tail[:0], k.tail[len(k.tail)-keep:]...)
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
	if k == nil || !k.active {
		return
	}
	tr := g.e.spec.tree
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
	if k == nil || !k.active || max <= 0 {
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
