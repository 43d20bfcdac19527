package spec

import "math"

// DecoderState is what a draft model drafts with: the state of a model
// that decodes (engine/model's State).
type DecoderState interface {
	// Forward feeds tokens and returns the logits after the last (all:
	// after every one).
	Forward(tokens []int32, all bool) ([]float32, error)
	Tokens() []int32 // the tokens the cache holds
	Len() int        // how many
	Ctx() int        // the most it can hold
	Truncate(n int)  // forget all but the first n (a recurrent state may keep fewer)
}

// ModelDrafter is a drafter that runs a model pass per drafted token.
type ModelDrafter interface {
	TreeDrafter
	Passes() int // passes the last DraftTree ran
}

// ModelDraft drafts greedily with a smaller model that shares the target's
// vocabulary. It keeps its own KV cache in step with the history.
type ModelDraft struct {
	s     DecoderState
	steps int // passes the last DraftTree ran
	one   [1]int32
}

// NewModelDraft drafts with the draft model's state s.
func NewModelDraft(s DecoderState) *ModelDraft { return &ModelDraft{s: s} }

// Name implements Drafter.
func (d *ModelDraft) Name() string { return "draft" }

// Passes implements ModelDrafter.
func (d *ModelDraft) Passes() int { return d.steps }

// step feeds toks and returns the logits after the last.
func (d *ModelDraft) step(toks []int32) ([]float32, error) { return d.s.Forward(toks, false) }

// DraftTree implements TreeDrafter: it brings its cache up to the history
// (reusing the common prefix) and continues greedily, with its second
// choices as leaves.
func (d *ModelDraft) DraftTree(history []int32, depth int, t *Tree, di int) {
	d.steps = 0
	depth = min(depth, d.s.Ctx()-len(history)+1)
	if depth <= 0 || len(history) == 0 {
		return
	}
	lcp := CommonPrefix(d.s.Tokens(), history)
	if lcp == len(history) {
		lcp-- // the last token must run again for its logits
	}
	d.s.Truncate(lcp)
	lcp = d.s.Len() // a recurrent draft may rewind further
	d.steps = modelDraftTree(history[lcp:], d.one[:], depth, t, di, d.step)
}

// Draft implements Drafter: the first-choice chain of DraftTree.
func (d *ModelDraft) Draft(history []int32, max int, dst []int32) ([]int32, int) {
	return firstChoices(d, history, max, dst)
}

// CommonPrefix is the length of the longest common prefix of a and b.
func CommonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// Argmax is the index of the largest logit (the lowest on ties).
func Argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// top2 returns the two most likely tokens of logits and the probability
// of each under their softmax.
func top2(logits []float32) (a, b int32, pa, pb float64) {
	a, b = -1, -1
	for i, v := range logits {
		switch {
		case a < 0 || v > logits[a]:
			a, b = int32(i), a
		case b < 0 || v > logits[b]:
			b = int32(i)
		}
	}
	if a < 0 {
		return -1, -1, 0, 0
	}
	mx := float64(logits[a])
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - mx)
	}
	pa = 1 / sum
	if b >= 0 {
		pb = math.Exp(float64(logits[b])-mx) / sum
	}
	return a, b, pa, pb
}

// confBounds are the lower bounds of the confidence classes a model
// drafter's tokens fall in by their probability under the draft.
var confBounds = [...]float64{0.2, 0.4, 0.6, 0.8, 0.9, 0.97}

// confClass buckets a draft token's probability under the draft model
// into a confidence class: the controller tracks acceptance per class, so
// it learns how far to trust each.
func confClass(p float64) int {
	c := 0
	for c < len(confBounds) && p >= confBounds[c] {
		c++
	}
	return c
}

// minPath stops a model drafter's chain once the draft itself rates the
// chain so far less likely than this: the next tokens would mostly be
// wasted work. minAlt is the least probability a second choice needs to
// be proposed beside the first.
const (
	minPath = 0.1
	minAlt  = 0.05
)

// modelDraftTree drafts a chain greedily with a model, one step per
// token, and beside every token the model's second choice as a leaf. step
// feeds tokens and returns the logits after the last; the first step feeds
// first, the later ones one drafted token each, in one (a buffer of one
// token the drafter owns). Drafting stops after depth tokens, or early when
// the draft's own probability of the whole chain so far falls under
// minPath. It returns how many steps it ran.
func modelDraftTree(first, one []int32, depth int, t *Tree, d int, step func([]int32) ([]float32, error)) int {
	type leaf struct {
		parent int
		tok    int32
		class  int
	}
	var alt [MaxTree]leaf
	nalt, parent, steps := 0, -1, 0
	path := 1.0
	feed := first
	for steps < depth {
		logits, err := step(feed)
		steps++
		if err != nil {
			break
		}
		a, b, pa, pb := top2(logits)
		if a < 0 {
			break
		}
		if b >= 0 && pb > minAlt && nalt < len(alt) {
			alt[nalt] = leaf{parent, b, confClass(pb)}
			nalt++
		}
		if parent = t.Add(parent, a, d, confClass(pa)); parent < 0 {
			break
		}
		if path *= pa; path < minPath {
			break
		}
		one[0] = a
		feed = one[:1]
	}
	for _, x := range alt[:nalt] {
		t.Add(x.parent, x.tok, d, x.class)
	}
	return steps
}

// firstChoices drafts a tree with d and returns its chain of first
// choices (for callers that want a chain).
func firstChoices(d TreeDrafter, history []int32, max int, dst []int32) ([]int32, int) {
	t := NewTree(1)
	d.DraftTree(history, max, t, 0)
	dst = dst[:0]
	for _, n := range t.Nodes {
		dst = append(dst, n.Tok)
	}
	return dst, 0
}
