package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/ardanlabs/jinja"
)

// ValueFromJSON decodes one JSON value into a template value the way
// Python's json.loads does: objects keep their key order (as a dict that
// the template iterates and prints in that order), integers stay
// integers, numbers with a fraction or an exponent become floats. Depth
// and size are bounded by the caller's input bounds; nesting deeper than
// maxJSONDepth is refused.
func ValueFromJSON(data []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := dec.Token(); err != io.EOF {
		return jinja.Undefined(), errors.New("chat: JSON: data after the value")
	}
	return v, nil
}

const maxJSONDepth = 64

func decodeValue(dec *json.Decoder, depth int) (jinja.Value, error) {
	if depth > maxJSONDepth {
		return jinja.Undefined(), fmt.Errorf("chat: JSON nested deeper than %d", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return jinja.Undefined(), fmt.Errorf("chat: JSON: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jinja.Undefined(), fmt.Errorf("chat: JSON: %w", err)
				}
				k, _ := kt.(string)
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return jinja.Undefined(), err
				}
				d.AsDict().Set(k, v)
			}
			_, err := dec.Token() // '}'
			return d, err
		case '[':
			items := []jinja.Value{}
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, v)
			}
			_, err := dec.Token() // ']'
			return jinja.NewList(items), err
		}
	case string:
		return jinja.NewString(t), nil
	case bool:
		return jinja.NewBool(t), nil
	case nil:
		return jinja.None(), nil
	case json.Number:
		s := string(t)
		if !strings.ContainsAny(s, ".eE") {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return jinja.NewInt(n), nil
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return jinja.Undefined(), fmt.Errorf("chat: JSON number %s: %w", s, err)
		}
		return jinja.NewFloat(f), nil
	}
	return jinja.Undefined(), fmt.Errorf("chat: JSON: unexpected %v", tok)
}

// pyToJSON is the tojson filter as Hugging Face transformers defines it
// for chat templates: Python's json.dumps(x, ensure_ascii=False,
// indent=indent, separators=separators, sort_keys=sort_keys), keys in
// insertion order, no HTML escaping (the engine's own filter sorts keys
// and escapes <, > and & when indenting). Positional arguments follow
// that signature (ensure_ascii, indent, separators, sort_keys).
func pyToJSON(args []jinja.Value, kw map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), errors.New("tojson: no value")
	}
	opt := pyJSONOptions{item: ", ", key: ": "}
	get := func(pos int, name string) (jinja.Value, bool) {
		if v, ok := kw[name]; ok {
			return v, true
		}
		if pos < len(args) {
			return args[pos], true
		}
		return jinja.Undefined(), false
	}
	if v, ok := get(1, "ensure_ascii"); ok {
		opt.ascii = v.IsTruthy()
	}
	if v, ok := get(2, "indent"); ok && !v.IsNone() && !v.IsUndefined() {
		switch {
		case v.IsString():
			opt.indent = v.AsString()
		case v.IsInt():
			opt.indent = strings.Repeat(" ", int(max(min(v.AsInt(), 64), 0)))
		default:
			return jinja.Undefined(), errors.New("tojson: indent must be an integer or a string")
		}
		opt.indented = true
		opt.item = ","
	}
	if v, ok := get(3, "separators"); ok && !v.IsNone() && !v.IsUndefined() {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Items[0].IsString() || !v.AsList().Items[1].IsString() {
			return jinja.Undefined(), errors.New("tojson: separators must be two strings")
		}
		opt.item, opt.key = v.AsList().Items[0].AsString(), v.AsList().Items[1].AsString()
	}
	if v, ok := get(4, "sort_keys"); ok {
		opt.sort = v.IsTruthy()
	}
	var b strings.Builder
	if err := opt.encode(&b, args[0], 0); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(b.String()), nil
}

type pyJSONOptions struct {
	ascii, indented, sort bool
	indent, item, key     string
	// repr writes Python's repr of the value instead (what jinja2's
	// string filter prints for a dict): True, False, None and strings
	// quoted as Python quotes them.
	repr bool
}

// pyRepr is Python's repr of a JSON value: str(d) of the dict json.loads
// makes, which a template prints with {{ d | string }}.
func pyRepr(v jinja.Value) (string, error) {
	return pyJSONOptions{item: ", ", key: ": ", repr: true}.string(v)
}

