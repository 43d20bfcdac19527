package grammar

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"unicode/utf8"
)

// A compile is bounded by construction: every structure it builds is
// counted as it grows and the compile ends, with an error wrapping
// ErrTooLarge that names the limit and the rule that reached it, the
// moment one passes its budget (gigabytes of edges could otherwise come
// from a 100-byte schema: five nested {0,10}). The budgets are far above
// what Home Assistant's 17 tools need (6,419 states), the largest
// grammars seen; a compile refused at them grows the heap by under 50 MB and takes
// 0.2-0.5 s (TestCompileBudget, TestServeGrammarBounds, on a loaded 2-core machine).
const (
	maxBuildStates = 4 * MaxStates  // states of the epsilon automaton
	maxBuildEdges  = 8 * MaxStates  // its byte, call and epsilon edges
	maxEdges       = 4 * MaxStates  // edges of the epsilon-free automaton (real grammars have 1.2-2 per state)
	maxClosure     = 16 * MaxStates // states the epsilon closures visit, in all
	maxChecks      = 32 * MaxStates // states the left-recursion check visits
)

// ErrTooLarge is wrapped (with ErrSyntax) by the error of a grammar whose
// compile would pass a budget.
var ErrTooLarge = errors.New("too large to compile")

// push appends v to s, doubling a full s (append grows large slices by
// a quarter: a compile near its budgets would allocate five times its
// lists, not twice).
func push[T any](s []T, v T) []T {
	if len(s) == cap(s) {
		s = append(make([]T, 0, 2*cap(s)+64), s...)
	}
	return append(s, v)
}

func tooLarge(rule, what string, limit int) error {
	return fmt.Errorf("%w: %w: rule %q expands to more than %d %s", ErrSyntax, ErrTooLarge, rule, limit, what)
}

// edge is one transition of a rule's automaton: a byte in [lo, hi], or
// (ref >= 0) a call of rule ref, after which the rule goes on at to.
type edge struct {
	lo, hi byte
	ref    int32
	to     int32
}

// Grammar is a compiled grammar: one epsilon-free automaton per rule that
// was not inlined. It is immutable and safe for concurrent use.
type Grammar struct {
	first     []int32 // [state] first edge; edges of s: edges[first[s]:first[s+1]]
	edges     []edge
	final     []bool  // [state] the rule may end here
	ruleOf    []int32 // [state]
	ruleStart []int32 // [rule]
	ruleNames []string
	called    []bool // [rule] some edge calls it (else ending it ends the grammar)
	shallow   []bool // [rule] its states' masks are per return state
	root      int32
	hash      [32]byte
}

// Hash identifies the grammar's source.
func (g *Grammar) Hash() [32]byte { return g.hash }

// States is the number of automaton states.
func (g *Grammar) States() int { return len(g.final) }

func (g *Grammar) out(s int32) []edge { return g.edges[g.first[s]:g.first[s+1]] }

// hasBytes reports whether state s reads a byte.
func (g *Grammar) hasBytes(s int32) bool {
	for _, e := range g.out(s) {
		if e.ref < 0 {
			return true
		}
	}
	return false
}

// builder makes the epsilon automaton.
type builder struct {
	rules  map[string]*expr
	index  map[string]int32 // kept rules
	inline map[string]bool
	// The epsilon automaton as flat edge lists (grouped by state in
	// removeEpsilons): epsilon edges from/to, byte and call edges.
	epsFrom, epsTo []int32
	edgeFrom       []int32
	edgeList       []edge
	rule           []int32 // [state]
	origin         []int32 // [state] the rule (index in names) it was built for, inlined ones apart
	names          []string
	nameIdx        map[string]int32
	whereIdx       int32
	seqs           map[*expr][][]byteRange
	cur            int32
	where          string // the rule being built (an inlined one inside its caller)
	ctx            context.Context
	err            error
}

