package grammar

import (
	"bytes"
	"math/bits"
	"slices"
	"sync"
)

// Vocab is a model's vocabulary as byte strings, laid out as a trie for
// mask computation. Build it once per model with NewVocab.
type Vocab struct {
	n      int
	off    []int32 // piece of id: bytes[off[id]:off[id+1]]
	bytes  []byte
	eog    []int32
	eogSet []uint64
	// The trie in preorder: node i's subtree is [i, end[i]); node 0 is
	// the empty prefix. Its tokens are ids[tokLo[i]:tokLo[i+1]].
	tb    []byte
	depth []int32
	end   []int32
	tokLo []int32
	ids   []int32

	maxLen int // the longest piece's bytes

	cache cache
}

// NewVocab builds a vocabulary from the tokens' bytes as generated text
// renders them (empty: never generated, such as control tokens) and the
// end-of-generation tokens.
func NewVocab(pieces [][]byte, eog []int32) *Vocab {
	v := &Vocab{n: len(pieces), off: make([]int32, len(pieces)+1)}
	for i, p := range pieces {
		v.bytes = append(v.bytes, p...)
		v.off[i+1] = int32(len(v.bytes))
		v.maxLen = max(v.maxLen, len(p))
	}
	v.eogSet = make([]uint64, (v.n+63)/64)
	for _, id := range eog {
		if id >= 0 && int(id) < v.n {
			v.eog = append(v.eog, id)
			v.eogSet[id>>6] |= 1 << (id & 63)
		}
	}
	var order []int32
	for i := range pieces {
		if len(pieces[i]) > 0 && !v.isEOG(int32(i)) {
			order = append(order, int32(i))
		}
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := bytes.Compare(v.piece(a), v.piece(b)); c != 0 {
			return c
		}
		return int(a - b)
	})
	// Preorder construction: a path of open nodes, closed when a token
	// leaves their prefix.
	v.tb, v.depth, v.end, v.tokLo = []byte{0}, []int32{0}, []int32{0}, []int32{0}
	path := []int32{0}
	var prev []byte
	for _, id := range order {
		p := v.piece(id)
		l := 0
		for l < len(prev) && l < len(p) && prev[l] == p[l] {
			l++
		}
		for len(path) > l+1 {
			v.end[path[len(path)-1]] = int32(len(v.tb))
			path = path[:len(path)-1]
		}
		for d := l; d < len(p); d++ {
			v.tb = append(v.tb, p[d])
			v.depth = append(v.depth, int32(d+1))
			v.end = append(v.end, 0)
			v.tokLo = append(v.tokLo, int32(len(v.ids)))
			path = append(path, int32(len(v.tb)-1))
		}
		v.ids = append(v.ids, id)
		prev = p
	}
	for _, i := range path {
		v.end[i] = int32(len(v.tb))
	}
	v.tokLo = append(v.tokLo, int32(len(v.ids)))
	return v
}

// Size is the number of tokens.
func (v *Vocab) Size() int { return v.n }

func (v *Vocab) piece(id int32) []byte { return v.bytes[v.off[id]:v.off[id+1]] }

// Piece returns token id's bytes (empty for a token never generated as
// text, and for the end-of-generation tokens). The slice is v's: do not
// change it.
func (v *Vocab) Piece(id int32) []byte {
	if id < 0 || int(id) >= v.n {
		return nil
	}
	return v.piece(id)
}

func (v *Vocab) isEOG(id int32) bool { return v.eogSet[id>>6]&(1<<(id&63)) != 0 }

// nodeTokens returns the tokens ending at trie node i.
func (v *Vocab) nodeTokens(i int32) []int32 {
	hi := int32(len(v.ids))
	if int(i)+1 < len(v.tokLo) {
		hi = v.tokLo[i+1]
	}
	return v.ids[v.tokLo[i]:hi]
}

// subtreeTokens returns the tokens at and below trie node i.
func (v *Vocab) subtreeTokens(i int32) []int32 {
	hi := int32(len(v.ids))
	if int(v.end[i]) < len(v.tokLo) {
		hi = v.tokLo[v.end[i]]
	}
	return v.ids[v.tokLo[i]:hi]
}

// stateMask is the context-independent split of the vocabulary for one
// automaton state on top of a stack: the tokens accepted whatever lies
// below (a bit set, or a list when few), and the tokens that leave the
// top rule, to be checked against the whole stack.
type stateMask struct {
	acc     []uint64
	accList []int32
	unc     []int32
}

// Compiled is a grammar bound to a vocabulary, with the per-state masks
// computed on first use and kept. It is safe for concurrent use; its
// matchers are not.
type Compiled struct {
	g *Grammar
	v *Vocab

	mu    sync.Mutex
	masks []*stateMask // [state], nil until needed
	// The masks of a shallow rule's states, by state and return state
	// (state<<32 | return).
	pairs  map[uint64]*stateMask
	w      walker // the mask computation's arena
	bits   []uint64
	lvPool [][]int32
	lv     [][]int32 // stack sets per trie depth
	esc    []bool
}

