package grammar

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Gemma 4 writes a call's arguments in a syntax of its own, not JSON
// (engine/dialect's gemma4.go reads it):
//
//	{key:<|"|>text<|"|>,n:3,flag:true,list:[1,2],obj:{inner:null}}
//
// Strings stand between its quote token <|"|>, raw (no escapes); keys are
// bare; numbers, true, false and null are JSON's. The converter writes a
// schema's grammar in this syntax when its gemma flag is set: the same
// keywords as for JSON, but pattern (the string's characters would be
// counted differently), and no white space, as the template writes it.

// gemmaQuote is Gemma 4's string quote token.
const gemmaQuote = `<|"|>`

var gemmaQuoteLit = literal(gemmaQuote)

// gemmaPrimitives are primitives in Gemma 4's syntax. A string's
// character is any but '<', or '<' followed by another than '|' or '<':
// so no string holds the quote token, and its end is the first <|"|>.
var gemmaPrimitives = map[string]string{
	"space":            `""`,
	"boolean":          `"true" | "false"`,
	"null":             `"null"`,
	"decimal-part":     primitives["decimal-part"],
	"integral-part":    primitives["integral-part"],
	"number":           `("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?`,
	"integer":          `"-"? integral-part`,
	"value":            `object | array | string | number | boolean | null`,
	"object":           `"{" ( gemma-key ":" value ("," gemma-key ":" value)* )? "}"`,
	"array":            `"[" ( value ("," value)* )? "]"`,
	"gemma-key":        `[^:{}\[\],<>"\x00-\x20\x7F]{1,64}`,
	"char":             `[^<] | "<" [^|<]`,
	"string":           gemmaQuoteLit + ` char* ` + gemmaQuoteLit,
	"uuid":             gemmaQuoteLit + ` [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} ` + gemmaQuoteLit,
	"date":             primitives["date"],
	"time":             primitives["time"],
	"date-time":        primitives["date-time"],
	"date-string":      gemmaQuoteLit + ` date ` + gemmaQuoteLit,
	"time-string":      gemmaQuoteLit + ` time ` + gemmaQuoteLit,
	"date-time-string": gemmaQuoteLit + ` date-time ` + gemmaQuoteLit,
	"email-string":     gemmaQuoteLit + ` [a-zA-Z0-9_%+-]{1,32} ("." [a-zA-Z0-9_%+-]{1,15}){0,2} "@" ([a-zA-Z0-9]{1,20} ("-" [a-zA-Z0-9]{1,20})? "."){1,3} [a-zA-Z]{2,6} ` + gemmaQuoteLit,
}

var gemmaPrimitiveDeps = map[string][]string{
	"number": {"integral-part", "decimal-part"}, "integer": {"integral-part"},
	"value":  {"object", "array", "string", "number", "boolean", "null"},
	"object": {"gemma-key", "value"}, "array": {"value"}, "string": {"char"},
	"date-time": {"date", "time"}, "date-string": {"date"}, "time-string": {"time"},
	"date-time-string": {"date-time"},
}

// gemmaText writes v (a schema's const or enum value) in Gemma 4's
// syntax, object keys sorted as the template's dictsort sorts them.
func gemmaText(sb *strings.Builder, v any, path string) error {
	switch x := v.(type) {
	case nil:
		sb.WriteString("null")
	case bool:
		fmt.Fprint(sb, x)
	case json.Number:
		sb.WriteString(string(x))
	case string:
		if strings.Contains(x, gemmaQuote) {
			return fmt.Errorf("schema at %s: the string %q holds Gemma 4's quote %s and cannot be written", path, x, gemmaQuote)
		}
		sb.WriteString(gemmaQuote + x + gemmaQuote)
	case []any:
		sb.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				sb.WriteByte(',')
			}
			if err := gemmaText(sb, e, path); err != nil {
				return err
			}
		}
		sb.WriteByte(']')
	case *ordered:
		keys := append([]string(nil), x.keys...)
		sort.Strings(keys)
		sb.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				sb.WriteByte(',')
			}
			key, err := gemmaKey(k, path)
			if err != nil {
				return err
			}
			sb.WriteString(key + ":")
			if err := gemmaText(sb, x.vals[k], path); err != nil {
				return err
			}
		}
		sb.WriteByte('}')
	default:
		return fmt.Errorf("schema at %s: value of type %T", path, v)
	}
	return nil
}