func (b *builder) state() int32 {
	if b.err == nil {
		switch {
		case len(b.rule) >= maxBuildStates:
			b.err = tooLarge(b.where, "states", maxBuildStates)
		case len(b.rule)&1023 == 0 && b.ctx.Err() != nil:
			b.err = b.ctx.Err()
		}
	}
	if b.err != nil && len(b.rule) > 0 {
		return int32(len(b.rule) - 1) // built no further: the compile fails
	}
	b.rule = push(b.rule, b.cur)
	b.origin = push(b.origin, b.whereIdx)
	return int32(len(b.rule) - 1)
}

func (b *builder) full() bool {
	if b.err == nil && len(b.epsFrom)+len(b.edgeFrom) >= maxBuildEdges {
		b.err = tooLarge(b.where, "edges", maxBuildEdges)
	}
	return b.err != nil
}

func (b *builder) epsilon(from, to int32) {
	if b.full() {
		return
	}
	b.epsFrom = push(b.epsFrom, from)
	b.epsTo = push(b.epsTo, to)
}

func (b *builder) edge(from int32, e edge) {
	if b.full() {
		return
	}
	b.edgeFrom = push(b.edgeFrom, from)
	b.edgeList = push(b.edgeList, e)
}

func (b *builder) fresh(from int32) int32 {
	s := b.state()
	b.epsilon(from, s)
	return s
}

func (b *builder) bytes(from int32, seq []byteRange) int32 {
	for _, r := range seq {
		s := b.state()
		b.edge(from, edge{lo: r.lo, hi: r.hi, ref: -1, to: s})
		from = s
	}
	return from
}

// build adds e's automaton from state from and returns its end state.
func (b *builder) build(e *expr, from int32, depth int) int32 {
	if b.err != nil {
		return from
	}
	if depth > 1000 {
		b.err = fmt.Errorf("%w: rules inline too deeply", ErrSyntax)
		return from
	}
	switch e.kind {
	case eLit:
		var buf [4]byte
		for _, r := range e.lit {
			n := utf8.EncodeRune(buf[:], r)
			for _, c := range buf[:n] {
				from = b.bytes(from, []byteRange{{c, c}})
			}
		}
		return from
	case eClass:
		end := b.state()
		seqs, ok := b.seqs[e]
		if !ok {
			seqs = utf8Sequences(e.ranges)
			b.seqs[e] = seqs
		}
		for _, seq := range seqs {
			last := b.bytes(from, seq[:len(seq)-1])
			r := seq[len(seq)-1]
			b.edge(last, edge{lo: r.lo, hi: r.hi, ref: -1, to: end})
		}
		return end
	case eRef:
		if b.inline[e.name] {
			outer, outerIdx := b.where, b.whereIdx
			b.where, b.whereIdx = e.name, b.nameIdx[e.name]
			end := b.build(b.rules[e.name], from, depth+1)
			b.where, b.whereIdx = outer, outerIdx
			return end
		}
		s := b.state()
		b.edge(from, edge{ref: b.index[e.name], to: s})
		return s
	case eSeq:
		for _, s := range e.subs {
			from = b.build(s, from, depth+1)
			if b.err != nil {
				return from
			}
		}
		return from
	case eAlt:
		end := b.state()
		for _, s := range e.subs {
			b.epsilon(b.build(s, b.fresh(from), depth+1), end)
			if b.err != nil {
				return end
			}
		}
		return end
	case eRepeat:
		sub := e.subs[0]
		for range e.min {
			from = b.build(sub, b.fresh(from), depth+1)
			if b.err != nil {
				return from
			}
		}
		if b.err != nil {
			return from
		}
		if e.max < 0 {
			loop := b.fresh(from)
			b.epsilon(b.build(sub, b.fresh(loop), depth+1), loop)
			return loop
		}
		end := b.state()
		b.epsilon(from, end)
		for range e.max - e.min {
			from = b.build(sub, b.fresh(from), depth+1)
			b.epsilon(from, end)
			if b.err != nil {
				return from
			}
		}
		return end
	}
	panic("grammar: unknown expression")
}

