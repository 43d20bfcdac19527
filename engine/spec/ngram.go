package spec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// NgramCache drafts from token statistics of earlier generations with the
// same model: for contexts of 1..Order tokens it counts which tokens
// followed. An appliance hears the same questions every day, so answers
// repeat even when the prompt does not contain them.
//
// It is safe for concurrent use: observing (after a request) and drafting
// (during one) may happen on different goroutines.
type NgramCache struct {
	Order      int // longest context, in tokens (1..4)
	MaxEntries int // contexts kept; new contexts are ignored once full

	mu      sync.RWMutex
	entries map[uint64]*ngramEntry
}

// ngramWidth is how many distinct next tokens a context remembers.
const ngramWidth = 4

type ngramEntry struct {
	tok [ngramWidth]int32
	cnt [ngramWidth]uint32
}

// NewNgramCache returns an empty cache for contexts of up to order tokens.
func NewNgramCache(order, maxEntries int) *NgramCache {
	order = min(max(order, 1), 4)
	return &NgramCache{Order: order, MaxEntries: maxEntries, entries: make(map[uint64]*ngramEntry)}
}

// Name implements Drafter.
func (c *NgramCache) Name() string { return "ngram" }

// Len is the number of contexts the cache holds.
func (c *NgramCache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}

func ctxKey(ctx []int32) uint64 {
	// FNV-1a over the ids, salted with the length so orders do not collide.
	h := uint64(14695981039346656037) ^ uint64(len(ctx))*0x9e3779b97f4a7c15
	for _, t := range ctx {
		for k := 0; k < 4; k++ {
			h ^= uint64(byte(t >> (8 * k)))
			h *= 1099511628211
		}
	}
	return h
}

// Observe learns from a finished sequence (prompt and answer).
func (c *NgramCache) Observe(tokens []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 1; i < len(tokens); i++ {
		for n := 1; n <= c.Order && n <= i; n++ {
			c.add(ctxKey(tokens[i-n:i]), tokens[i])
		}
	}
}

func (c *NgramCache) add(key uint64, next int32) {
	e := c.entries[key]
	if e == nil {
		if c.MaxEntries > 0 && len(c.entries) >= c.MaxEntries {
			return
		}
		e = &ngramEntry{}
		for i := range e.tok {
			e.tok[i] = -1
		}
		c.entries[key] = e
	}
	slot := -1
	for i := range e.tok {
		if e.tok[i] == next {
			slot = i
			break
		}
	}
	if slot < 0 {
		// Replace the least counted slot.
		slot = 0
		for i := range e.cnt {
			if e.cnt[i] < e.cnt[slot] {
				slot = i
			}
		}
		e.tok[slot], e.cnt[slot] = next, 0
	}
	if e.cnt[slot] < 1<<31 {
		e.cnt[slot]++
	}
}

// predict returns the most frequent next token after ctx and whether it is
// confident: seen at least twice and in at least half of the occurrences.
// It also returns the runner-up, if one was seen at least twice (else -1).
func (c *NgramCache) predict(ctx []int32) (int32, bool, int32) {
	e := c.entries[ctxKey(ctx)]
	if e == nil {
		return -1, false, -1
	}
	best, second, total := 0, -1, uint32(0)
	for i := range e.cnt {
		total += e.cnt[i]
		if e.cnt[i] > e.cnt[best] {
			best = i
		}
	}
	for i := range e.cnt {
		if i != best && e.cnt[i] >= 2 && (second < 0 || e.cnt[i] > e.cnt[second]) {
			second = i
		}
	}
	runner := int32(-1)
	if second >= 0 {
		runner = e.tok[second]
	}
	return e.tok[best], e.cnt[best] >= 2 && 2*e.cnt[best] >= total, runner
}

// Draft implements Drafter: from the longest known context, chain the
// confident predictions. The class is the context length of the first one.
func (c *NgramCache) Draft(history []int32, max int, dst []int32) ([]int32, int) {
	dst = dst[:0]
	c.mu.RLock()
	defer c.mu.RUnlock()
	class := 0
	for len(dst) < max {
		tok, n, _ := c.next(history, dst)
		if n == 0 {
			break
		}
		if class == 0 {
			class = n
		}
		dst = append(dst, tok)
	}
	return dst, class
}

