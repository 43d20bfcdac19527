// Package grammar constrains generation to a formal language: a GBNF
// grammar (llama.cpp's notation) or a JSON Schema, turned into a byte-level
// pushdown automaton and, per model vocabulary, into token masks.
//
// A grammar is compiled into one nondeterministic finite automaton per
// rule whose edges read a byte range or call another rule. A Matcher keeps
// the set of stacks of (state) frames the text so far can be in, each with
// a byte edge on top; an empty stack means the grammar is complete.
// Non-recursive rules are inlined into their callers, so most of a JSON
// grammar is one automaton and most tokens can be classified without the
// stack below the top frame: for every automaton state, the vocabulary is
// walked once as a trie and split into tokens accepted whatever the
// context, tokens rejected whatever the context, and the few that leave
// the top rule and must be checked against the whole stack at run time (as
// XGrammar does).
package grammar

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// ErrSyntax is wrapped by every error a malformed grammar gets.
var ErrSyntax = errors.New("grammar")

// Limits bound what a grammar may cost before it is compiled.
const (
	MaxGrammarBytes = 256 << 10 // GBNF source
	MaxStates       = 200_000   // automaton states after expansion
	maxRepeat       = 10_000    // the largest bound of {m,n}
)

type exprKind uint8

const (
	eLit   exprKind = iota // a sequence of code points
	eClass                 // one code point from ranges
	eRef                   // another rule
	eSeq
	eAlt
	eRepeat // sub{min,max}; max < 0: unbounded
)

type crange struct{ lo, hi rune }

type expr struct {
	kind     exprKind
	lit      []rune
	ranges   []crange // eClass, already complemented if negated
	name     string   // eRef
	subs     []*expr  // eSeq, eAlt, eRepeat (one)
	min, max int
}

type parser struct {
	src   string
	pos   int
	rules map[string]*expr
	order []string
}

func (p *parser) errf(format string, a ...any) error {
	line := 1 + strings.Count(p.src[:p.pos], "\n")
	return fmt.Errorf("%w: line %d: %s", ErrSyntax, line, fmt.Sprintf(format, a...))
}

// Parse reads a GBNF grammar as llama.cpp writes them: rules
// `name ::= alternatives`, literals in double quotes, character classes in
// brackets (ranges, negation, escapes \n \t \r \\ \xHH \uHHHH \UHHHHHHHH),
// `.` for any character, groups, `|`, `*`, `+`, `?`, `{m}`, `{m,}`,
// `{m,n}` and `#` comments. The start rule is root.
//
// Grammars are immutable: the last few parsed are kept by their source's
// hash, and parsing the same source again returns the same Grammar (front
// ends check a request's grammar, the engine compiles it, and Home
// Assistant sends the same tools with every request).
func Parse(src string) (*Grammar, error) {
	return ParseContext(context.Background(), src)
}

// ParseContext is Parse that ctx ends (a client gone, a request's time
// over): the compile checks it as it goes and returns ctx's error.
//
// At most compileSlots compiles run at once (each is bounded, but thirty
// clients sending a schema at the budget would hold thirty times its
// memory); the others wait for a slot, or for ctx. A grammar refused for
// a budget is remembered by its hash and refused again at once.
func ParseContext(ctx context.Context, src string) (*Grammar, error) {
	key := sha256.Sum256([]byte(src))
	if g := parsed.get(key); g != nil {
		return g, nil
	}
	if err := refused.get(key); err != nil {
		return nil, err
	}
	select {
	case compileSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-compileSlots }()
	if g := parsed.get(key); g != nil { // compiled while this one waited
		return g, nil
	}
	g, err := parseContext(ctx, src)
	switch {
	case err == nil:
		parsed.put(key, g)
	case errors.Is(err, ErrTooLarge):
		refused.put(key, err)
	}
	return g, err
}

// compileSlots bounds the compiles that run at once.
var compileSlots = make(chan struct{}, 2)

// refusedCache keeps the last grammars refused for a budget.
type refusedCache struct {
	mu    sync.Mutex
	m     map[[32]byte]error
	order [][32]byte
}

var refused refusedCache

func (c *refusedCache) get(k [32]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *refusedCache) put(k [32]byte, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[[32]byte]error{}
	}
	if _, ok := c.m[k]; ok {
		return
	}
	if len(c.order) >= 2*cacheSize {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[k] = err
	c.order = append(c.order, k)
}