func refs(e *expr, f func(string)) {
	if e.kind == eRef {
		f(e.name)
	}
	for _, s := range e.subs {
		refs(s, f)
	}
}

func hasLoop(e *expr) bool {
	if e.kind == eRepeat && e.max < 0 {
		return true
	}
	for _, s := range e.subs {
		if hasLoop(s) {
			return true
		}
	}
	return false
}

// exprSize estimates the states e expands to (a called rule counts one).
func exprSize(e *expr) int {
	n := 0
	switch e.kind {
	case eLit:
		n = len(e.lit)
	case eClass:
		n = 2 * len(e.ranges)
	case eRef:
		n = 1
	case eSeq, eAlt:
		for _, s := range e.subs {
			n += exprSize(s)
		}
		n++
	case eRepeat:
		k := e.max
		if k < 0 {
			k = e.min + 1
		}
		n = exprSize(e.subs[0])*max(k, 1) + 1
	}
	return min(n, 1<<20)
}

// Inlining a loop-free rule copies its states into every caller; past
// this many copied states in all, a rule used many times is called
// instead. The masks of a called rule's states would mostly depend on
// what follows it (every token that reaches its end is checked against
// the stack at run time), so the masks of such a rule's states are
// computed per return state (see Compiled): as precise as inlined, at a
// fraction of the states. Home Assistant's tools use the whitespace rule
// (up to two newlines and 20 spaces, llama.cpp's) 650 times: inlined,
// they were 60% of the automaton.
var inlineBudget = 2000

// inlinable chooses the rules substituted into their callers: those not
// on a cycle, other than root, that are used once or hold no unbounded
// loop (a loop inlined in many places would need its masks computed for
// every copy) and whose copies stay within inlineBudget; shallow are the
// loop-free rules left out for size.
func inlinable(rules map[string]*expr, order []string) (in, shallow map[string]bool) {
	// A use inside a repetition counts as many uses as the repetition
	// makes copies (char{0,10000} is 10,000 uses of char).
	uses := map[string]int{}
	var count func(e *expr, mult int)
	count = func(e *expr, mult int) {
		switch e.kind {
		case eRef:
			uses[e.name] = min(uses[e.name]+mult, 1<<30)
		case eRepeat:
			mult = min(mult*max(e.max, e.min+1, 1), 1<<30)
		}
		for _, s := range e.subs {
			count(s, mult)
		}
	}
	for _, n := range order {
		count(rules[n], 1)
	}
	reach := func(from string) map[string]bool {
		seen := map[string]bool{}
		var walk func(string)
		walk = func(n string) {
			refs(rules[n], func(m string) {
				if !seen[m] {
					seen[m] = true
					walk(m)
				}
			})
		}
		walk(from)
		return seen
	}
	loops := map[string]bool{}
	for _, n := range order {
		if hasLoop(rules[n]) {
			loops[n] = true
		}
	}
	// fullSize: a rule's states with the rules it uses inlined (those on
	// a cycle count one: they are called).
	sizes := map[string]int{}
	var fullSize func(n string) int
	fullSize = func(n string) int {
		if v, ok := sizes[n]; ok {
			return v
		}
		sizes[n] = 1 // while it is computed: a cycle counts one
		v := exprSize(rules[n])
		refs(rules[n], func(m string) { v = min(v+fullSize(m), 1<<20) })
		sizes[n] = v
		return v
	}
	in, shallow = map[string]bool{}, map[string]bool{}
	for _, n := range order {
		r := reach(n)
		if n == "root" || r[n] {
			continue
		}
		loop := loops[n]
		for m := range r {
			loop = loop || loops[m]
		}
		switch {
		case uses[n] <= 1:
			in[n] = true
		case loop:
		case len(r) == 0 && uses[n]*exprSize(rules[n]) > inlineBudget:
			shallow[n] = true
		case uses[n]*fullSize(n) > max(MaxStates/4, inlineBudget):
			// Copies past a quarter of the states: called (ten thousand
			// items of an array).
		default:
			in[n] = true
		}
	}
	return in, shallow
}

