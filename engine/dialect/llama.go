package dialect

import (
	"encoding/json"
	"strings"

	"github.com/geisten/geist/engine/grammar"
)

// Llama 3.1's and 3.2's calls: the answer is a JSON object {"name": ...,
// "parameters": {...}} (or "arguments"), optionally after <|python_tag|>,
// several separated by ';' or newlines. A JSON answer counts as calls
// only when every object names one of the tools offered (a model asked
// for JSON may well answer with a JSON object).
var Llama Dialect = &llama{family{"json", Tags{}}}

const pythonTag = "<|python_tag|>"

type llama struct{ family }

func init() { Register(Llama, 60) }

// Detect: the template has Llama 3's <|python_tag|> or ipython role.
func (*llama) Detect(src string) bool {
	return strings.Contains(src, pythonTag) || strings.Contains(src, "ipython")
}

func (*llama) BareJSON() bool { return true }

// Grammar: calls separated by ';', the arguments keyed "parameters"; a
// lazy grammar is triggered by {"name" and is the rest of one call.
func (*llama) Grammar(tools []json.RawMessage, only string, lazy, one bool) (string, string, error) {
	c, err := grammar.CallRules(tools, only, grammar.JSONParametersCall)
	if err != nil {
		return "", "", err
	}
	if lazy {
		return c.Grammar(c.NameTail("parameters")), `{"name"`, nil
	}
	return c.Grammar(`call` + more(one, `";" " "? call`)), "", nil
}
