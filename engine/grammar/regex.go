package grammar

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// pattern converts a JSON Schema pattern (ECMA-262's common subset:
// literals, ., classes, \d \w \s, groups, |, * + ? {m,n}; ^ and $ at the
// ends) into a grammar of JSON string contents whose decoded text matches
// it. An unanchored side matches anything, as a regex search does.
func (c *converter) pattern(p, path string) (string, error) {
	rp := &rparser{src: p, path: path}
	anchorStart, anchorEnd := strings.HasPrefix(p, "^"), strings.HasSuffix(p, "$") && !strings.HasSuffix(p, `\$`)
	if anchorStart {
		rp.pos = 1
	}
	if anchorEnd {
		rp.src = p[:len(p)-1]
	}
	body, err := rp.alt(0)
	if err != nil {
		return "", err
	}
	if rp.pos < len(rp.src) {
		return "", unsupported(path, "pattern", fmt.Sprintf("%q: unexpected %q", p, rp.src[rp.pos]))
	}
	if !anchorStart {
		body = "pchar* " + body
	}
	if !anchorEnd {
		body += " pchar*"
	}
	return body, nil
}

type rparser struct {
	src  string
	pos  int
	path string
}

func (r *rparser) fail(what string) error {
	return unsupported(r.path, "pattern", fmt.Sprintf("%q: %s", r.src, what))
}

func (r *rparser) alt(depth int) (string, error) {
	if depth > 50 {
		return "", r.fail("nested too deeply")
	}
	var alts []string
	for {
		s, err := r.seq(depth)
		if err != nil {
			return "", err
		}
		alts = append(alts, s)
		if r.pos < len(r.src) && r.src[r.pos] == '|' {
			r.pos++
			continue
		}
		return "(" + strings.Join(alts, " | ") + ")", nil
	}
}

func (r *rparser) seq(depth int) (string, error) {
	var items []string
	for r.pos < len(r.src) {
		ch := r.src[r.pos]
		var item string
		switch ch {
		case '|', ')':
			return strings.Join(items, " ") + " ", nil
		case '(':
			r.pos++
			if strings.HasPrefix(r.src[r.pos:], "?:") {
				r.pos += 2
			} else if r.pos < len(r.src) && r.src[r.pos] == '?' {
				return "", r.fail("lookaround and named groups are not enforced")
			}
			s, err := r.alt(depth + 1)
			if err != nil {
				return "", err
			}
			if r.pos >= len(r.src) || r.src[r.pos] != ')' {
				return "", r.fail("missing )")
			}
			r.pos++
			item = s
		case '[':
			s, err := r.class()
			if err != nil {
				return "", err
			}
			item = s
		case '.':
			r.pos++
			item = jsonClass(complement([]crange{{'\n', '\n'}, {'\r', '\r'}}))
		case '^', '$':
			return "", r.fail("anchors are enforced only at the ends")
		case '\\':
			rs, lit, err := r.escape()
			if err != nil {
				return "", err
			}
			if rs != nil {
				item = jsonClass(rs)
			} else {
				item = jsonClass([]crange{{lit, lit}})
			}
		case '*', '+', '?', '{':
			return "", r.fail("a quantifier without an item")
		default:
			ru, n := utf8.DecodeRuneInString(r.src[r.pos:])
			r.pos += n
			item = jsonClass([]crange{{ru, ru}})
		}
		q, err := r.quant()
		if err != nil {
			return "", err
		}
		items = append(items, "("+item+")"+q)
	}
	return strings.Join(items, " ") + " ", nil
}

func (r *rparser) quant() (string, error) {
	if r.pos >= len(r.src) {
		return "", nil
	}
	q := ""
	switch r.src[r.pos] {
	case '*', '+', '?':
		q = r.src[r.pos : r.pos+1]
		r.pos++
	case '{':
		end := strings.IndexByte(r.src[r.pos:], '}')
		if end < 0 {
			return "", r.fail("unterminated {")
		}
		q = r.src[r.pos : r.pos+end+1]
		r.pos += end + 1
	default:
		return "", nil
	}
	if r.pos < len(r.src) && r.src[r.pos] == '?' { // lazy: the same language
		r.pos++
	}
	return q, nil
}