func parse(src string) (*Grammar, error) { return parseContext(context.Background(), src) }

func parseContext(ctx context.Context, src string) (*Grammar, error) {
	if len(src) > MaxGrammarBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrSyntax, len(src), MaxGrammarBytes)
	}
	p := &parser{src: src, rules: map[string]*expr{}}
	if err := p.parseRules(); err != nil {
		return nil, err
	}
	if _, ok := p.rules["root"]; !ok {
		return nil, fmt.Errorf("%w: no root rule", ErrSyntax)
	}
	for _, name := range p.order {
		if err := p.checkRefs(p.rules[name]); err != nil {
			return nil, err
		}
	}
	return compile(ctx, p.rules, p.order, len(src))
}

func (p *parser) checkRefs(e *expr) error {
	if e.kind == eRef {
		if _, ok := p.rules[e.name]; !ok {
			return fmt.Errorf("%w: rule %q is used but not defined", ErrSyntax, e.name)
		}
	}
	for _, s := range e.subs {
		if err := p.checkRefs(s); err != nil {
			return err
		}
	}
	return nil
}

func isNameByte(c byte) bool {
	return c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// skip passes spaces, newlines and comments.
func (p *parser) skip() {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		default:
			return
		}
	}
}

func (p *parser) name() string {
	start := p.pos
	for p.pos < len(p.src) && isNameByte(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

// atRuleStart reports whether a `name ::=` follows.
func (p *parser) atRuleStart() bool {
	save := p.pos
	defer func() { p.pos = save }()
	if p.name() == "" {
		return false
	}
	p.skip()
	return strings.HasPrefix(p.src[p.pos:], "::=")
}

func (p *parser) parseRules() error {
	for {
		p.skip()
		if p.pos >= len(p.src) {
			return nil
		}
		n := p.name()
		if n == "" {
			return p.errf("expected a rule name, found %q", p.src[p.pos:min(p.pos+10, len(p.src))])
		}
		p.skip()
		if !strings.HasPrefix(p.src[p.pos:], "::=") {
			return p.errf("expected ::= after %q", n)
		}
		p.pos += 3
		e, err := p.alternatives(0)
		if err != nil {
			return err
		}
		if _, dup := p.rules[n]; dup {
			return p.errf("rule %q defined twice", n)
		}
		p.rules[n] = e
		p.order = append(p.order, n)
	}
}

func (p *parser) alternatives(depth int) (*expr, error) {
	if depth > 100 {
		return nil, p.errf("groups nested too deeply")
	}
	var alts []*expr
	for {
		s, err := p.sequence(depth)
		if err != nil {
			return nil, err
		}
		alts = append(alts, s)
		p.skip()
		if p.pos < len(p.src) && p.src[p.pos] == '|' {
			p.pos++
			continue
		}
		break
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return &expr{kind: eAlt, subs: alts}, nil
}

func (p *parser) sequence(depth int) (*expr, error) {
	seq := &expr{kind: eSeq}
	for {
		p.skip()
		if p.pos >= len(p.src) {
			return seq, nil
		}
		c := p.src[p.pos]
		var item *expr
		switch {
		case c == '|' || c == ')':
			return seq, nil
		case c == '"':
			p.pos++
			var lit []rune
			for {
				if p.pos >= len(p.src) {
					return nil, p.errf("unterminated literal")
				}
				if p.src[p.pos] == '"' {
					p.pos++
					break
				}
				r, err := p.char()
				if err != nil {
					return nil, err
				}
				lit = append(lit, r)
			}
			item = &expr{kind: eLit, lit: lit}
		case c == '[':
			p.pos++
			neg := false
			if p.pos < len(p.src) && p.src[p.pos] == '^' {
				neg, p.pos = true, p.pos+1
			}
			var rs []crange
			for {
				if p.pos >= len(p.src) {
					return nil, p.errf("unterminated character class")
				}
				if p.src[p.pos] == ']' {
					p.pos++
					break
				}
				lo, err := p.char()
				if err != nil {
					return nil, err
				}
				hi := lo
				if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
					p.pos++
					if hi, err = p.char(); err != nil {
						return nil, err
					}
				}
				if hi < lo {
					return nil, p.errf("character range %q-%q is reversed", lo, hi)
				}
				rs = append(rs, crange{lo, hi})
			}
			if neg {
				rs = complement(rs)
			}
			item = &expr{kind: eClass, ranges: rs}
		case c == '.':
			p.pos++
			item = &expr{kind: eClass, ranges: complement(nil)}
		case c == '(':
			p.pos++
			e, err := p.alternatives(depth + 1)
			if err != nil {
				return nil, err
			}
			p.skip()
			if p.pos >= len(p.src) || p.src[p.pos] != ')' {
				return nil, p.errf("expected )")
			}
			p.pos++
			item = e
		case isNameByte(c):
			if p.atRuleStart() {
				return seq, nil
			}
			item = &expr{kind: eRef, name: p.name()}
		default:
			return nil, p.errf("unexpected %q", c)
		}
		item, err := p.quantifier(item)
		if err != nil {
			return nil, err
		}
		seq.subs = append(seq.subs, item)
	}
}

func (p *parser) quantifier(item *expr) (*expr, error) {
	for p.pos < len(p.src) {
		min, max := 0, 0
		switch p.src[p.pos] {
		case '*':
			min, max = 0, -1
			p.pos++
		case '+':
			min, max = 1, -1
			p.pos++
		case '?':
			min, max = 0, 1
			p.pos++
		case '{':
			end := strings.IndexByte(p.src[p.pos:], '}')
			if end < 0 {
				return nil, p.errf("unterminated {")
			}
			body := strings.ReplaceAll(p.src[p.pos+1:p.pos+end], " ", "")
			p.pos += end + 1
			a, b, comma := strings.Cut(body, ",")
			var err error
			if min, err = strconv.Atoi(a); err != nil || min < 0 {
				return nil, p.errf("bad repetition {%s}", body)
			}
			switch {
			case !comma:
				max = min
			case b == "":
				max = -1
			default:
				if max, err = strconv.Atoi(b); err != nil || max < min {
					return nil, p.errf("bad repetition {%s}", body)
				}
			}
			if min > maxRepeat || max > maxRepeat {
				return nil, p.errf("repetition {%s} exceeds %d", body, maxRepeat)
			}
		default:
			return item, nil
		}
		item = &expr{kind: eRepeat, subs: []*expr{item}, min: min, max: max}
	}
	return item, nil
}

// char reads one code point of a literal or class, with escapes.
func (p *parser) char() (rune, error) {
	c := p.src[p.pos]
	if c != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		if r == utf8.RuneError && n <= 1 {
			return 0, p.errf("invalid UTF-8")
		}
		p.pos += n
		return r, nil
	}
	if p.pos+1 >= len(p.src) {
		return 0, p.errf("dangling backslash")
	}
	e := p.src[p.pos+1]
	p.pos += 2
	hex := 0
	switch e {
	case 'n':
		return '\n', nil
	case 't':
		return '\t', nil
	case 'r':
		return '\r', nil
	case 'x':
		hex = 2
	case 'u':
		hex = 4
	case 'U':
		hex = 8
	default:
		return rune(e), nil // \\ \" \[ \] \- and the like stand for themselves
	}
	if p.pos+hex > len(p.src) {
		return 0, p.errf("short \\%c escape", e)
	}
	v, err := strconv.ParseUint(p.src[p.pos:p.pos+hex], 16, 32)
	if err != nil || v > utf8.MaxRune {
		return 0, p.errf("bad \\%c escape", e)
	}
	p.pos += hex
	return rune(v), nil
}

// complement returns the code points not in rs (surrogates excluded).
func complement(rs []crange) []crange {
	rs = normalize(rs)
	var out []crange
	next := rune(0)
	for _, r := range rs {
		if r.lo > next {
			out = append(out, crange{next, r.lo - 1})
		}
		next = r.hi + 1
	}
	if next <= utf8.MaxRune {
		out = append(out, crange{next, utf8.MaxRune})
	}
	return out
}

// normalize sorts and merges ranges.
func normalize(rs []crange) []crange {
	s := append([]crange(nil), rs...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].lo < s[j-1].lo; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	var out []crange
	for _, r := range s {
		if n := len(out); n > 0 && r.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out
}
