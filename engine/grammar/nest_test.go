package grammar

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// nestVocab is randomVocab with the tokens a model nests JSON with.
func nestVocab(seed uint64) [][]byte {
	pieces := randomVocab(rand.New(rand.NewPCG(seed, 2)), 400)
	for _, p := range []string{"[", "[[", "[[[", " [", "[\n", "\n", "null", ", ", "]", "]]", "{\"a\": ", "{\"", "\":", "1", "0", "{", "\n\n", "\t", "  ", "]]]]", "}}}", "}]"} {
		pieces = append(pieces, []byte(p))
	}
	return pieces
}

// TestNestingWorkBounded: a matcher driven deep into nested arrays and
// objects (the [[[[… a random-weight model writes under format "json")
// does per token work that does not grow with the depth: the expansions
// a token's mask and advance take (counted, not timed) stay under a
// bound fixed by the vocabulary, at depth 300 as at depth 3. Before the
// arena kept the slots of dropped frames as occupied, so the masks'
// trial runs filled its table and a probe went round it for ever (the
// stall the issue saw as 0.2 tok/s, then none).
func TestNestingWorkBounded(t *testing.T) {
	t.Parallel()
	for _, src := range []string{AnyJSON(), jsonGBNF} {
		g, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		pieces := nestVocab(1)
		id := func(s string) int32 {
			for i, p := range pieces {
				if string(p) == s {
					return int32(i)
				}
			}
			t.Fatalf("no token %q", s)
			return -1
		}
		c := Bind(g, NewVocab(pieces, []int32{0}))
		mask := make([]uint64, (len(pieces)+63)/64)
		for _, open := range [][]string{{"["}, {"[", " [", "[\n", "[[", "\n"}, {"{\"a\": "}, {"{\"a\": ", "[", "{\"", "a", "\":", "["}} {
			m := c.NewMatcher()
			if !strings.HasPrefix(src, "root ::= object | array") && open[0] == "[" {
				m.AcceptToken(id("{\"a\": "))
			}
			var first, worst uint64
			for i := 0; i < 400; i++ {
				before := m.w.total
				m.Mask(mask)
				tok := id(open[i%len(open)])
				if mask[tok>>6]&(1<<(tok&63)) == 0 {
					t.Fatalf("%q: %q not allowed at step %d", open, pieces[tok], i)
				}
				if !m.AcceptToken(tok) {
					t.Fatalf("%q: %q refused at step %d", open, pieces[tok], i)
				}
				work := m.w.total - before
				if i < 5 {
					first = max(first, work)
				}
				worst = max(worst, work)
			}
			if worst > 2*first+64 {
				t.Errorf("%q: a token's work grew with the depth: %d expansions at most, %d in the first 5 tokens", open, worst, first)
			}
			t.Logf("%q: %d expansions per token at most (%d in the first 5), %d frames", open, worst, first, len(m.w.a.frames))
			if m.Err() != nil {
				t.Errorf("%q: %v", open, m.Err())
			}
		}
	}
}

// TestNestingRandomWalk: random walks that prefer opening brackets,
// with a mask every token (the trial runs of the context-dependent
// tokens drop frames every time), stay within a per-token bound.
func TestNestingRandomWalk(t *testing.T) {
	t.Parallel()
	g, err := Parse(AnyJSON())
	if err != nil {
		t.Fatal(err)
	}
	pieces := nestVocab(1)
	c := Bind(g, NewVocab(pieces, []int32{0}))
	mask := make([]uint64, (len(pieces)+63)/64)
	var worst uint64
	for seed := uint64(1); seed <= 8; seed++ {
		r := rand.New(rand.NewPCG(seed, 2))
		m := c.NewMatcher()
		for i := 0; i < 600; i++ {
			before := m.w.total
			m.Mask(mask)
			var ok []int32
			for id := range int32(len(pieces)) {
				if id != 0 && mask[id>>6]&(1<<(id&63)) != 0 {
					ok = append(ok, id)
				}
			}
			if len(ok) == 0 {
				break
			}
			tok := ok[r.IntN(len(ok))]
			for k := 0; i < 300 && k < 200; k++ {
				if x := ok[r.IntN(len(ok))]; strings.Count(string(pieces[x]), "[")+strings.Count(string(pieces[x]), "{") > 0 && !strings.Contains(string(pieces[x]), "\"") {
					tok = x
					break
				}
			}
			if !m.AcceptToken(tok) {
				t.Fatalf("seed %d: masked token %q refused", seed, pieces[tok])
			}
			worst = max(worst, m.w.total-before)
		}
	}
	t.Logf("at most %d expansions per token", worst)
	if worst > 20000 {
		t.Errorf("%d expansions for one token", worst)
	}
}

// TestNestingDepthCap: past MaxDepth open rules the matcher refuses
// the next opening with ErrDepth (the mask is empty, Err says why) and
// still takes the closing brackets.
func TestNestingDepthCap(t *testing.T) {
	t.Parallel()
	g, err := Parse(AnyJSON())
	if err != nil {
		t.Fatal(err)
	}
	c := Bind(g, NewVocab([][]byte{nil, []byte("["), []byte("]")}, []int32{0}))
	m := c.NewMatcher()
	mask := make([]uint64, 1)
	n := 0
	for ; n < MaxDepth; n++ {
		if !m.AcceptToken(1) {
			break
		}
	}
	if !errors.Is(m.Err(), ErrDepth) || n < MaxDepth/2-2 || n > MaxDepth/2+2 {
		t.Fatalf("%d brackets opened, err %v; want about %d and ErrDepth", n, m.Err(), MaxDepth/2)
	}
	m.Mask(mask)
	if mask[0]&(1<<1) != 0 || !errors.Is(m.Err(), ErrDepth) {
		t.Fatalf("mask %b err %v: want [ refused for the depth", mask[0], m.Err())
	}
	for i := 0; i < n; i++ {
		if !m.AcceptToken(2) {
			t.Fatalf("] refused after %d", i)
		}
	}
	if !m.CanEnd() {
		t.Fatal("the closed document cannot end")
	}
}
