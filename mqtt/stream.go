package mqtt

import (
	"strings"
	"time"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/sentence"
)

// chunker batches streamed text into chunks: it emits what it holds at the
// end of a sentence or line, or when interval has passed since the last
// chunk, so a fast model does not flood the broker with one message per
// token. It never splits a UTF-8 sequence. Tool calls go out as soon as
// they are complete, after the content before them.
type chunker struct {
	interval time.Duration
	now      func() time.Time
	emit     func(Chunk) // ID is left for emit to fill in
	buf      []byte      // content held
	think    []byte      // thinking held (it comes before the content)
	seq      int
	last     time.Time
}

func newChunker(interval time.Duration, now func() time.Time, emit func(Chunk)) *chunker {
	return &chunker{interval: interval, now: now, emit: emit, last: now()}
}

// add takes the next piece of the answer.
func (c *chunker) add(p appliance.Piece) {
	if p.Thinking != "" {
		c.think = append(c.think, p.Thinking...)
		c.maybeFlush(&c.think, true)
	}
	if p.Content != "" {
		if len(c.think) > 0 {
			c.flushN(&c.think, len(c.think), true) // the thinking ended
		}
		c.buf = append(c.buf, p.Content...)
		c.maybeFlush(&c.buf, false)
	}
	if len(p.Calls) > 0 {
		c.flush()
		c.emit(Chunk{Seq: c.seq, ToolCalls: p.Calls})
		c.seq++
		c.last = c.now()
	}
}

func (c *chunker) maybeFlush(buf *[]byte, thinking bool) {
	n := sentence.WholeRunes(*buf)
	if n == 0 {
		return
	}
	if endsSentence((*buf)[:n]) || c.now().Sub(c.last) >= c.interval {
		c.flushN(buf, n, thinking)
	}
}

// flush emits everything held (an incomplete UTF-8 tail included, which
// JSON then shows as U+FFFD: the text ended there).
func (c *chunker) flush() {
	if len(c.think) > 0 {
		c.flushN(&c.think, len(c.think), true)
	}
	if len(c.buf) > 0 {
		c.flushN(&c.buf, len(c.buf), false)
	}
}

func (c *chunker) flushN(buf *[]byte, n int, thinking bool) {
	if thinking {
		c.emit(Chunk{Seq: c.seq, Thinking: string((*buf)[:n])})
	} else {
		c.emit(Chunk{Seq: c.seq, Delta: string((*buf)[:n])})
	}
	c.seq++
	*buf = append((*buf)[:0], (*buf)[n:]...)
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