// DraftTree implements TreeDrafter: the chain Draft proposes, and beside
// each of its tokens the runner-up of the same statistics, if any,
// continued as far as the statistics are confident. A node's class is the
// length of the context that predicted it.
func (c *NgramCache) DraftTree(history []int32, depth int, t *Tree, d int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	depth = min(depth, MaxTree)
	var chain, alt [MaxTree]int32
	var altParent, altAt, altClass [MaxTree]int
	nalt := 0
	parent := -1
	for k := 0; k < depth; k++ {
		tok, n, runner := c.next(history, chain[:k])
		if n == 0 {
			break
		}
		chain[k] = tok
		if runner >= 0 {
			alt[nalt], altParent[nalt], altAt[nalt], altClass[nalt] = runner, parent, k, n
			nalt++
		}
		if parent = t.Add(parent, tok, d, n); parent < 0 {
			break
		}
	}
	// The runners-up after the chain (first choices come first), each
	// continued by the statistics as far as they are confident.
	var branch [MaxTree]int32
	for i := range alt[:nalt] {
		k := altAt[i]
		copy(branch[:k], chain[:k])
		branch[k] = alt[i]
		p := t.Add(altParent[i], alt[i], d, altClass[i])
		for j := k + 1; j < depth && p >= 0; j++ {
			tok, n, _ := c.next(history, branch[:j])
			if n == 0 {
				break
			}
			branch[j] = tok
			p = t.Add(p, tok, d, n)
		}
	}
}

// next predicts the token after history+draft from the longest context
// with a confident prediction. It returns the token, the context length
// (0: none) and the runner-up of that context (-1: none).
func (c *NgramCache) next(history, draft []int32) (int32, int, int32) {
	if len(c.entries) == 0 {
		return -1, 0, -1
	}
	var buf [4]int32
	for n := c.Order; n >= 1; n-- {
		if n > len(history)+len(draft) {
			continue
		}
		ctx := buf[:n]
		for i := 0; i < n; i++ {
			j := len(history) + len(draft) - n + i
			if j < len(history) {
				ctx[i] = history[j]
			} else {
				ctx[i] = draft[j-len(history)]
			}
		}
		if tok, ok, runner := c.predict(ctx); ok {
			return tok, n, runner
		}
	}
	return -1, 0, -1
}

const ngramMagic = "GNG1"

// MarshalBinary encodes the cache for storage.
func (c *NgramCache) MarshalBinary() ([]byte, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	b := make([]byte, 0, 12+len(c.entries)*(8+8*ngramWidth))
	b = append(b, ngramMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(c.Order))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(c.entries)))
	for k, e := range c.entries {
		b = binary.LittleEndian.AppendUint64(b, k)
		for i := range e.tok {
			b = binary.LittleEndian.AppendUint32(b, uint32(e.tok[i]))
			b = binary.LittleEndian.AppendUint32(b, e.cnt[i])
		}
	}
	return b, nil
}

// UnmarshalBinary replaces the cache's statistics with encoded ones.
func (c *NgramCache) UnmarshalBinary(b []byte) error {
	if len(b) < 12 || string(b[:4]) != ngramMagic {
		return errors.New("spec: n-gram statistics: bad header")
	}
	order := int(binary.LittleEndian.Uint32(b[4:]))
	n := int(binary.LittleEndian.Uint32(b[8:]))
	rec := 8 + 8*ngramWidth
	if order < 1 || order > 4 || n < 0 || n > (len(b)-12)/rec || len(b) != 12+n*rec {
		return fmt.Errorf("spec: n-gram statistics: order %d, %d entries in %d bytes", order, n, len(b))
	}
	entries := make(map[uint64]*ngramEntry, n)
	p := b[12:]
	for i := 0; i < n; i++ {
		e := &ngramEntry{}
		k := binary.LittleEndian.Uint64(p)
		for j := range e.tok {
			e.tok[j] = int32(binary.LittleEndian.Uint32(p[8+8*j:]))
			e.cnt[j] = binary.LittleEndian.Uint32(p[12+8*j:])
		}
		entries[k] = e
		p = p[rec:]
	}
	c.mu.Lock()
	c.Order, c.entries = order, entries
	c.mu.Unlock()
	return nil
}
