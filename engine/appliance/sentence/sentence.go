// Package sentence splits streamed text into sentences, so that speech
// can start on the first sentence while the rest is still being generated.
// It sits beside the appliance core so that every front end that speaks
// (the device's voice, the Hermes bridge) shares it without importing
// another front end.
package sentence

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// DefaultMaxLen is the length (in runes) after which a sentence without an
// end is cut at a comma or a space, to keep speech latency low.
const DefaultMaxLen = 300

// Splitter turns a stream of text pieces into sentences. The zero value is
// ready to use. A Splitter is not safe for concurrent use.
type Splitter struct {
	// MaxLen cuts overlong sentences (in runes); 0 means DefaultMaxLen,
	// negative means never.
	MaxLen int
	buf    string
}

// Write adds a piece of streamed text and returns the sentences it
// completes, trimmed, in order. Pieces may split words and even UTF-8
// sequences; invalid UTF-8 is dropped.
func (s *Splitter) Write(piece string) []string {
	s.buf += piece
	var out []string
	for {
		end, next := boundary(s.buf)
		if end < 0 {
			if cut := s.cut(); cut > 0 {
				end, next = cut, cut
			} else {
				break
			}
		}
		if t := strings.TrimSpace(strings.ToValidUTF8(s.buf[:end], "")); t != "" {
			out = append(out, t)
		}
		s.buf = s.buf[next:]
	}
	return out
}

// Flush returns what remains (trimmed, possibly empty) and resets the
// Splitter: call it when the stream ends.
func (s *Splitter) Flush() string {
	t := strings.TrimSpace(strings.ToValidUTF8(s.buf, ""))
	s.buf = ""
	return t
}

// Split splits a complete text into sentences.
func Split(text string) []string {
	var s Splitter
	out := s.Write(text)
	if t := s.Flush(); t != "" {
		out = append(out, t)
	}
	return out
}

// cut returns where to cut an overlong buffer without a sentence end, or 0.
func (s *Splitter) cut() int {
	maxLen := s.MaxLen
	if maxLen == 0 {
		maxLen = DefaultMaxLen
	}
	if maxLen < 0 || utf8.RuneCountInString(s.buf) <= maxLen {
		return 0
	}
	// Byte offset of the maxLen-th rune.
	lim, n := 0, 0
	for i := range s.buf {
		if n == maxLen {
			lim = i
			break
		}
		n++
	}
	head := s.buf[:lim]
	for _, sep := range []string{"; ", ": ", ", ", " – ", " - ", " "} {
		if i := strings.LastIndex(head, sep); i > maxLen/4 {
			return i + len(sep)
		}
	}
	return lim
}

// abbreviations end with a period but rarely end a sentence (lower case,
// without the period).
var abbreviations = map[string]bool{
	"mr": true, "mrs": true, "ms": true, "dr": true, "prof": true, "sr": true, "jr": true,
	"st": true, "mt": true, "vs": true, "etc": true, "e.g": true, "i.e": true, "cf": true,
	"approx": true, "ca": true, "no": true, "nr": true, "vol": true, "fig": true, "inc": true,
	"ltd": true, "co": true, "corp": true, "jan": true, "feb": true, "mar": true, "apr": true,
	"jun": true, "jul": true, "aug": true, "sep": true, "sept": true, "oct": true, "nov": true,
	"dec": true, "a.m": true, "p.m": true, "u.s": true, "z.b": true, "u.a": true, "bzw": true,
	"usw": true, "d.h": true, "evtl": true, "ggf": true, "hr": true, "fr": true, "str": true,
	"mme": true, "mlle": true, "sra": true, "sr.a": true,
}

// months follow an ordinal day with a period in German dates.
var months = map[string]bool{
	"januar": true, "jänner": true, "februar": true, "märz": true, "april": true, "mai": true,
	"juni": true, "juli": true, "august": true, "september": true, "oktober": true,
	"november": true, "dezember": true,
}

const closers = "\"')]}”’»"