// compile builds the automata of rules, root first, and when its lists
// grew large (a compile refused for a budget, or nearly so), hands their
// memory back to the system once they are garbage (off the caller's
// path: the collector runs in a goroutine of its own).
func compile(ctx context.Context, rules map[string]*expr, order []string, srcLen int) (*Grammar, error) {
	var size int
	g, err := compileSized(ctx, rules, order, srcLen, &size)
	if size > MaxStates {
		go debug.FreeOSMemory()
	}
	return g, err
}

// compileSized builds the automata of rules, root first.
// srcLen sizes the builder's lists (about one epsilon state per source
// byte for the schema grammars), so that they grow once or twice, not a
// dozen times.
func compileSized(ctx context.Context, rules map[string]*expr, order []string, srcLen int, size *int) (*Grammar, error) {
	inline, shallow := inlinable(rules, order)
	b := &builder{rules: rules, index: map[string]int32{}, inline: inline, seqs: map[*expr][][]byteRange{}, ctx: ctx}
	defer func() { *size = len(b.rule) + len(b.epsFrom) + len(b.edgeFrom) }()
	est := min(srcLen+64, 4*MaxStates)
	b.rule = make([]int32, 0, est)
	b.origin = make([]int32, 0, est)
	b.names, b.nameIdx = order, make(map[string]int32, len(order))
	for i, n := range order {
		b.nameIdx[n] = int32(i)
	}
	b.epsFrom, b.epsTo = make([]int32, 0, est), make([]int32, 0, est)
	b.edgeFrom, b.edgeList = make([]int32, 0, est), make([]edge, 0, est)
	var kept []string
	kept = append(kept, "root")
	for _, n := range order {
		if n != "root" && !b.inline[n] {
			kept = append(kept, n)
		}
	}
	for i, n := range kept {
		b.index[n] = int32(i)
	}
	starts := make([]int32, len(kept))
	ends := make([]int32, len(kept))
	for i, n := range kept {
		b.cur, b.where, b.whereIdx = int32(i), n, b.nameIdx[n]
		starts[i] = b.state()
		ends[i] = b.build(rules[n], starts[i], 0)
		if b.err != nil {
			return nil, b.err
		}
	}
	g, err := removeEpsilons(b, starts, ends)
	if err != nil {
		return nil, err
	}
	g.ruleNames = kept
	g.shallow = make([]bool, len(kept))
	for i, n := range kept {
		g.shallow[i] = shallow[n]
	}
	var src strings.Builder
	for _, n := range order {
		fmt.Fprintf(&src, "%s ::= %s\n", n, exprString(rules[n]))
	}
	g.hash = sha256.Sum256([]byte(src.String()))
	if err := g.checkLeftRecursion(ctx); err != nil {
		return nil, err
	}
	return g, nil
}

