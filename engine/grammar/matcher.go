package grammar

import (
	"fmt"
	"math/bits"
)

// Frames live in an arena and are hash-consed: a frame (state, parent)
// exists once, so two stacks are equal exactly when their top frames are.
const (
	bottom  = -1 // below the root frame: popping it completes the grammar
	outside = -2 // below a mask computation's top frame: popping it needs the context
	accept  = -1 // the empty stack in a stack set
	// maxStacks bounds a stack set (an ambiguous grammar could grow it
	// without end); maxExpand bounds the nesting of calls one byte opens.
	maxStacks = 1024
	maxExpand = 256
	// MaxDepth bounds a stack: the rules open at once (a JSON document
	// nests about half as deep: a nested array is an array and a value
	// frame). A text that would go deeper is refused with ErrDepth.
	MaxDepth = 1024
	// maxWork bounds the frames one byte's advance expands (each at most
	// once: the expansion of a frame is memoized for the byte), so the
	// work per byte is bounded whatever the grammar; a grammar ambiguous
	// enough to need more is refused with ErrWork.
	maxWork = 1 << 15
)

// ErrDepth and ErrWork are what a matcher's Err reports when it refused
// a text for its bounds, not for the grammar.
var (
	ErrDepth = fmt.Errorf("grammar: the text nests deeper than %d open rules", MaxDepth)
	ErrWork  = fmt.Errorf("grammar: one byte needs more than %d expansions (the grammar is too ambiguous)", maxWork)
)

type frame struct{ state, parent int32 }

// arena holds frames, interned through an open-addressing table. Frames
// are only ever dropped from the end (a mark's truncation): a slot is
// occupied when its frame index is below len(frames) and that frame was
// put in this slot (slot[i]), so slots of dropped frames read as empty
// and the table's load is exactly len(frames) over its size.
type arena struct {
	frames []frame
	depth  []int32 // [frame] frames on its stack, itself included
	slot   []int32 // [frame] its table slot
	table  []int32 // frame index + 1, 0: empty
	tgen   []uint32
	gen    uint32
}

func newArena(n int) *arena {
	size := 1
	for size < 2*n {
		size *= 2
	}
	return &arena{frames: make([]frame, 0, n), depth: make([]int32, 0, n), slot: make([]int32, 0, n),
		table: make([]int32, size), tgen: make([]uint32, size), gen: 1}
}

func (a *arena) reset() {
	a.frames = a.frames[:0]
	a.gen++
	if a.gen == 0 {
		clear(a.tgen)
		a.gen = 1
	}
}

func hashFrame(f frame) uint32 {
	h := uint32(f.state)*0x9e3779b1 ^ uint32(f.parent)*0x85ebca77
	return h ^ h>>15
}

func (a *arena) intern(state, parent int32) int32 {
	f := frame{state, parent}
	if 2*len(a.frames) >= len(a.table) {
		a.grow()
	}
	mask := uint32(len(a.table) - 1)
	for h := hashFrame(f) & mask; ; h = (h + 1) & mask {
		i := a.table[h] - 1
		if a.tgen[h] != a.gen || int(i) >= len(a.frames) || i < 0 || a.slot[i] != int32(h) {
			n := len(a.frames)
			a.frames = append(a.frames, f)
			d := int32(1)
			if parent >= 0 {
				d += a.depth[parent]
			}
			a.depth = append(a.depth[:n], d)
			a.slot = append(a.slot[:n], int32(h))
			a.table[h], a.tgen[h] = int32(n+1), a.gen
			return int32(n)
		}
		if a.frames[i] == f {
			return i
		}
	}
}

func (a *arena) grow() {
	size := 2 * len(a.table)
	a.table, a.tgen = make([]int32, size), make([]uint32, size)
	a.gen = 1
	mask := uint32(size - 1)
	for i, f := range a.frames {
		h := hashFrame(f) & mask
		for a.tgen[h] == a.gen {
			h = (h + 1) & mask
		}
		a.table[h], a.tgen[h] = int32(i+1), a.gen
		a.slot[i] = int32(h)
	}
}

// walker advances stack sets over one arena.
type walker struct {
	g       *Grammar
	a       *arena
	escaped bool // a pop went below the outside frame
	// vis[f] == vgen: frame f was expanded in this step (its stacks are
	// in the set already); work counts this step's expansions.
	vis   []uint32
	vgen  uint32
	work  int
	total uint64 // expansions over the walker's life (tests bound the work with it)
	err   error  // ErrDepth or ErrWork: a stack was dropped for a bound
}

