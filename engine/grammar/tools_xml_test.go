package grammar

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestXMLText: the raw text of a parameter's value never holds
// </parameter> or </tool_call> (which would end the block or the call
// early), and holds any other text built of their pieces, except a
// begun closing tag broken off by another '<' (xmlText's one
// strictness): random texts of such pieces, checked against the rule.
func TestXMLText(t *testing.T) {
	t.Parallel()
	c := &converter{rules: map[string]string{}}
	name := c.xmlText()
	var sb strings.Builder
	sb.WriteString("root ::= " + name + "\n")
	for _, n := range c.order {
		sb.WriteString(n + " ::= " + c.rules[n] + "\n")
	}
	g, err := Parse(sb.String())
	if err != nil {
		t.Fatalf("%v\n%s", err, sb.String())
	}
	comp := Bind(g, NewVocab([][]byte{[]byte("x")}, nil))
	pieces := []string{"<", "</", "</parameter>", "</tool_call>", "</param", "</tool_", "eter>", "call>", "x", "<<", ">", "/", "\n", "p", "</parameter", "é"}
	r := rand.New(rand.NewPCG(5, 9))
	accepted, refused := 0, 0
	for range 5000 {
		var s strings.Builder
		for range 1 + r.IntN(6) {
			s.WriteString(pieces[r.IntN(len(pieces))])
		}
		text := s.String()
		m := comp.NewMatcher()
		ok := m.AcceptBytes([]byte(text)) && m.CanEnd()
		bad := strings.Contains(text, "</parameter>") || strings.Contains(text, "</tool_call>")
		if ok && bad {
			t.Fatalf("%q accepted", text)
		}
		if !ok && !bad && !strictlyRefused(text) {
			t.Fatalf("%q refused", text)
		}
		if ok {
			accepted++
		} else {
			refused++
		}
	}
	t.Logf("%d accepted, %d refused", accepted, refused)
}

// strictlyRefused reports whether text has a '<' followed by a proper,
// non-empty prefix of "/parameter>" or "/tool_call>" and then another
// '<': what xmlText refuses although it ends no block.
func strictlyRefused(text string) bool {
	for i := 0; i < len(text); i++ {
		if text[i] != '<' {
			continue
		}
		for _, tail := range []string{"/parameter>", "/tool_call>"} {
			for k := 1; k < len(tail); k++ {
				if strings.HasPrefix(text[i+1:], tail[:k]+"<") {
					return true
				}
			}
		}
	}
	return false
}