// removeEpsilons gives every state the byte and call edges of its
// epsilon closure and keeps the states those edges reach, within the
// budgets.
func removeEpsilons(b *builder, starts, ends []int32) (*Grammar, error) {
	n := len(b.rule)
	isEnd := make([]bool, n)
	for _, e := range ends {
		isEnd[e] = true
	}
	// Group the edge lists by state (counting sort).
	group := func(from []int32) []int32 {
		start := make([]int32, n+1)
		for _, f := range from {
			start[f+1]++
		}
		for i := 1; i <= n; i++ {
			start[i] += start[i-1]
		}
		return start
	}
	epsStart := group(b.epsFrom)
	eps := make([]int32, len(b.epsTo))
	next := append([]int32(nil), epsStart[:n]...)
	for i, f := range b.epsFrom {
		eps[next[f]] = b.epsTo[i]
		next[f]++
	}
	edgeStart := group(b.edgeFrom)
	edges := make([]edge, len(b.edgeList))
	copy(next, edgeStart[:n])
	for i, f := range b.edgeFrom {
		edges[next[f]] = b.edgeList[i]
		next[f]++
	}
	stamp := make([]int32, n)
	for i := range stamp {
		stamp[i] = -1
	}
	stack := make([]int32, 0, 64)
	newID := make([]int32, n)
	for i := range newID {
		newID[i] = -1
	}
	order := make([]int32, 0, n/2)
	add := func(s int32) {
		if newID[s] < 0 {
			newID[s] = int32(len(order))
			order = append(order, s)
		}
	}
	for _, s := range starts {
		add(s)
	}
	// Each kept state's closure edges, written in place with targets
	// still the epsilon automaton's and renumbered after (the builder
	// never makes two equal edges, and a closure visits a state once,
	// so the lists need no deduplication).
	g := &Grammar{edges: make([]edge, 0, min(2*len(edges), maxEdges)), first: make([]int32, 0, n/2+1), final: make([]bool, 0, n/2)}
	visits := 0
	for i := 0; i < len(order); i++ {
		s := order[i]
		name := b.names[b.origin[s]]
		switch {
		case i >= MaxStates:
			return nil, tooLarge(name, "states", MaxStates)
		case len(g.edges) > maxEdges:
			return nil, tooLarge(name, "edges once its empty moves are resolved", maxEdges)
		case visits > maxClosure:
			return nil, tooLarge(name, "steps resolving its empty moves", maxClosure)
		case i&255 == 0 && b.ctx.Err() != nil:
			return nil, b.ctx.Err()
		}
		g.first = append(g.first, int32(len(g.edges)))
		fin := false
		stack = append(stack[:0], s)
		stamp[s] = s
		for len(stack) > 0 {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			// One closure may reach most of the automaton: the budgets
			// are checked inside it too.
			if visits++; visits > maxClosure {
				return nil, tooLarge(name, "steps resolving its empty moves", maxClosure)
			}
			if len(g.edges) > maxEdges {
				return nil, tooLarge(name, "edges once its empty moves are resolved", maxEdges)
			}
			fin = fin || isEnd[x]
			for _, e := range edges[edgeStart[x]:edgeStart[x+1]] {
				g.edges = push(g.edges, e)
				add(e.to)
			}
			for _, y := range eps[epsStart[x]:epsStart[x+1]] {
				if stamp[y] != s {
					stamp[y] = s
					stack = append(stack, y)
				}
			}
		}
		g.final = append(g.final, fin)
	}
	g.first = append(g.first, int32(len(g.edges)))
	for i := range g.edges {
		g.edges[i].to = newID[g.edges[i].to]
	}
	g.ruleOf = make([]int32, len(order))
	for i, s := range order {
		g.ruleOf[i] = b.rule[s]
	}
	g.ruleStart = make([]int32, len(starts))
	for i, s := range starts {
		g.ruleStart[i] = newID[s]
	}
	g.called = make([]bool, len(starts))
	for _, e := range g.edges {
		if e.ref >= 0 {
			g.called[e.ref] = true
		}
	}
	return g, nil
}

// checkLeftRecursion refuses a rule that can call itself before reading
// a byte (the matcher would never get to a byte).
func (g *Grammar) checkLeftRecursion(ctx context.Context) error {
	// nullable rules: fixed point.
	nullable := make([]bool, len(g.ruleStart))
	visits := 0
	over := func(r int) error {
		if visits > maxChecks {
			return tooLarge(g.ruleNames[r], "steps checking for left recursion", maxChecks)
		}
		return ctx.Err()
	}
	for changed := true; changed; {
		changed = false
		for r, s := range g.ruleStart {
			if !nullable[r] && g.reachesFinal(s, nullable, &visits) {
				nullable[r], changed = true, true
			}
			if err := over(r); err != nil {
				return err
			}
		}
	}
	seen := make([]int32, len(g.final)) // rule+1 whose walk saw the state
	for r := range g.ruleStart {
		if err := over(r); err != nil {
			return err
		}
		var walk func(s int32) bool
		walk = func(s int32) bool {
			if seen[s] == int32(r)+1 {
				return false
			}
			visits++
			seen[s] = int32(r) + 1
			for _, e := range g.out(s) {
				if e.ref < 0 {
					continue
				}
				if int(e.ref) == r {
					return true
				}
				if walk(g.ruleStart[e.ref]) || nullable[e.ref] && walk(e.to) {
					return true
				}
			}
			return false
		}
		if walk(g.ruleStart[r]) {
			return fmt.Errorf("%w: rule %q is left-recursive", ErrSyntax, g.ruleNames[r])
		}
	}
	return nil
}

