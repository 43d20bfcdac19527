package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// testVocab has every single byte (so any text can be written) and
// multi-byte fragments, as a model's vocabulary does; token 0 ends.
func testVocab() *Vocab {
	pieces := [][]byte{nil}
	for b := 0; b < 256; b++ {
		pieces = append(pieces, []byte{byte(b)})
	}
	for _, f := range []string{`{"`, `":`, `": `, `",`, `", "`, `"}`, `}}`, `]}`, `[{`, `true`, `false`, `null`, `name`, `light`, ` "`, `\n`, `\"`, `\\`, `12`, `-1`, `0.5`, `e+`, `é`, `ab`, `cat`, `dogs`, `2024-`, `T12:`, `@ex`, `.com`, `"\n`, `  `} {
		pieces = append(pieces, []byte(f))
	}
	return NewVocab(pieces, []int32{0})
}

// generate walks the grammar with random tokens, more and more inclined
// to end (and to close what is open) as the text grows.
func generate(t *testing.T, c *Compiled, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	m := c.NewMatcher()
	mask := make([]uint64, (c.v.n+63)/64)
	var out []byte
	for step := 0; step < 2000; step++ {
		m.Mask(mask)
		var allowed []int32
		for id := int32(0); id < int32(c.v.n); id++ {
			if mask[id>>6]&(1<<(id&63)) != 0 {
				allowed = append(allowed, id)
			}
		}
		if len(allowed) == 0 {
			t.Fatalf("seed %d: nothing allowed after %q", seed, out)
		}
		if allowed[0] == 0 && r.IntN(200) < step+20 {
			if !m.AcceptToken(0) {
				t.Fatal("end refused")
			}
			return out
		}
		id := allowed[r.IntN(len(allowed))]
		if step > 40 && r.IntN(4) > 0 { // steer to an end: closing bytes first, else a small alphabet
			id = -1
			var small []int32
			for _, a := range allowed {
				p := c.v.piece(a)
				if len(p) != 1 {
					continue
				}
				if p[0] == '"' || (p[0] == '}' || p[0] == ']') && r.IntN(2) == 0 {
					id = a
					break
				}
				if strings.IndexByte("abcxyz0123.-@:T", p[0]) >= 0 {
					small = append(small, a)
				}
			}
			if id < 0 && len(small) > 0 {
				id = small[r.IntN(len(small))]
			}
			if id < 0 {
				id = allowed[r.IntN(len(allowed))]
			}
		}
		if id == 0 {
			m.AcceptToken(0)
			return out
		}
		if !m.AcceptToken(id) {
			t.Fatalf("seed %d: allowed token %q refused", seed, c.v.piece(id))
		}
		out = append(out, c.v.piece(id)...)
	}
	t.Fatalf("seed %d: no end after 2000 tokens: %q", seed, out)
	return nil
}

func TestSchemasValidate(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/schemas.json")
	if err != nil {
		t.Fatal(err)
	}
	var schemas map[string]json.RawMessage
	if err := json.Unmarshal(raw, &schemas); err != nil {
		t.Fatal(err)
	}
	if len(schemas) < 30 {
		t.Fatalf("%d schemas, want 30+", len(schemas))
	}
	v := testVocab()
	seeds := 20
	for name, s := range schemas {
		t.Run(name, func(t *testing.T) {
			src, err := FromSchema(s)
			if err != nil {
				t.Fatal(err)
			}
			g, err := Parse(src)
			if err != nil {
				t.Fatalf("%v\n%s", err, src)
			}
			comp := jsonschema.NewCompiler()
			comp.AssertFormat()
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(s))
			if err != nil {
				t.Fatal(err)
			}
			if err := comp.AddResource("s.json", doc); err != nil {
				t.Fatal(err)
			}
			sch, err := comp.Compile("s.json")
			if err != nil {
				t.Fatal(err)
			}
			c := Bind(g, v)
			for seed := range seeds {
				out := generate(t, c, uint64(seed))
				inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
				if err != nil {
					t.Fatalf("seed %d: %q does not parse: %v\n%s", seed, out, err, src)
				}
				if err := sch.Validate(inst); err != nil {
					t.Fatalf("seed %d: %q does not validate: %v\n%s", seed, out, err, src)
				}
			}
		})
	}
}

func TestSchemaRefusals(t *testing.T) {
	t.Parallel()
	for schema, kw := range map[string]string{
		`{"type": "object", "minProperties": 1}`:             "minProperties",
		`{"not": {"type": "string"}}`:                        "not",
		`{"type": "number", "multipleOf": 2}`:                "multipleOf",
		`{"type": "string", "format": "hostname"}`:           "format",
		`{"type": "string", "pattern": "(a)\\1"}`:            "pattern",
		`{"type": "array", "uniqueItems": true}`:             "uniqueItems",
		`{"type": "string", "minimum": 1}`:                   "minimum",
		`{"if": {}, "then": {}}`:                             "if",
		`{"$ref": "http://example.com/s.json"}`:              "$ref",
		`{"type": "object", "patternProperties": {"a": {}}}`: "patternProperties",
	} {
		_, err := FromSchema([]byte(schema))
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `"`+kw+`"`) {
			t.Errorf("%s: error %v, want one naming %q", schema, err, kw)
		}
	}
}

// BenchmarkCompileHATools compiles the grammar of calls to Home
// Assistant's intent tools (17 tools, as its Assist API offers them) from
// their parameter schemas: the compile budget is 50 ms.
func BenchmarkCompileHATools(b *testing.B) {
	tools := readTools(b)
	var states int
	for b.Loop() {
		src, _, err := taggedCalls(tools)
		if err != nil {
			b.Fatal(err)
		}
		g, err := parse(src) // uncached
		if err != nil {
			b.Fatal(err)
		}
		states = g.States()
	}
	b.ReportMetric(float64(states), "states")
}

// BenchmarkCompileAITask compiles the AI Task schemas of the tests.
func BenchmarkCompileAITask(b *testing.B) {
	schemas := readAITask(b)
	for b.Loop() {
		for _, s := range schemas {
			src, err := FromSchema(s)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := parse(src); err != nil { // uncached
				b.Fatal(err)
			}
		}
	}
}