func addUnique(set []int32, f int32) []int32 {
	for _, x := range set {
		if x == f {
			return set
		}
	}
	if len(set) >= maxStacks {
		return set
	}
	return append(set, f)
}

// step starts a set's computation: each frame is expanded once in it.
func (w *walker) step() {
	w.vgen++
	if w.vgen == 0 {
		clear(w.vis)
		w.vgen = 1
	}
	w.work = 0
}

// expand adds to set the stacks frame f stands for: f itself if its
// state reads a byte, the calls it may make, and its parent's stacks if
// its rule may end. A frame expanded before in the step adds nothing new
// (what it adds does not depend on how it was reached), so the work of a
// step is bounded by the frames it reaches, not the paths to them.
func (w *walker) expand(set []int32, f int32, depth int) []int32 {
	if depth > maxExpand {
		return set
	}
	if int(f) >= len(w.vis) {
		n := max(2*len(w.vis), int(f)+1, 256)
		w.vis = append(w.vis, make([]uint32, n-len(w.vis))...)
	}
	if w.vis[f] == w.vgen {
		return set
	}
	w.vis[f] = w.vgen
	w.total++
	if w.work++; w.work > maxWork {
		w.err = ErrWork
		return set
	}
	g := w.g
	fr := w.a.frames[f]
	s := fr.state
	for _, e := range g.out(s) {
		if e.ref < 0 {
			set = addUnique(set, f)
			break
		}
	}
	for _, e := range g.out(s) {
		if e.ref >= 0 {
			if fr.parent >= 0 && w.a.depth[fr.parent] >= MaxDepth-1 {
				w.err = ErrDepth
				continue
			}
			ret := w.a.intern(e.to, fr.parent)
			set = w.expand(set, w.a.intern(g.ruleStart[e.ref], ret), depth+1)
		}
	}
	if g.final[s] {
		switch fr.parent {
		case bottom:
			set = addUnique(set, accept)
		case outside:
			w.escaped = true
		default:
			set = w.expand(set, fr.parent, depth+1)
		}
	}
	return set
}

// advance appends to dst the stacks of set after byte c.
func (w *walker) advance(dst, set []int32, c byte) []int32 {
	w.step()
	for _, f := range set {
		if f < 0 {
			continue
		}
		fr := w.a.frames[f]
		for _, e := range w.g.out(fr.state) {
			if e.ref < 0 && e.lo <= c && c <= e.hi {
				dst = w.expand(dst, w.a.intern(e.to, fr.parent), 0)
			}
		}
	}
	return dst
}

// Matcher follows text through a grammar. It allocates nothing in steady
// state (its buffers grow to the grammar's needs and stay). Not safe for
// concurrent use.
type Matcher struct {
	c      *Compiled
	w      walker
	spare  *arena
	remap  []int32
	rstamp []uint32
	rgen   uint32
	stacks []int32
	buf    [2][]int32
	path   []int32
	seen   []*stateMask
	done   bool // an end-of-generation token was accepted
	// cut: the stacks lost some for a bound; maskErr: the last Mask
	// refused a token for one (see Err).
	cut, maskErr error
}

// NewMatcher returns a matcher at the start of the grammar.
func (c *Compiled) NewMatcher() *Matcher {
	m := &Matcher{c: c, spare: newArena(1024)}
	m.w = walker{g: c.g, a: newArena(1024)}
	m.stacks = make([]int32, 0, 64)
	m.buf[0] = make([]int32, 0, 64)
	m.buf[1] = make([]int32, 0, 64)
	m.path = make([]int32, 0, 64)
	m.seen = make([]*stateMask, 0, 64)
	m.Reset()
	return m
}

// Reset goes back to the start of the grammar.
func (m *Matcher) Reset() {
	m.w.a.reset()
	g := m.c.g
	m.done = false
	m.w.err = nil
	m.w.step()
	m.stacks = m.w.expand(m.stacks[:0], m.w.a.intern(g.ruleStart[g.root], bottom), 0)
	m.cut, m.maskErr = m.w.err, nil
}

// Err reports why the matcher refuses a text for its bounds rather than
// for the grammar (ErrDepth, ErrWork), or nil: the stacks of the text so
// far lost some for a bound, or the last Mask refused a token for one.
// A mask that came out empty with Err set was emptied by the bound.
func (m *Matcher) Err() error {
	if m.cut != nil {
		return m.cut
	}
	return m.maskErr
}

// CanEnd reports whether the text so far is a complete sentence of the
// grammar.
func (m *Matcher) CanEnd() bool {
	for _, f := range m.stacks {
		if f == accept {
			return true
		}
	}
	return false
}