// Bind binds g to v.
func Bind(g *Grammar, v *Vocab) *Compiled {
	return &Compiled{g: g, v: v, masks: make([]*stateMask, len(g.final))}
}

// Grammar returns the grammar.
func (c *Compiled) Grammar() *Grammar { return c.g }

// Vocab returns the vocabulary.
func (c *Compiled) Vocab() *Vocab { return c.v }

// Precompute computes the masks of every state now rather than on first
// use (it costs a vocabulary walk per state).
func (c *Compiled) Precompute() {
	for s := range c.g.final {
		if c.g.hasBytes(int32(s)) {
			c.stateMask(int32(s))
		}
	}
}

func (c *Compiled) stateMask(s int32) *stateMask {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sm := c.masks[s]; sm != nil {
		return sm
	}
	sm := c.compute(s, -1)
	c.masks[s] = sm
	return sm
}

// pairMask is the mask of state s of a shallow rule called to return to
// state ret.
func (c *Compiled) pairMask(s, ret int32) *stateMask {
	key := uint64(s)<<32 | uint64(uint32(ret))
	c.mu.Lock()
	defer c.mu.Unlock()
	if sm := c.pairs[key]; sm != nil {
		return sm
	}
	if c.pairs == nil {
		c.pairs = map[uint64]*stateMask{}
	}
	sm := c.compute(s, ret)
	c.pairs[key] = sm
	return sm
}

// compute walks the vocabulary trie from state s alone on a stack whose
// rest is unknown (or, with ret >= 0, from s on top of ret).
func (c *Compiled) compute(s, ret int32) *stateMask {
	g, v := c.g, c.v
	if c.w.a == nil {
		c.w = walker{g: g, a: newArena(4096)}
		c.bits = make([]uint64, (v.n+63)/64)
	}
	c.w.a.reset()
	clear(c.bits)
	top := s
	if ret >= 0 {
		top = ret
	}
	below := int32(outside)
	if r := g.ruleOf[top]; r == g.root && !g.called[r] {
		below = bottom
	}
	if ret >= 0 {
		below = c.w.a.intern(ret, below)
	}
	sm := &stateMask{}
	nAcc := 0
	c.lv = append(c.lv[:0], append(c.lvBuf(0), c.w.a.intern(s, below)))
	c.esc = append(c.esc[:0], false)
	for i := int32(1); i < int32(len(v.tb)); {
		d := v.depth[i]
		c.lv, c.esc = c.lv[:d], c.esc[:d]
		parent := c.lv[d-1]
		c.w.escaped, c.w.err = false, nil
		next := c.w.advance(c.lvBuf(int(d)), parent, v.tb[i])
		// A stack dropped for a bound is left to the run-time check
		// (which reports the bound), as one that left the rule is.
		esc := c.esc[d-1] || c.w.escaped || c.w.err != nil
		c.lv = append(c.lv, next)
		c.esc = append(c.esc, esc)
		c.lvPool[d] = next[:0]
		if len(next) == 0 {
			if esc {
				sm.unc = append(sm.unc, v.subtreeTokens(i)...)
			}
			i = v.end[i]
			continue
		}
		for _, id := range v.nodeTokens(i) {
			c.bits[id>>6] |= 1 << (id & 63)
			nAcc++
		}
		live := false
		for _, f := range next {
			live = live || f >= 0
		}
		if !live { // complete: no further byte fits
			i = v.end[i]
			continue
		}
		i++
	}
	if nAcc*16 > v.n {
		sm.acc = slices.Clone(c.bits)
	} else {
		sm.accList = make([]int32, 0, nAcc)
		for w, bitsW := range c.bits {
			for ; bitsW != 0; bitsW &= bitsW - 1 {
				sm.accList = append(sm.accList, int32(w*64+bits.TrailingZeros64(bitsW)))
			}
		}
	}
	return sm
}

// lvBuf returns the reusable stack-set buffer of trie depth d.
func (c *Compiled) lvBuf(d int) []int32 {
	for len(c.lvPool) <= d {
		c.lvPool = append(c.lvPool, make([]int32, 0, 16))
	}
	return c.lvPool[d][:0]
}

// Longest appends to dst a tokenization of b by longest matching tokens,
// left to right, and stops early where no token matches. Drafters use it
// for text the grammar forces (any tokenization is a valid draft; the
// model's own choice is verified).
func (v *Vocab) Longest(dst []int32, b []byte) []int32 {
	for len(b) > 0 {
		node, best, bestLen := int32(0), int32(-1), 0
		for d := 0; d < len(b); d++ {
			child := node + 1
			for child < v.end[node] && v.tb[child] != b[d] {
				child = v.end[child]
			}
			if child >= v.end[node] {
				break
			}
			node = child
			if t := v.nodeTokens(node); len(t) > 0 {
				best, bestLen = t[0], d+1
			}
		}
		if best < 0 {
			return dst
		}
		dst = append(dst, best)
		b = b[bestLen:]
	}
	return dst
}
