package spec

import (
	"math"

	"github.com/geisten/geist/engine/model"
)

// Model-native drafters: heads that ship with the model and read the
// target's own state (a Gemma 4 assistant, an EAGLE-3 head). The engine
// hands them every row its passes keep (Kept), so they need no second
// forward pass of the target.

// NativeDrafter is a drafter that reads the target's state.
type NativeDrafter interface {
	ModelDrafter
	// Kept tells that batch row row of the target's last pass is now
	// position pos of its cache.
	Kept(row, pos int)
	// Known is how many of the target's first positions the drafter
	// has the rows of (all: at least the target's context).
	Known() int
	// Truncate follows the target's cache back to its first n
	// positions (Known may then be less).
	Truncate(n int)
	// SetGate makes drafting stop when c says the next token does not
	// pay (Controller.Worth for drafter index d); nil: draft the full
	// depth.
	SetGate(c *Controller, d int)
}

// nativeTree drafts a chain greedily, one step per token, and beside
// every token the step's next likeliest choices (up to treeWidth-1 of
// those at least minAlt likely) as leaves. step(i, tok) runs the
// i-th step on token tok and returns its logits and, when only some of
// them are finite (a sparse head, a draft vocabulary), those tokens. Drafting stops after
// depth tokens, on an error, or when gate (if not nil) finds that the
// next token does not pay (Controller.Worth, for drafter d, with the
// reach of the chain by the learned acceptance of its confidence
// classes).
func nativeTree(depth int, first int32, t *Tree, d int, gate *Controller, step func(i int, tok int32) ([]float32, []int32, error)) int {
	type leaf struct {
		parent int
		tok    int32
		class  int
	}
	var alt [2 * MaxTree]leaf
	nalt, parent, steps := 0, -1, 0
	reach := 1.0
	tok := first
	for steps < depth {
		logits, cand, err := step(steps, tok)
		steps++
		if err != nil {
			break
		}
		var top [3]int32
		var p [3]float64
		if !topKIn(logits, cand, top[:], p[:]) {
			break
		}
		a, pa := top[0], p[0]
		for j := 1; j < len(top); j++ {
			if top[j] >= 0 && p[j] > minAlt && nalt < len(alt) {
				alt[nalt] = leaf{parent, top[j], confClass(p[j])}
				nalt++
			}
		}
		class := confClass(pa)
		if parent = t.Add(parent, a, d, class); parent < 0 {
			break
		}
		if gate != nil {
			if reach *= gate.Alpha(d, class, 0); !gate.Worth(d, steps, reach) {
				break
			}
		}
		tok = a
	}
	for _, x := range alt[:nalt] {
		t.Add(x.parent, x.tok, d, x.class)
	}
	return steps
}

// AssistDraft drafts with a Gemma 4 assistant over the target's state.
type AssistDraft struct {
	st     *model.AssistState
	target *model.State
	h      []float32 // the target's normed hidden state at hPos
	hPos   int       // -1: none
	hTok   int32     // the target's token at hPos
	steps  int
	gate   *Controller
	gated  int // the gate's drafter index
}

// NewAssistDraft drafts with a for the target state target.
func NewAssistDraft(a *model.Assistant, target *model.State) *AssistDraft {
	return &AssistDraft{st: a.NewState(target.Ctx()), target: target, h: make([]float32, a.NEmbdTarget), hPos: -1}
}

// State is the assistant's step state (its Sparse switch).
func (d *AssistDraft) State() *model.AssistState { return d.st }

// Name implements Drafter.
func (d *AssistDraft) Name() string { return "assistant" }

// Passes implements ModelDrafter.
func (d *AssistDraft) Passes() int { return d.steps }

// Known implements NativeDrafter: the assistant needs only the last
// position's row, which every pass leaves.
func (d *AssistDraft) Known() int { return math.MaxInt }

// Truncate implements NativeDrafter.
func (d *AssistDraft) Truncate(int) {}

// SetGate implements NativeDrafter.
func (d *AssistDraft) SetGate(c *Controller, idx int) { d.gate, d.gated = c, idx }

// Kept implements NativeDrafter: the assistant needs the hidden state of
// the last position only.
func (d *AssistDraft) Kept(row, pos int) {
	if pos+1 != d.target.Len() {
		return
	}
	d.target.HiddenNormed(row, d.h)
	d.hPos, d.hTok = pos, d.target.Tokens()[pos]
}

// DraftTree implements TreeDrafter. The target's cache must hold the
// history but its last token (which the next pass feeds). Every step runs
// at that token's position, the first on the target's hidden state of
// the position before, the later ones on the step's own.
func (d *AssistDraft) DraftTree(history []int32, depth int, t *Tree, di int) {
	d.steps = 0
	N := len(history) - 1
	if N < 1 || d.target.Len() != N || d.hPos != N-1 || d.hTok != history[N-1] {
		return
	}
	depth = min(depth, d.target.Ctx()-N)
	d.steps = nativeTree(depth, history[N], t, di, d.gateFor(di), func(i int, tok int32) ([]float32, []int32, error) {
		h := d.h
		if i > 0 {
			h = d.st.HNext()
		}
		l, err := d.st.Step(d.target, tok, h, N)
		return l, d.st.Candidates(), err
	})
}

