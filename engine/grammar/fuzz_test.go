package grammar

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"runtime"
	"testing"
	"time"
)

// compileSlack is the wall time a compile refused at its budgets may take
// on a loaded machine (about 0.7 s at load 15 on two cores, the fuzzer's
// own workers included), and compileAlloc the bytes it may allocate in
// all (the budgets bound the live structures to well under 200 MB).
const (
	compileSlack = 10 * time.Second
	compileAlloc = 1 << 30
)

func fuzzSeeds(f *testing.F) {
	f.Add(byte(0), jsonGBNF)
	f.Add(byte(0), AnyJSON())
	f.Add(byte(0), `root ::= (("a"{0,50}){0,1000})`)
	f.Add(byte(0), `root ::= ((((("a"{0,10}){0,10}){0,10}){0,10}){0,10})`)
	f.Add(byte(0), `root ::= x | "b" x x
x ::= ("a" | "") ("c"? | "d"?) x?`)
	f.Add(byte(1), `{"type":"string","pattern":"^((((a{0,10}){0,10}){0,10}){0,10}){0,10}$"}`)
	f.Add(byte(1), `{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991}`)
	f.Add(byte(1), `{"type":"string","minLength":10000,"maxLength":10000}`)
	f.Add(byte(1), `{"type":"array","items":{"type":"array","items":{"type":"string","maxLength":9999}},"maxItems":9999}`)
	if raw, err := os.ReadFile("testdata/schemas.json"); err == nil {
		var schemas map[string]json.RawMessage
		if json.Unmarshal(raw, &schemas) == nil {
			for _, s := range schemas {
				f.Add(byte(1), string(s))
			}
		}
	}
}

// source turns a fuzz input into GBNF: kind 0 is GBNF text, 1 a JSON
// schema, 2 Ollama's format field.
func source(kind byte, text string) (string, error) {
	switch kind % 3 {
	case 1:
		return FromSchema([]byte(text))
	case 2:
		return FromFormat([]byte(text))
	}
	return text, nil
}

// FuzzCompile: any GBNF text or JSON schema compiles or is refused within
// a bound on wall time and on the bytes allocated (the compile's budgets
// are counted as its structures grow: issue 33's five nested {0,10} took
// gigabytes and minutes).
func FuzzCompile(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, kind byte, text string) {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		start := time.Now()
		src, err := source(kind, text)
		if err == nil {
			_, err = parseContext(context.Background(), src)
		}
		took := time.Since(start)
		runtime.ReadMemStats(&m1)
		if took > compileSlack {
			t.Fatalf("the compile took %v (%v)", took, err)
		}
		if a := m1.TotalAlloc - m0.TotalAlloc; a > compileAlloc {
			t.Fatalf("the compile allocated %d MB (%v)", a>>20, err)
		}
	})
}

// FuzzMatcher: a matcher driven over any grammar by any token stream
// does bounded work per token: at most maxWork expansions per byte of an
// accepted token, and a mask (every token of a small vocabulary tried,
// the context-dependent ones on every stack) within a bound on time; the
// mask and the matcher agree on every token (a bound aside).
// The token stream is the text split at 0xFF bytes (the vocabulary: its
// distinct pieces, at most 64), and the grammar's own text fed as a
// stream too.
func FuzzMatcher(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, kind byte, text string) {
		split := bytes.IndexByte([]byte(text), 0xFE)
		gtext, stream := text, ""
		if split >= 0 {
			gtext, stream = text[:split], text[split+1:]
		}
		src, err := source(kind, gtext)
		if err != nil {
			return
		}
		g, err := parse(src)
		if err != nil {
			return
		}
		var pieces [][]byte
		seen := map[string]int32{}
		var toks []int32
		pieces = append(pieces, nil) // 0: end of generation
		for _, p := range bytes.Split([]byte(stream+"\xff"+gtext), []byte{0xFF}) {
			if len(p) == 0 || len(p) > 64 {
				continue
			}
			id, ok := seen[string(p)]
			if !ok && len(pieces) < 64 {
				id = int32(len(pieces))
				seen[string(p)] = id
				pieces = append(pieces, p)
			} else if !ok {
				continue
			}
			toks = append(toks, id)
		}
		toks = append(toks, 0)
		c := Bind(g, NewVocab(pieces, []int32{0}))
		m := c.NewMatcher()
		mask := make([]uint64, 1)
		for i, id := range toks {
			if i > 200 {
				break
			}
			start := time.Now()
			m.Mask(mask)
			if took := time.Since(start); took > compileSlack {
				t.Fatalf("a mask took %v", took)
			}
			before := m.w.total
			ok := m.AcceptToken(id)
			if work := m.w.total - before; work > uint64(len(pieces[id])+1)*maxWork {
				t.Fatalf("token %q: %d expansions", pieces[id], work)
			}
			inMask := mask[id>>6]&(1<<(id&63)) != 0
			if ok && !inMask {
				t.Fatalf("token %q accepted but not in the mask", pieces[id])
			}
			if !ok && inMask && m.Err() == nil {
				t.Fatalf("token %q in the mask but refused", pieces[id])
			}
			m.AllowsPath(toks[i:min(len(toks), i+4)])
			m.Forced(nil, 16)
		}
	})
}
