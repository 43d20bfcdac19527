package dialect

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestXMLToolCalls: Qwen3.5's calls (<tool_call><function=NAME>
// <parameter=KEY>...) stream out of the parser as calls, cut anywhere,
// with values that read as JSON taken as such and the rest as strings;
// a malformed block stays content.
func TestXMLToolCalls(t *testing.T) {
	t.Parallel()
	text := "I'll turn it on.\n\n<tool_call>\n<function=HassTurnOn>\n<parameter=name>\nkitchen light\n</parameter>\n<parameter=brightness>\n50\n</parameter>\n<parameter=area>\n{\"floor\": 1}\n</parameter>\n<parameter=note>\ntwo\nlines\n</parameter>\n</function>\n</tool_call>"
	want := `{"name":"kitchen light","brightness":50,"area":{"floor": 1},"note":"two\nlines"}`
	for cut := 1; cut < len(text); cut += 7 {
		p := NewToolParser(Hermes, []string{"HassTurnOn"})
		c1, k1 := p.Add(text[:cut])
		c2, k2 := p.Add(text[cut:])
		c3, k3 := p.Flush()
		calls := append(append(k1, k2...), k3...)
		if content := c1 + c2 + c3; content != "I'll turn it on." {
			t.Fatalf("cut %d: content %q", cut, content)
		}
		if len(calls) != 1 || calls[0].Name != "HassTurnOn" || string(calls[0].Arguments) != want {
			t.Fatalf("cut %d: calls %+v", cut, calls)
		}
		if !json.Valid(calls[0].Arguments) {
			t.Fatalf("arguments %s are not JSON", calls[0].Arguments)
		}
	}
	for _, bad := range []string{
		"<tool_call>\n<function=>\n</function>\n</tool_call>",
		"<tool_call>\n<function=f>\n<parameter=x>\n1\n</function>\n</tool_call>",
		"<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n<parameter=x>\n2\n</parameter>\n</function>\n</tool_call>",
	} {
		p := NewToolParser(Hermes, []string{"f"})
		c1, k1 := p.Add(bad)
		c2, k2 := p.Flush()
		if len(k1)+len(k2) != 0 || !strings.Contains(c1+c2, "function=") {
			t.Errorf("%q: calls %v, content %q", bad, append(k1, k2...), c1+c2)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
