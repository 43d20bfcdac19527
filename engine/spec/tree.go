package spec

// MaxTree is the most nodes a drafted tree holds. Drafters propose
// generously up to it; the controller keeps what is worth a pass.
const MaxTree = 64

// MaxRanks is how many sibling ranks acceptance is tracked for: a
// drafter's first choice (0), its runner-up (1), and every further one (2).
const MaxRanks = 3

// Node is one drafted token of a Tree.
type Node struct {
	Tok     int32
	Parent  int16   // the parent node, or -1: the node follows the token being fed
	Drafter uint8   // index of the drafter that proposed it (the controller's tables)
	Class   uint8   // the drafter's confidence class
	Rank    uint8   // its rank among the drafter's proposals for the same parent
	P       float64 // chance that verification reaches it (set by Controller.Plan)
}

// Tree is a set of drafted continuations sharing prefixes: a trie over
// tokens whose roots follow the token being fed. Parents always precede
// their children. After Controller.Plan the nodes are in depth-first order,
// likelier children first, so that every node's subtree is the index
// range [i, End(i)). The zero value is unusable; make one with NewTree. It
// allocates nothing after that.
type Tree struct {
	Nodes []Node
	// Width is the most children a node may have: 1 drafts chains,
	// more drafts trees.
	Width int

	end   [MaxTree]int16 // end of each node's subtree (after Plan)
	tmp   [MaxTree]Node
	order [MaxTree]int16
	remap [MaxTree]int16
	stack [MaxTree]int16
}

// NewTree returns an empty tree that drafts up to width children per node.
func NewTree(width int) *Tree {
	return &Tree{Nodes: make([]Node, 0, MaxTree), Width: max(width, 1)}
}

// Reset empties the tree.
func (t *Tree) Reset() { t.Nodes = t.Nodes[:0] }

// Len is the number of nodes.
func (t *Tree) Len() int { return len(t.Nodes) }

// Full reports whether the tree has no room for another node.
func (t *Tree) Full() bool { return len(t.Nodes) >= MaxTree }

// Child returns the child of parent (-1: a root) that holds tok, or -1.
func (t *Tree) Child(parent int, tok int32) int {
	for i := parent + 1; i < len(t.Nodes); i++ {
		if n := &t.Nodes[i]; int(n.Parent) == parent && n.Tok == tok {
			return i
		}
	}
	return -1
}

// children counts the children of parent.
func (t *Tree) children(parent int) int {
	k := 0
	for i := parent + 1; i < len(t.Nodes); i++ {
		if int(t.Nodes[i].Parent) == parent {
			k++
		}
	}
	return k
}

// Add proposes tok after parent (-1: a root) for drafter d with a
// confidence class, ranked after the parent's earlier children (drafters
// propose their likeliest tokens first). A token the parent already has is
// not added twice: Add returns the existing node (which keeps its first
// proposer). It returns -1 when the tree is full or the parent has Width
// children.
func (t *Tree) Add(parent int, tok int32, d, class int) int {
	if i := t.Child(parent, tok); i >= 0 {
		return i
	}
	rank := t.children(parent)
	if rank >= t.Width || t.Full() || parent >= len(t.Nodes) || parent < -1 {
		return -1
	}
	t.Nodes = append(t.Nodes, Node{Tok: tok, Parent: int16(parent), Drafter: uint8(d),
		Class: uint8(min(max(class, 0), MaxClasses-1)), Rank: uint8(min(rank, MaxRanks-1))})
	return len(t.Nodes) - 1
}

// AddChain proposes the chain toks below parent, the first token ranked
// as Add ranks it and the rest as first choices below it. It returns how
// many of them the tree holds.
func (t *Tree) AddChain(parent int, toks []int32, d, class int) int {
	for k, tok := range toks {
		if parent = t.Add(parent, tok, d, class); parent < 0 {
			return k
		}
	}
	return len(toks)
}

// End returns the end of node i's subtree: its descendants are the nodes
// i+1 .. End(i)-1. Valid after Controller.Plan.
func (t *Tree) End(i int) int { return int(t.end[i]) }

// Depth returns the number of nodes on the path from a root to node i.
func (t *Tree) Depth(i int) int {
	d := 0
	for ; i >= 0; i = int(t.Nodes[i].Parent) {
		d++
	}
	return d
}

// keep reduces the tree to the nodes order[:m] (a set closed under taking
// parents) and lays them out depth first, children in the order they
// have in order (likeliest first), filling end.
func (t *Tree) keep(m int) {
	for i := range t.Nodes {
		t.remap[i] = -1
	}
	for _, i := range t.order[:m] {
		t.remap[i] = -2 // kept, not yet placed
	}
	// Depth-first: push roots in reverse order of preference, pop, place,
	// push the node's kept children likewise.
	sp := 0
	push := func(parent int) {
		// Children of parent in preference order, pushed reversed.
		start := sp
		for _, i := range t.order[:m] {
			if int(t.Nodes[i].Parent) == parent {
				t.stack[sp] = i
				sp++
			}
		}
		for a, b := start, sp-1; a < b; a, b = a+1, b-1 {
			t.stack[a], t.stack[b] = t.stack[b], t.stack[a]
		}
	}
	push(-1)
	n := 0
	for sp > 0 {
		sp--
		i := t.stack[sp]
		nd := t.Nodes[i]
		if nd.Parent >= 0 {
			nd.Parent = t.remap[nd.Parent]
		}
		t.remap[i] = int16(n)
		t.tmp[n] = nd
		n++
		push(int(i))
	}
	t.Nodes = append(t.Nodes[:0], t.tmp[:n]...)
	for i := range t.Nodes {
		t.end[i] = int16(i + 1)
	}
	for i := len(t.Nodes) - 1; i >= 0; i-- {
		if p := t.Nodes[i].Parent; p >= 0 {
			t.end[p] = max(t.end[p], t.end[i])
		}
	}
}

// Prune removes the nodes for which keep is false, and their
// descendants, before Controller.Plan (parents precede children). keep
// gets a node's token and its parent's index among the nodes already
// kept (Nodes[:parent+1] are the kept nodes so far; -1: a root), and sees
// a node only after its parent was kept.
func (t *Tree) Prune(keep func(tok int32, parent int) bool) {
	n := 0
	for i := range t.Nodes {
		nd := t.Nodes[i]
		if nd.Parent >= 0 {
			if t.remap[nd.Parent] < 0 {
				t.remap[i] = -1
				continue
			}
			nd.Parent = t.remap[nd.Parent]
		}
		if !keep(nd.Tok, int(nd.Parent)) {
			t.remap[i] = -1
			continue
		}
		t.remap[i] = int16(n)
		t.Nodes[n] = nd
		n++
	}
	t.Nodes = t.Nodes[:n]
}