var (
	digitR = []crange{{'0', '9'}}
	wordR  = []crange{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
	spaceR = []crange{{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x2028, 0x2029}, {0xFEFF, 0xFEFF}}
)

// escape reads \x: a class (rs) or one character (lit).
func (r *rparser) escape() ([]crange, rune, error) {
	if r.pos+1 >= len(r.src) {
		return nil, 0, r.fail("dangling backslash")
	}
	e := r.src[r.pos+1]
	r.pos += 2
	switch e {
	case 'd':
		return digitR, 0, nil
	case 'w':
		return wordR, 0, nil
	case 's':
		return spaceR, 0, nil
	case 'D':
		return complement(digitR), 0, nil
	case 'W':
		return complement(wordR), 0, nil
	case 'S':
		return complement(spaceR), 0, nil
	case 'n':
		return nil, '\n', nil
	case 't':
		return nil, '\t', nil
	case 'r':
		return nil, '\r', nil
	case 'b', 'B':
		return nil, 0, r.fail("word boundaries are not enforced")
	}
	if e >= '1' && e <= '9' {
		return nil, 0, r.fail("backreferences are not enforced")
	}
	if e >= 'a' && e <= 'z' || e >= 'A' && e <= 'Z' {
		return nil, 0, r.fail(fmt.Sprintf("escape \\%c is not enforced", e))
	}
	ru, n := utf8.DecodeRuneInString(r.src[r.pos-1:])
	r.pos += n - 1
	return nil, ru, nil
}

func (r *rparser) class() (string, error) {
	r.pos++ // [
	neg := false
	if r.pos < len(r.src) && r.src[r.pos] == '^' {
		neg, r.pos = true, r.pos+1
	}
	var rs []crange
	first := true
	for {
		if r.pos >= len(r.src) {
			return "", r.fail("unterminated [")
		}
		if r.src[r.pos] == ']' && !first {
			r.pos++
			break
		}
		first = false
		var lo rune
		if r.src[r.pos] == '\\' {
			cls, lit, err := r.escape()
			if err != nil {
				return "", err
			}
			if cls != nil {
				rs = append(rs, cls...)
				continue
			}
			lo = lit
		} else {
			ru, n := utf8.DecodeRuneInString(r.src[r.pos:])
			r.pos += n
			lo = ru
		}
		hi := lo
		if r.pos+1 < len(r.src) && r.src[r.pos] == '-' && r.src[r.pos+1] != ']' {
			r.pos++
			if r.src[r.pos] == '\\' {
				cls, lit, err := r.escape()
				if err != nil || cls != nil {
					return "", r.fail("a class in a range")
				}
				hi = lit
			} else {
				ru, n := utf8.DecodeRuneInString(r.src[r.pos:])
				r.pos += n
				hi = ru
			}
			if hi < lo {
				return "", r.fail("a reversed range")
			}
		}
		rs = append(rs, crange{lo, hi})
	}
	if neg {
		rs = complement(rs)
	}
	return jsonClass(rs), nil
}

// jsonClass is a grammar of the JSON string text of one character in rs:
// the character itself, or an escape for the quote, the backslash and
// control characters.
func jsonClass(rs []crange) string {
	rs = normalize(rs)
	var plainR []crange
	var alts []string
	for _, x := range rs {
		lo, hi := x.lo, x.hi
		for c := lo; c <= hi && c < 0x20; c++ {
			alts = append(alts, literal(fmt.Sprintf(`\u%04x`, c)))
			switch c {
			case '\n':
				alts = append(alts, literal(`\n`))
			case '\t':
				alts = append(alts, literal(`\t`))
			case '\r':
				alts = append(alts, literal(`\r`))
			}
		}
		lo = max(lo, 0x20)
		for _, special := range []rune{'"', '\\'} {
			if lo <= special && special <= hi {
				alts = append(alts, literal(`\`+string(special)))
				if lo < special {
					plainR = append(plainR, crange{lo, special - 1})
				}
				lo = special + 1
			}
		}
		if lo <= hi {
			plainR = append(plainR, crange{lo, hi})
		}
	}
	if len(plainR) > 0 {
		var sb strings.Builder
		sb.WriteByte('[')
		for _, x := range plainR {
			writeClassRune(&sb, x.lo)
			if x.hi != x.lo {
				sb.WriteByte('-')
				writeClassRune(&sb, x.hi)
			}
		}
		sb.WriteByte(']')
		alts = append([]string{sb.String()}, alts...)
	}
	if len(alts) == 0 {
		return `[^\x00-\U0010FFFF]` // nothing
	}
	return strings.Join(alts, " | ")
}

func writeClassRune(sb *strings.Builder, r rune) {
	switch {
	case r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'):
		sb.WriteRune(r)
	case r <= 0xFFFF:
		fmt.Fprintf(sb, `\u%04X`, r)
	default:
		fmt.Fprintf(sb, `\U%08X`, r)
	}
}