// Draft implements Drafter: the first-choice chain of DraftTree.
func (d *AssistDraft) Draft(history []int32, max int, dst []int32) ([]int32, int) {
	return firstChoices(d, history, max, dst)
}

// Eagle3Draft drafts with an EAGLE-3 head fed the target's features.
type Eagle3Draft struct {
	st     *model.Eagle3State
	target *model.State
	steps  int
	gate   *Controller
	gated  int // the gate's drafter index
}

// NewEagle3Draft drafts with e for the target state target, which it
// makes keep e's feature layers.
func NewEagle3Draft(e *model.Eagle3, target *model.State) (*Eagle3Draft, error) {
	if err := target.CaptureInputs(e.TargetLayers); err != nil {
		return nil, err
	}
	return &Eagle3Draft{st: e.NewState(target.Allocated(), target.Ctx()), target: target}, nil
}

// Name implements Drafter.
func (d *Eagle3Draft) Name() string { return "eagle3" }

// BytesPerPosition is what a position of the head's cache takes.
func (d *Eagle3Draft) BytesPerPosition() int64 { return d.st.BytesPerPosition() }

// BytesPerPosition is what a position of the block's cache takes.
func (d *MTPDraft) BytesPerPosition() int64 { return d.st.BytesPerPosition() }

// Passes implements ModelDrafter.
func (d *Eagle3Draft) Passes() int { return d.steps }

// Known implements NativeDrafter.
func (d *Eagle3Draft) Known() int { return d.st.Known() }

// Truncate implements NativeDrafter.
func (d *Eagle3Draft) Truncate(n int) { d.st.Truncate(n) }

// SetGate implements NativeDrafter.
func (d *Eagle3Draft) SetGate(c *Controller, idx int) { d.gate, d.gated = c, idx }

// Kept implements NativeDrafter: every position's features feed the
// head's encoder.
func (d *Eagle3Draft) Kept(row, pos int) {
	d.st.Feed(d.target.Features(row), d.target.Tokens()[pos], pos)
}

// DraftTree implements TreeDrafter. The target's cache must hold the
// history but its last token.
func (d *Eagle3Draft) DraftTree(history []int32, depth int, t *Tree, di int) {
	d.steps = 0
	N := len(history) - 1
	if N < 1 || d.target.Len() != N {
		return
	}
	depth = min(depth, d.target.Ctx()-N)
	d.steps = nativeTree(depth, history[N], t, di, d.gateFor(di), func(i int, tok int32) ([]float32, []int32, error) {
		var l []float32
		var err error
		if i == 0 {
			l, err = d.st.Sync(history)
		} else {
			l, err = d.st.Step(tok, d.st.Prenorm())
		}
		return l, d.st.Candidates(), err
	})
	d.st.Rewind(N)
}

// Draft implements Drafter: the first-choice chain of DraftTree.
func (d *Eagle3Draft) Draft(history []int32, max int, dst []int32) ([]int32, int) {
	return firstChoices(d, history, max, dst)
}

// gateFor is the gate for drafter index di (nil: none).
func (d *AssistDraft) gateFor(di int) *Controller {
	if d.gated != di {
		return nil
	}
	return d.gate
}

// gateFor is the gate for drafter index di (nil: none).
func (d *Eagle3Draft) gateFor(di int) *Controller {
	if d.gated != di {
		return nil
	}
	return d.gate
}

// topK fills top with the most likely tokens of logits, likeliest first
// (-1 past the vocabulary), and p with their probabilities under the
// softmax; it reports false for empty logits.
func topK(logits []float32, top []int32, p []float64) bool {
	ninf := float32(math.Inf(-1))
	for j := range top {
		top[j] = -1
	}
	for i, v := range logits {
		if v == ninf {
			continue
		}
		for j := range top {
			if top[j] < 0 || v > logits[top[j]] {
				copy(top[j+1:], top[j:len(top)-1])
				top[j] = int32(i)
				break
			}
		}
	}
	if top[0] < 0 {
		return false
	}
	mx := float64(logits[top[0]])
	var sum float64
	for _, v := range logits {
		if v != ninf { // a sparse head's or a draft vocabulary's: most are −∞
			sum += math.Exp(float64(v) - mx)
		}
	}
	for j, t := range top {
		p[j] = 0
		if t >= 0 {
			p[j] = math.Exp(float64(logits[t])-mx) / sum
		}
	}
	return true
}