// Done reports whether an end-of-generation token was accepted.
func (m *Matcher) Done() bool { return m.done }

// Dead reports whether nothing can follow (the text left the grammar).
func (m *Matcher) Dead() bool { return len(m.stacks) == 0 }

// run advances stacks over b into the matcher's buffers and returns the
// result (which aliases a buffer).
func (m *Matcher) run(stacks []int32, b []byte) []int32 {
	cur := stacks
	for i, c := range b {
		next := m.w.advance(m.buf[i&1][:0], cur, c)
		m.buf[i&1] = next[:0:cap(next)]
		cur = next
		if len(cur) == 0 {
			break
		}
	}
	return cur
}

// AcceptBytes advances over b and reports whether the text stays in the
// grammar; if not, the matcher is unchanged.
func (m *Matcher) AcceptBytes(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	mark := len(m.w.a.frames)
	m.w.err = nil
	next := m.run(m.stacks, b)
	if len(next) == 0 {
		m.w.a.frames = m.w.a.frames[:mark]
		if m.w.err != nil {
			m.maskErr = m.w.err // refused for a bound
		}
		return false
	}
	m.cut = m.w.err
	m.stacks = append(m.stacks[:0], next...)
	if len(m.w.a.frames) > 4096 {
		m.collect()
	}
	return true
}

// AcceptToken advances over token id and reports whether the grammar
// allows it. An end-of-generation token is allowed where the grammar may
// end.
func (m *Matcher) AcceptToken(id int32) bool {
	v := m.c.v
	if m.done || id < 0 || int(id) >= v.n {
		return false
	}
	if v.isEOG(id) {
		if !m.CanEnd() {
			return false
		}
		m.done = true
		return true
	}
	p := v.piece(id)
	if len(p) == 0 {
		return false
	}
	return m.AcceptBytes(p)
}

// collect copies the live stacks into the spare arena. A frame's parent
// always has a lower index (it is interned first), so one ascending pass
// over the marked frames copies parents before children.
func (m *Matcher) collect() {
	old, nw := m.w.a, m.spare
	nw.reset()
	n := len(old.frames)
	if cap(m.remap) < n {
		m.remap = make([]int32, n, 2*n)
		m.rstamp = make([]uint32, n, 2*n)
		m.rgen = 0
	}
	m.remap, m.rstamp = m.remap[:n], m.rstamp[:n]
	m.rgen++
	if m.rgen == 0 {
		clear(m.rstamp)
		m.rgen = 1
	}
	for _, f := range m.stacks {
		for ; f >= 0 && m.rstamp[f] != m.rgen; f = old.frames[f].parent {
			m.rstamp[f] = m.rgen
		}
	}
	for i := range n {
		if m.rstamp[i] != m.rgen {
			continue
		}
		fr := old.frames[i]
		p := fr.parent
		if p >= 0 {
			p = m.remap[p]
		}
		m.remap[i] = nw.intern(fr.state, p)
	}
	for i, f := range m.stacks {
		if f >= 0 {
			m.stacks[i] = m.remap[f]
		}
	}
	m.w.a, m.spare = nw, old
}

// AllowsPath reports whether the tokens toks may follow, one after the
// other (an end-of-generation token only last), without moving the
// matcher.
func (m *Matcher) AllowsPath(toks []int32) bool {
	v := m.c.v
	if m.done {
		return len(toks) == 0
	}
	mark := len(m.w.a.frames)
	defer func() { m.w.a.frames = m.w.a.frames[:mark] }()
	cur := append(m.path[:0], m.stacks...)
	for i, id := range toks {
		if id < 0 || int(id) >= v.n {
			return false
		}
		if v.isEOG(id) {
			ok := false
			for _, f := range cur {
				ok = ok || f == accept
			}
			return ok && i == len(toks)-1
		}
		p := v.piece(id)
		if len(p) == 0 {
			return false
		}
		next := m.run(cur, p)
		if len(next) == 0 {
			return false
		}
		cur = append(cur[:0], next...)
	}
	m.path = cur[:0]
	return true
}

// tokenFits reports whether token bytes p can follow the single stack f.
func (m *Matcher) tokenFits(f int32, p []byte) bool {
	mark := len(m.w.a.frames)
	var one [1]int32
	one[0] = f
	ok := len(m.run(one[:], p)) > 0
	m.w.a.frames = m.w.a.frames[:mark]
	return ok
}