// pyDumps is Python's json.dumps(v) with its default separators.
func pyDumps(v jinja.Value) (string, error) {
	return pyJSONOptions{item: ", ", key: ": "}.string(v)
}

// string encodes v on one line with these options.
func (o pyJSONOptions) string(v jinja.Value) (string, error) {
	var b strings.Builder
	err := o.encode(&b, v, 0)
	return b.String(), err
}

func (o *pyJSONOptions) newline(b *strings.Builder, level int) {
	if o.indented {
		b.WriteByte('\n')
		for range level {
			b.WriteString(o.indent)
		}
	}
}

func (o *pyJSONOptions) encode(b *strings.Builder, v jinja.Value, level int) error {
	if level > maxJSONDepth {
		return errors.New("tojson: nested too deep")
	}
	switch {
	case v.IsNone() && o.repr:
		b.WriteString("None")
	case v.IsBool() && o.repr:
		if v.AsBool() {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case v.IsNone():
		b.WriteString("null")
	case v.IsBool():
		if v.AsBool() {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		b.WriteString(PyFloat(v.AsFloat()))
	case v.IsString():
		o.str(b, v.AsString())
	case v.IsList():
		items := v.AsList().Items
		if len(items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				b.WriteString(o.item)
			}
			o.newline(b, level+1)
			if err := o.encode(b, it, level+1); err != nil {
				return err
			}
		}
		o.newline(b, level)
		b.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		keys := d.OrderedKeys()
		if len(keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		if o.sort {
			// Python orders str keys by code point: UTF-8 byte order.
			keys = slices.Sorted(slices.Values(keys))
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(o.item)
			}
			o.newline(b, level+1)
			o.str(b, k)
			b.WriteString(o.key)
			val, _ := d.Get(k)
			if err := o.encode(b, val, level+1); err != nil {
				return err
			}
		}
		o.newline(b, level)
		b.WriteByte('}')
	case v.IsUndefined():
		// jinja2 raises here (Undefined is not JSON serializable).
		return errors.New("tojson: Object of type Undefined is not JSON serializable")
	default:
		return fmt.Errorf("tojson: a %s is not JSON serializable", v.String())
	}
	return nil
}

// str writes s as Python's json.dumps does: ", \ and the C0 controls
// escaped (\n \r \t \b \f by name), everything else as it is, or as
// \uXXXX (surrogate pairs above the BMP) with ensure_ascii.
func (o *pyJSONOptions) str(b *strings.Builder, s string) {
	if o.repr {
		pyStrRepr(b, s)
		return
	}
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || o.ascii && r == 0x7f:
				fmt.Fprintf(b, `\u%04x`, r)
			case o.ascii && r > 0x7f && r <= 0xffff:
				fmt.Fprintf(b, `\u%04x`, r)
			case o.ascii && r > 0xffff:
				r -= 0x10000
				fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// pyStrRepr writes Python's repr of s: in single quotes, or double ones
// when s has a single quote and no double one; the quote and \ escaped,
// \t \n \r by name, other characters Python does not print as \xNN,
// \uNNNN or \UNNNNNNNN.
func pyStrRepr(b *strings.Builder, s string) {
	q := '\''
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	b.WriteRune(q)
	for _, r := range s {
		switch {
		case r == q || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == ' ' || r < 0x7f && r >= 0x20 || r > 0x7f && unicode.IsPrint(r):
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			fmt.Fprintf(b, `\U%08x`, r)
		}
	}
	b.WriteRune(q)
}

// PyFloat formats f as Python's repr (and json.dumps) does: the shortest
// digits that read back as f, in positional notation for exponents from
// -4 to 15 (always with a fraction: "1.0"), otherwise as "1e+16",
// "1.5e-07"; NaN and the infinities as json.dumps writes them.
func PyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // -d.ddde±XX
	mant, exps, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(exps)
	if exp >= -4 && exp < 16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.ContainsAny(s, ".") {
			s += ".0"
		}
		return s
	}
	sign := "+"
	if exp < 0 {
		sign, exp = "-", -exp
	}
	return fmt.Sprintf("%se%s%02d", mant, sign, exp)
}
