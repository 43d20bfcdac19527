package grammar

import (
	"math/rand/v2"
	"strings"
	"testing"
)

const jsonGBNF = `
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
`

func accepts(t *testing.T, g *Grammar, s string) bool {
	t.Helper()
	c := Bind(g, NewVocab([][]byte{[]byte("x")}, nil))
	m := c.NewMatcher()
	return m.AcceptBytes([]byte(s)) && m.CanEnd()
}

func TestParseAndMatch(t *testing.T) {
	t.Parallel()
	g, err := Parse(jsonGBNF)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`{}`, `{"a": 1}`, `{"a": [1, 2.5, "x", {"b": null}], "c": true}`, "{\"é\u00e9\": \"\\u00e9\"}"} {
		if !accepts(t, g, s) {
			t.Errorf("%s refused", s)
		}
	}
	for _, s := range []string{`{`, `[]`, `{"a" 1}`, `{"a": tru}`, `{"a": 01x}`} {
		if accepts(t, g, s) {
			t.Errorf("%s accepted", s)
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for src, want := range map[string]string{
		`root ::= "a`:       "unterminated",
		`root ::= foo`:      "not defined",
		`foo ::= "a"`:       "no root",
		`root ::= root "a"`: "left-recursive",
		`root ::= [b-a]`:    "reversed",
		`root ::= "a"{3,1}`: "bad repetition",
		`root ::= "a" @`:    "unexpected",
	} {
		if _, err := Parse(src); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", src, err, want)
		}
	}
}

// randomVocab builds byte-string tokens from JSON-ish fragments.
func randomVocab(r *rand.Rand, n int) [][]byte {
	frags := []string{"{", "}", "[", "]", "\"", ":", ",", " ", "\n", "a", "b", "é", "\\", "u", "0", "1", "9", "-", ".", "e", "true", "null", "fal", "se", "\": ", "\",", "\"}", "{\"", "}\n", "  ", "\xc3", "\xa9"}
	out := [][]byte{nil, nil} // 0: eos, 1: a control token
	seen := map[string]bool{}
	for len(out) < n {
		var b strings.Builder
		for k := 1 + r.IntN(3); k > 0; k-- {
			b.WriteString(frags[r.IntN(len(frags))])
		}
		if !seen[b.String()] || r.IntN(20) == 0 { // a few duplicates
			seen[b.String()] = true
			out = append(out, []byte(b.String()))
		}
	}
	return out
}

// TestMaskMatchesBruteForce checks the cached, context-split masks
// against trying every token on the whole stack set, along random walks.
func TestMaskMatchesBruteForce(t *testing.T) {
	t.Parallel()
	g, err := Parse(jsonGBNF)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	pieces := randomVocab(r, 3000)
	v := NewVocab(pieces, []int32{0})
	c := Bind(g, v)
	mask := make([]uint64, (v.Size()+63)/64)
	for walk := 0; walk < 20; walk++ {
		m := c.NewMatcher()
		for step := 0; step < 60 && !m.Done(); step++ {
			m.Mask(mask)
			var allowed []int32
			for id := int32(0); id < int32(v.Size()); id++ {
				got := mask[id>>6]&(1<<(id&63)) != 0
				if want := m.Allowed(id); got != want {
					t.Fatalf("walk %d step %d token %d %q: mask %v, brute force %v", walk, step, id, pieces[id], got, want)
				}
				if got {
					allowed = append(allowed, id)
				}
			}
			if len(allowed) == 0 {
				t.Fatalf("walk %d step %d: nothing allowed", walk, step)
			}
			if !m.AcceptToken(allowed[r.IntN(len(allowed))]) {
				t.Fatal("an allowed token was refused")
			}
		}
	}
}

// TestMatcherAllocations: once the masks of the states met are computed,
// masking and accepting tokens allocates nothing.
func TestMatcherAllocations(t *testing.T) {
	g, err := Parse(jsonGBNF)
	if err != nil {
		t.Fatal(err)
	}
	v := testVocab()
	c := Bind(g, v)
	c.Precompute()
	text := []byte(`{"name": "light", "values": [1, 2.5, {"a": null}], "ok": true}`)
	var toks []int32
	for _, b := range text {
		toks = append(toks, int32(b)+1) // the single-byte tokens
	}
	m := c.NewMatcher()
	mask := make([]uint64, (v.Size()+63)/64)
	path := []int32{toks[0], toks[1]}
	run := func() {
		m.Reset()
		for _, id := range toks {
			m.Mask(mask)
			m.AllowsPath(path)
			m.Forced(nil, 0)
			if !m.AcceptToken(id) {
				t.Fatalf("token %q refused", v.piece(id))
			}
		}
	}
	run()
	if a := testing.AllocsPerRun(20, run); a != 0 {
		t.Errorf("%v allocations per run of %d tokens", a, len(toks))
	}
}
