package engine

import (
	"time"

	"github.com/geisten/geist/engine/spec"
)

// Speculative steps with token trees.
//
// Each step feeds one token t (the last one emitted, not yet in the cache)
// and, when the controller finds it worth it, a tree of drafted tokens
// that might follow t. One forward pass computes every node with a tree
// attention mask (each node sees the cache and its own ancestors only, at
// the position of its depth), so a node's logits are bit for bit those of
// its path alone. Then the walk:
//
//	cur := t
//	loop: y := the sampler's token from cur's logits (greedy: the argmax)
//	      emit y
//	      if a child of cur holds y: cur = that child, loop
//	      else: y is the next step's fed token
//
// This is the rule "the target samples, the tree matches". It is exact for
// any drafts: every emitted token is drawn by the target's own sampler,
// from the target's own logits for exactly the tokens emitted before it,
// with the same random draws in the same order as plain decoding; drafts
// only decide which rows were computed ahead of time. So the output is not
// just distributed like plain decoding's, it is plain decoding's, token
// for token, for a given seed (given bit-identical logits). For
// deterministic drafts (all of geist's drafters) it is also as efficient
// as any exact rule can be: a child x is accepted with probability p(x),
// which is what recursive rejection sampling with point-mass drafts (the
// multi-draft rule of SpecTr / SpecInfer with q = δ, residuals done right:
// sampling without replacement among the children) gives, and a node's
// children are accepted with total probability Σ p(x) over them. (A draft
// model that sampled its tokens would call for residual distributions to
// accept more; geist's drafts greedily.)

// treeBufs are the buffers of tree verification, sized once.
type treeBufs struct {
	tree    *spec.Tree
	batch   []int32 // [1+MaxDraft] the fed token, then the kept nodes
	parents []int32 // [1+MaxDraft] batch index of each one's parent (-1: the cache)
	path    []int32 // [1+MaxDraft] batch indices of the accepted path
}

func newTreeBufs() treeBufs {
	return treeBufs{
		tree:    spec.NewTree(treeWidth),
		batch:   make([]int32, 0, spec.MaxDraft+1),
		parents: make([]int32, 0, spec.MaxDraft+1),
		path:    make([]int32, 0, spec.MaxDraft+1),
	}
}

// treeWidth is the most children a node of a drafted tree gets.
const treeWidth = 3

// end is the end of batch node i's subtree in a tree of n batch nodes:
// node 0 (the fed token) spans the whole batch.
func (b *treeBufs) end(i, n int) int {
	if i == 0 {
		return n
	}
	return 1 + b.tree.End(i-1)
}

// layout fills batch and parents from the fed token t and the planned
// tree, and returns the batch size.
func (b *treeBufs) layout(t int32) int {
	b.batch = append(b.batch[:0], t)
	b.parents = append(b.parents[:0], -1)
	for _, nd := range b.tree.Nodes {
		b.batch = append(b.batch, nd.Tok)
		b.parents = append(b.parents, int32(nd.Parent)+1)
	}
	return len(b.batch)
}

// stepTimer accumulates the time of one target pass, its lazy output head
// calls included.
type stepTimer struct {
	total time.Duration
	t0    time.Time
}

func (s *stepTimer) start() { s.t0 = time.Now() }
func (s *stepTimer) stop()  { s.total += time.Since(s.t0) }