// topKIn is topK over the tokens cand only (nil: every token), every
// other logit being −∞: the same tokens, ties going to the lower id as
// topK's scan gives them, and the same probabilities up to the order of
// the softmax's sum.
func topKIn(logits []float32, cand []int32, top []int32, p []float64) bool {
	if cand == nil {
		return topK(logits, top, p)
	}
	ninf := float32(math.Inf(-1))
	for j := range top {
		top[j] = -1
	}
	for _, i := range cand {
		v := logits[i]
		if v == ninf || i == top[0] || i == top[1%len(top)] || i == top[len(top)-1] {
			continue // −∞, or a token listed twice
		}
		for j := range top {
			if top[j] < 0 || v > logits[top[j]] || (v == logits[top[j]] && i < top[j]) {
				copy(top[j+1:], top[j:len(top)-1])
				top[j] = i
				break
			}
		}
	}
	if top[0] < 0 {
		return false
	}
	mx := float64(logits[top[0]])
	var sum float64
	for _, i := range cand {
		if v := logits[i]; v != ninf {
			sum += math.Exp(float64(v) - mx)
		}
	}
	for j, t := range top {
		p[j] = 0
		if t >= 0 {
			p[j] = math.Exp(float64(logits[t])-mx) / sum
		}
	}
	return true
}

// MTPDraft drafts with the target's own next-token prediction block
// (Qwen3.5's MTP layer), fed every position the target keeps.
type MTPDraft struct {
	st     *model.MTPState
	target *model.State
	steps  int
	gate   *Controller
	gated  int // the gate's drafter index
}

// NewMTPDraft drafts with t for the target state target.
func NewMTPDraft(t *model.MTP, target *model.State, m *model.Model) *MTPDraft {
	var head func(out, x []float32, rows int)
	if t.Output == m.Output {
		head = target.HeadProduct
	}
	return NewMTPDraftHead(t, target, head)
}

// NewMTPDraftHead drafts with t for the target state target (a batch
// slot), computing the output head with head (nil: on one thread; the
// bits are the same).
func NewMTPDraftHead(t *model.MTP, target *model.State, head func(out, x []float32, rows int)) *MTPDraft {
	return &MTPDraft{st: t.NewState(target.Allocated(), target.Ctx(), head), target: target}
}

// State is the block's cache.
func (d *MTPDraft) State() *model.MTPState { return d.st }

// Name implements Drafter.
func (d *MTPDraft) Name() string { return "mtp" }

// Passes implements ModelDrafter.
func (d *MTPDraft) Passes() int { return d.steps }

// Known implements NativeDrafter: positions restored without passing
// their rows here leave a hole in the block's cache, which changes drafts
// but not the output, so the target need not run them again.
func (d *MTPDraft) Known() int { return math.MaxInt }

// Truncate implements NativeDrafter (Kept of an earlier position
// truncates the cache itself).
func (d *MTPDraft) Truncate(int) {}

// SetGate implements NativeDrafter.
func (d *MTPDraft) SetGate(c *Controller, idx int) { d.gate, d.gated = c, idx }

// Kept implements NativeDrafter: every kept position runs its pair.
func (d *MTPDraft) Kept(row, pos int) {
	d.target.HiddenNormed(row, d.st.Scratch())
	d.st.Feed(d.st.Scratch(), d.target.Tokens()[pos], pos)
}

// DraftTree implements TreeDrafter. The target's cache must hold the
// history but its last token. The first step pairs that token with the
// target's hidden state of the position before, the later ones each
// drafted token with the step's own output.
func (d *MTPDraft) DraftTree(history []int32, depth int, t *Tree, di int) {
	d.steps = 0
	N := len(history) - 1
	if N < 1 || d.target.Len() != N || !d.st.Synced(history, N) {
		return
	}
	depth = min(depth, d.target.Ctx()-N)
	gate := d.gate
	if d.gated != di {
		gate = nil
	}
	d.steps = nativeTree(depth, history[N], t, di, gate, func(i int, tok int32) ([]float32, []int32, error) {
		h, pos := d.st.Out(), N+i
		if i == 0 {
			h = d.st.H(N - 1)
		}
		lg, err := d.st.Step(tok, h, pos)
		return lg, nil, err // nil: every logit (the first DraftVocab ones) is a candidate
	})
	d.st.Rewind(N + 1)
}

// Prepare brings the block's cache up to history (the recorded pairs
// CatchUp runs, which do not use the output head) ahead of DraftTree: a
// batched sequence runs it without holding the target's workers, which
// DraftTree's head steps use.
func (d *MTPDraft) Prepare(history []int32) {
	if N := len(history) - 1; N >= 1 && d.target.Len() == N {
		d.st.Synced(history, N)
	}
}

// Draft implements Drafter: the first-choice chain of DraftTree.
func (d *MTPDraft) Draft(history []int32, max int, dst []int32) ([]int32, int) {
	return firstChoices(d, history, max, dst)
}