// gemmaLiteral is the grammar of exactly value v in Gemma 4's syntax.
func (c *converter) gemmaLiteral(v any) (string, error) {
	var sb strings.Builder
	if err := gemmaText(&sb, v, "const/enum"); err != nil {
		return "", err
	}
	return literal(sb.String()), nil
}

// gemmaKey writes an object key: bare as the template writes keys, or,
// where a bare key would not read back (empty, white space at its ends,
// one of :{}[],), between quotes, which the parser reads too.
func gemmaKey(k, path string) (string, error) {
	if strings.Contains(k, gemmaQuote) {
		return "", fmt.Errorf("schema at %s: the key %q holds Gemma 4's quote %s and cannot be written", path, k, gemmaQuote)
	}
	if k != "" && k == strings.TrimSpace(k) && !strings.ContainsAny(k, ":{}[],") {
		return k, nil
	}
	return gemmaQuote + k + gemmaQuote, nil
}

// gemmaKeyRule is the grammar of property k's key and its ':'.
func gemmaKeyRule(k, path string) (string, error) {
	key, err := gemmaKey(k, path)
	if err != nil {
		return "", err
	}
	return literal(key+":") + " ", nil
}

// gemmaStr is the grammar of a string schema in Gemma 4's syntax, its
// lengths read by strLengths. With a
// length bound the characters are any but '<' (so that each counts one).
func (c *converter) gemmaStr(s *ordered, path string, lo, hi int, hasLo, hasHi bool) (string, error) {
	if has(s, "pattern") {
		return "", unsupported(path, "pattern", "not enforced in Gemma 4's call syntax")
	}
	if f, ok := s.get("format"); ok {
		fs, _ := f.(string)
		if hasLo || hasHi {
			return "", unsupported(path, "format", "together with minLength or maxLength")
		}
		switch fs {
		case "date", "time", "date-time", "email":
			return c.prim(fs + "-string"), nil
		case "uuid":
			return c.prim("uuid"), nil
		}
		return "", unsupported(path, "format", fmt.Sprintf("%q (enforced: date, time, date-time, uuid, email)", fs))
	}
	switch {
	case !hasLo && !hasHi:
		return c.prim("string"), nil
	case !hasHi:
		c.prim("char")
		return fmt.Sprintf(`%s [^<]{%d} char* %s`, gemmaQuoteLit, lo, gemmaQuoteLit), nil
	}
	return fmt.Sprintf(`%s [^<]{%d,%d} %s`, gemmaQuoteLit, lo, hi, gemmaQuoteLit), nil
}

// gemmaEntry is an object property: its key, the rule of key and value,
// and whether it is required.
type gemmaEntry struct {
	key, kv string
	req     bool
}

// gemmaObject is the grammar of an object with the properties given and
// no others, in the order Gemma 4's template writes arguments (its
// dictsort: keys sorted, case aside), each optional one present or not.
// from-i is the rest from property i on with nothing written before it,
// next-i the same after a property (so with its comma).
func (c *converter) gemmaObject(name string, es []gemmaEntry) string {
	sort.SliceStable(es, func(i, j int) bool {
		a, b := strings.ToLower(es[i].key), strings.ToLower(es[j].key)
		return a < b || a == b && es[i].key < es[j].key
	})
	first, next := "", "" // "" once past the last property: nothing more
	for i := len(es) - 1; i >= 0; i-- {
		e := es[i]
		f := strings.TrimSpace(e.kv + " " + next)
		n := `"," ` + f
		if !e.req {
			f, n = orElse(f, first), orElse(n, next)
		}
		first = c.add(fmt.Sprintf("%s-from-%d", name, i), f)
		next = c.add(fmt.Sprintf("%s-next-%d", name, i), n)
	}
	return `"{" ` + first + ` "}"`
}

// orElse is the grammar of a, or else b ("": nothing).
func orElse(a, b string) string {
	if b == "" {
		return "( " + a + " )?"
	}
	return a + " | " + b
}
