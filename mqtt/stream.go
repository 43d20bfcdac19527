package mqtt

import (
	"strings"
	"time"

	"github.com/geisten/geist/cmd/appliance/sentence"
)

// chunker batches streamed text into chunks: it emits what it holds at the
// end of a sentence or line, or when interval has passed since the last
// chunk, so a fast model does not flood the broker with one message per
// token. It never splits a UTF-8 sequence.
type chunker struct {
	interval time.Duration
	now      func() time.Time
	emit     func(seq int, delta string)
	buf      []byte
	seq      int
	last     time.Time
}

func newChunker(interval time.Duration, now func() time.Time, emit func(int, string)) *chunker {
	return &chunker{interval: interval, now: now, emit: emit, last: now()}
}

// add takes the next piece of text.
func (c *chunker) add(delta string) {
	c.buf = append(c.buf, delta...)
	n := sentence.WholeRunes(c.buf)
	if n == 0 {
		return
	}
	if endsSentence(c.buf[:n]) || c.now().Sub(c.last) >= c.interval {
		c.flushN(n)
	}
}

// flush emits everything held (an incomplete UTF-8 tail included, which
// JSON then shows as U+FFFD: the text ended there).
func (c *chunker) flush() {
	if len(c.buf) > 0 {
		c.flushN(len(c.buf))
	}
}

func (c *chunker) flushN(n int) {
	c.emit(c.seq, string(c.buf[:n]))
	c.seq++
	c.buf = append(c.buf[:0], c.buf[n:]...)
	c.last = c.now()
}

func endsSentence(b []byte) bool {
	s := strings.TrimRight(string(b), " \t\"')”’")
	if s == "" {
		return false
	}
	switch s[len(s)-1] {
	case '.', '!', '?', '\n', ':', ';':
		return true
	}
	return strings.HasSuffix(s, "。") || strings.HasSuffix(s, "！") || strings.HasSuffix(s, "？")
}