// boundary finds the first sentence end in b: end is where the sentence
// stops, next where the following text begins. It returns -1 when no end
// can be decided yet.
func boundary(b string) (end, next int) {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRuneInString(b[i:])
		if r == utf8.RuneError && size <= 1 && !utf8.FullRuneInString(b[i:]) {
			return -1, -1 // incomplete UTF-8 at the end: wait for more
		}
		switch {
		case r == '\n':
			if strings.TrimSpace(b[:i]) != "" {
				return i, i + 1
			}
		case r == '。' || r == '！' || r == '？':
			j := skipRun(b, i)
			return j, j
		case r == '.' || r == '!' || r == '?' || r == '…':
			j := skipRun(b, i)
			if j == len(b) {
				return -1, -1 // "3." or "Dr." may go on: wait
			}
			nr, _ := utf8.DecodeRuneInString(b[j:])
			if !unicode.IsSpace(nr) {
				i = j // "3.14", "e.g.x", "file.txt", "?!"
				continue
			}
			k := j
			for k < len(b) {
				c, n := utf8.DecodeRuneInString(b[k:])
				if !unicode.IsSpace(c) {
					break
				}
				k += n
			}
			if k == len(b) {
				if strings.ContainsRune(b[j:], '\n') {
					return j, k
				}
				return -1, -1 // the next word decides
			}
			if r == '.' && shortNumberBefore(b[:i]) && strings.IndexFunc(b[k:], func(r rune) bool { return !unicode.IsLetter(r) }) < 0 {
				return -1, -1 // "am 3. Ma…": the whole next word decides
			}
			if r != '.' || endsSentence(b[:i], b[k:]) {
				return j, j
			}
			i = k
			continue
		}
		i += size
	}
	return -1, -1
}

// skipRun returns the end of a run of sentence-ending marks and closing
// quotes or brackets starting at i.
func skipRun(b string, i int) int {
	for i < len(b) {
		c, n := utf8.DecodeRuneInString(b[i:])
		if !strings.ContainsRune(".!?…。！？", c) && !strings.ContainsRune(closers, c) {
			break
		}
		i += n
	}
	return i
}

// shortNumberBefore reports whether before ends in a number of one or two
// digits.
func shortNumberBefore(before string) bool {
	w := before[strings.LastIndexFunc(before, unicode.IsSpace)+1:]
	return len(w) > 0 && len(w) <= 2 && strings.Trim(w, "0123456789") == ""
}

// endsSentence decides whether a period after before, followed by a space
// and after, ends a sentence.
func endsSentence(before, after string) bool {
	w := before[strings.LastIndexFunc(before, unicode.IsSpace)+1:]
	w = strings.TrimLeft(w, "\"'([{“‘«")
	next, _ := utf8.DecodeRuneInString(after)
	if unicode.IsLower(next) {
		return false // "approx. five", unknown abbreviations
	}
	lw := strings.ToLower(w)
	if abbreviations[lw] {
		return false
	}
	if n := utf8.RuneCountInString(w); n == 1 {
		if r, _ := utf8.DecodeRuneInString(w); unicode.IsUpper(r) {
			return false // an initial: "J. R. R. Tolkien"
		}
	}
	if w != "" && strings.Trim(w, "0123456789") == "" {
		line := before[strings.LastIndexByte(before, '\n')+1:]
		if strings.TrimSpace(line) == w {
			return false // a list number at the start of a line: "1. "
		}
		nw := after[:strings.IndexFunc(after+" ", func(r rune) bool { return !unicode.IsLetter(r) })]
		if len(w) <= 2 && months[strings.ToLower(nw)] {
			return false // a German date: "am 3. Mai"
		}
	}
	return true
}

// WholeRunes returns the length of b's longest prefix that does not end
// inside a UTF-8 sequence: what a front end may send of streamed text
// now, keeping the rest for the next piece (invalid bytes count as whole).
func WholeRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}

// Cut returns the longest start of s of at most n bytes that ends on a
// rune boundary: s shortened for a payload or a log line without
// splitting a UTF-8 sequence.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := max(n, 0)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
