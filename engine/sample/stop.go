package sample

import (
	"bytes"
	"unicode/utf8"
)

// StopMatcher watches streamed text for stop strings. It holds back any
// suffix that could still grow into a stop string, and any incomplete UTF-8
// sequence at the end, so that emitted text never contains a stop string and
// never ends in the middle of a character.
type StopMatcher struct {
	stops   [][]byte
	buf     []byte // pending text is buf[start:]
	start   int
	stopped bool
}

// NewStopMatcher returns a matcher for stops. Empty strings are ignored; with
// no stop strings the matcher only holds back incomplete UTF-8.
func NewStopMatcher(stops []string) *StopMatcher {
	m := &StopMatcher{}
	for _, s := range stops {
		if s != "" {
			m.stops = append(m.stops, []byte(s))
		}
	}
	return m
}

// Feed appends newly decoded text. It returns the text that is safe to emit
// now, and whether a stop string occurred; then emit ends just before the
// earliest occurrence of any stop string and the matcher is done: later calls
// return nothing and true. The returned slice belongs to the matcher and is
// valid until the next call of Feed or Flush.
func (m *StopMatcher) Feed(text []byte) (emit []byte, stopped bool) {
	if m.stopped {
		return nil, true
	}
	n := copy(m.buf, m.buf[m.start:])
	m.buf = append(m.buf[:n], text...)
	m.start = 0

	first := -1
	for _, s := range m.stops {
		if i := bytes.Index(m.buf, s); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	if first >= 0 {
		m.stopped = true
		emit = m.buf[:first]
		m.start = len(m.buf)
		return emit, true
	}
	keep := max(m.partialStop(), incompleteUTF8(m.buf))
	m.start = len(m.buf) - keep
	return m.buf[:m.start], false
}

// Flush returns the text still held back, for the end of generation, and
// resets the pending text. After a stop it returns nothing.
func (m *StopMatcher) Flush() []byte {
	if m.stopped {
		return nil
	}
	out := m.buf[m.start:]
	m.start = len(m.buf)
	return out
}

// partialStop returns the length of the longest suffix of the pending text
// that is a proper prefix of a stop string.
func (m *StopMatcher) partialStop() int {
	best := 0
	for _, s := range m.stops {
		for h := min(len(s)-1, len(m.buf)); h > best; h-- {
			if bytes.HasSuffix(m.buf, s[:h]) {
				best = h
				break
			}
		}
	}
	return best
}

// incompleteUTF8 returns the length of a trailing UTF-8 sequence of b that
// has started but not finished (0 if b ends on a character boundary or in
// invalid bytes, which are emitted as they are).
func incompleteUTF8(b []byte) int {
	for k := 1; k <= utf8.UTFMax-1 && k <= len(b); k++ {
		c := b[len(b)-k]
		if c&0xC0 == 0x80 {
			continue // continuation byte: look further back
		}
		if c >= 0xC0 && !utf8.FullRune(b[len(b)-k:]) {
			return k
		}
		return 0
	}
	return 0
}