// Allowed reports whether token id may come next.
func (m *Matcher) Allowed(id int32) bool {
	v := m.c.v
	if m.done || id < 0 || int(id) >= v.n {
		return false
	}
	if v.isEOG(id) {
		return m.CanEnd()
	}
	p := v.piece(id)
	if len(p) == 0 {
		return false
	}
	mark := len(m.w.a.frames)
	ok := len(m.run(m.stacks, p)) > 0
	m.w.a.frames = m.w.a.frames[:mark]
	return ok
}

// Mask sets in dst (one bit per token, len(dst) >= (vocab+63)/64) the
// tokens that may come next: the tokens the cached per-state sets accept,
// the context-dependent ones checked against their stack, and the
// end-of-generation tokens where the grammar may end.
func (m *Matcher) Mask(dst []uint64) {
	words := (m.c.v.n + 63) / 64
	dst = dst[:words]
	clear(dst)
	m.w.err = nil
	if m.done {
		return
	}
	seen := m.seen[:0]
	for _, f := range m.stacks {
		if f == accept {
			for _, id := range m.c.v.eog {
				dst[id>>6] |= 1 << (id & 63)
			}
			continue
		}
		sm := m.maskOf(f)
		if m.nearCap(f) {
			m.maskChecked(dst, f, sm)
			continue
		}
		dup := false
		for _, x := range seen {
			dup = dup || x == sm
		}
		if !dup {
			seen = append(seen, sm)
			if sm.acc != nil {
				for i, w := range sm.acc {
					dst[i] |= w
				}
			} else {
				for _, id := range sm.accList {
					dst[id>>6] |= 1 << (id & 63)
				}
			}
		}
		for _, id := range sm.unc {
			if dst[id>>6]&(1<<(id&63)) == 0 && m.tokenFits(f, m.c.v.piece(id)) {
				dst[id>>6] |= 1 << (id & 63)
			}
		}
	}
	clear(seen)
	m.seen = seen[:0]
	m.maskErr = m.w.err
}

// nearCap reports whether a token could take stack f past MaxDepth: the
// precomputed masks assume a stack of any depth (a byte pushes at most a
// few frames; a token's bytes, four per byte here).
func (m *Matcher) nearCap(f int32) bool {
	return int(m.w.a.depth[f])+4*m.c.v.maxLen >= MaxDepth
}

// maskChecked sets in dst the tokens of sm that fit stack f, each checked
// against the stack (near the depth bound only: it tries every token the
// precomputed mask accepts).
func (m *Matcher) maskChecked(dst []uint64, f int32, sm *stateMask) {
	try := func(id int32) {
		if dst[id>>6]&(1<<(id&63)) == 0 && m.tokenFits(f, m.c.v.piece(id)) {
			dst[id>>6] |= 1 << (id & 63)
		}
	}
	if sm.acc != nil {
		for i, w := range sm.acc {
			for ; w != 0; w &= w - 1 {
				try(int32(i*64 + bits.TrailingZeros64(w)))
			}
		}
	} else {
		for _, id := range sm.accList {
			try(id)
		}
	}
	for _, id := range sm.unc {
		try(id)
	}
}

// maskOf returns the precomputed mask of frame f: its state's, or for a
// shallow rule's state, the state's on top of its return state.
func (m *Matcher) maskOf(f int32) *stateMask {
	fr := m.w.a.frames[f]
	if g := m.c.g; g.shallow[g.ruleOf[fr.state]] && fr.parent >= 0 {
		return m.c.pairMask(fr.state, m.w.a.frames[fr.parent].state)
	}
	return m.c.stateMask(fr.state)
}

// Forced appends to dst the bytes that must come next whatever is
// chosen (where every stack reads the same single byte and the grammar
// cannot end), at most max of them.
func (m *Matcher) Forced(dst []byte, max int) []byte {
	if m.done {
		return dst
	}
	mark := len(m.w.a.frames)
	cur := m.stacks
	for i := 0; i < max; i++ {
		c, ok := m.onlyByte(cur)
		if !ok {
			break
		}
		dst = append(dst, c)
		next := m.w.advance(m.buf[i&1][:0], cur, c)
		m.buf[i&1] = next[:0:cap(next)]
		cur = next
	}
	m.w.a.frames = m.w.a.frames[:mark]
	return dst
}

func (m *Matcher) onlyByte(set []int32) (byte, bool) {
	var c byte
	found := false
	for _, f := range set {
		if f < 0 {
			return 0, false
		}
		for _, e := range m.c.g.out(m.w.a.frames[f].state) {
			if e.ref >= 0 {
				continue
			}
			if e.lo != e.hi || found && e.lo != c {
				return 0, false
			}
			c, found = e.lo, true
		}
	}
	return c, found
}
