package dialect

import (
	"encoding/json"

	"github.com/geisten/geist/engine/grammar"
)

// Any is the dialect of a template that shows none (and of a
// configuration that names none): Hermes' tagged calls anywhere in the
// answer and Llama's bare JSON answers are both read. Its grammar is of
// JSON call objects, one a line; it has no opening to trigger a lazy one.
var Any Dialect = &anyDialect{family{"any", Tags{callOpen, callClose, false}}}

type anyDialect struct{ family }

// Detect: Any is not registered; Detect returns it when no other holds.
func (*anyDialect) Detect(string) bool { return false }

func (*anyDialect) BareJSON() bool { return true }

func (*anyDialect) Grammar(tools []json.RawMessage, only string, lazy, one bool) (string, string, error) {
	if lazy {
		return "", "", errNoOpening
	}
	c, err := grammar.CallRules(tools, only, grammar.JSONCall)
	if err != nil {
		return "", "", err
	}
	return c.Grammar(`call` + more(one, `"\n" call`)), "", nil
}