// reachesFinal reports whether state s reaches a final state through
// calls of nullable rules only.
func (g *Grammar) reachesFinal(s int32, nullable []bool, visits *int) bool {
	seen := map[int32]bool{}
	var walk func(int32) bool
	walk = func(s int32) bool {
		if seen[s] {
			return false
		}
		*visits++
		seen[s] = true
		if g.final[s] {
			return true
		}
		for _, e := range g.out(s) {
			if e.ref >= 0 && nullable[e.ref] && walk(e.to) {
				return true
			}
		}
		return false
	}
	return walk(s)
}

func exprString(e *expr) string {
	switch e.kind {
	case eLit:
		return fmt.Sprintf("%q", string(e.lit))
	case eClass:
		var sb strings.Builder
		sb.WriteByte('[')
		for _, r := range e.ranges {
			fmt.Fprintf(&sb, "%x-%x,", r.lo, r.hi)
		}
		sb.WriteByte(']')
		return sb.String()
	case eRef:
		return e.name
	case eSeq, eAlt:
		parts := make([]string, len(e.subs))
		for i, s := range e.subs {
			parts[i] = exprString(s)
		}
		sep := " "
		if e.kind == eAlt {
			sep = " | "
		}
		return "(" + strings.Join(parts, sep) + ")"
	case eRepeat:
		return fmt.Sprintf("%s{%d,%d}", exprString(e.subs[0]), e.min, e.max)
	}
	return "?"
}

type byteRange struct{ lo, hi byte }

// utf8Sequences turns code point ranges into sequences of byte ranges
// whose concatenations are exactly the UTF-8 encodings of the ranges
// (surrogates excluded).
func utf8Sequences(rs []crange) [][]byteRange {
	var out [][]byteRange
	var split func(lo, hi rune)
	split = func(lo, hi rune) {
		if lo > hi {
			return
		}
		if lo <= 0xDFFF && hi >= 0xD800 {
			split(lo, 0xD7FF)
			split(0xE000, hi)
			return
		}
		for _, b := range []rune{0x7F, 0x7FF, 0xFFFF} {
			if lo <= b && hi > b {
				split(lo, b)
				split(b+1, hi)
				return
			}
		}
		if hi < 0x80 {
			out = append(out, []byteRange{{byte(lo), byte(hi)}})
			return
		}
		n := utf8.RuneLen(lo)
		for i := 1; i < n; i++ {
			m := rune(1)<<(6*i) - 1
			if lo&^m != hi&^m {
				if lo&m != 0 {
					split(lo, lo|m)
					split((lo|m)+1, hi)
					return
				}
				if hi&m != m {
					split(lo, (hi&^m)-1)
					split(hi&^m, hi)
					return
				}
			}
		}
		var a, z [4]byte
		utf8.EncodeRune(a[:], lo)
		utf8.EncodeRune(z[:], hi)
		seq := make([]byteRange, n)
		for i := range n {
			seq[i] = byteRange{a[i], z[i]}
		}
		out = append(out, seq)
	}
	for _, r := range normalize(rs) {
		split(max(r.lo, 0), min(r.hi, utf8.MaxRune))
	}
	return out
}
