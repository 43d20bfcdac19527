package tokenizer

import "strings"

// fragment is a piece of the input: raw text [start,end) or a special token.
type fragment struct {
	start, end int
	token      int32 // -1 for raw text
}

// symbol is a run of bytes of the text being merged, linked to its
// neighbours.
type symbol struct {
	start, n   int
	prev, next int
}

// bigram is a candidate merge of two adjacent symbols.
type bigram struct {
	left, right int
	score       float32 // SPM: token score, higher first
	rank        int32   // BPE: merge rank, lower first
	size        int
}

// bigramOrder is a heap order on bigrams.
type bigramOrder interface{ less(a, b *bigram) bool }

// spmOrder is llama.cpp's llm_bigram_spm::comparator: highest score first,
// then leftmost.
type spmOrder struct{}

func (spmOrder) less(a, b *bigram) bool {
	return a.score > b.score || (a.score == b.score && a.left < b.left)
}

// bpeOrder is llm_bigram_bpe::comparator: lowest rank first, then leftmost.
type bpeOrder struct{}

func (bpeOrder) less(a, b *bigram) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.left < b.left)
}

// appendSymbols appends text's UTF-8 sequences (a truncated one at the end
// as it is) to syms as a doubly linked list, the merge loop's start.
func appendSymbols(syms []symbol, text []byte) []symbol {
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		idx := len(syms)
		next := idx + 1
		if off+n == len(text) {
			next = -1
		}
		syms = append(syms, symbol{start: off, n: n, prev: idx - 1, next: next})
		off += n
	}
	return syms
}

// merger is the merge loop SPM and BPE share (llama.cpp's
// llm_tokenizer_spm_session and llm_tokenizer_bpe_session). next hands the
// caller the pairs of symbols to offer, in llama.cpp's order: every adjacent
// pair first, then, after each merge, the merged symbol's pairs with its left
// and its right neighbour; the caller pushes those the vocabulary has. When
// none is left to offer, next pops the best bigram in O's order, skips it if
// an earlier merge made it stale, and merges it into its left symbol.
type merger[O bigramOrder] struct {
	syms         []symbol
	q            []bigram
	seed         int // the right symbol of the next adjacent pair
	pendL, pendR int // a pair still to offer, pendL < 0 for none
}

func newMerger[O bigramOrder](syms []symbol, q []bigram) merger[O] {
	return merger[O]{syms: syms, q: q, seed: 1, pendL: -1}
}

func (m *merger[O]) push(b bigram) { m.q = heapPush[O](m.q, b) }

// next returns the next pair to offer, ok false when the merging is done.
func (m *merger[O]) next() (left, right int, ok bool) {
	if m.seed < len(m.syms) {
		m.seed++
		return m.seed - 2, m.seed - 1, true
	}
	for {
		if m.pendL >= 0 {
			left, right = m.pendL, m.pendR
			m.pendL = -1
			return left, right, true
		}
		if len(m.q) == 0 {
			return 0, 0, false
		}
		var b bigram
		b, m.q = heapPop[O](m.q)
		l, r := &m.syms[b.left], &m.syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			m.syms[r.next].prev = b.left
		}
		if l.next >= 0 {
			m.pendL, m.pendR = b.left, l.next
		}
		if l.prev >= 0 {
			return l.prev, b.left, true
		}
	}
}

// heapPush adds x to the binary heap q.
func heapPush[O bigramOrder](q []bigram, x bigram) []bigram {
	var o O
	q = append(q, x)
	for i := len(q) - 1; i > 0; {
		parent := (i - 1) / 2
		if !o.less(&q[i], &q[parent]) {
			break
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
	return q
}

// heapPop removes the first element of the binary heap q.
func heapPop[O bigramOrder](q []bigram) (bigram, []bigram) {
	var o O
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q = q[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && o.less(&q[r], &q[l]) {
			m = r
		}
		if !o.less(&q[m], &q[i]) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	return top, q
}

// session holds the scratch buffers of one Encode call.
type session struct {
	frags, frags2 []fragment
	buf           []byte // SPM: escaped text; BPE: byte-encoded word
	key           []byte // BPE: "left right" merge lookup key
	syms          []symbol
	queue         []bigram
	pt            pretokState
	segs          []int
}

func (t *Tokenizer) getSession() *session {
	if s, ok := t.pool.Get().(*session); ok {
		return s
	}
	return &session{}
}

// Encode tokenizes text as llama_tokenize does. addSpecial adds BOS/EOS as
// the vocabulary asks; parseSpecial turns the text of control tokens (such as
// <|im_start|>) into those tokens. User-defined tokens are always matched.
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int32 {
	return t.AppendEncode(nil, text, addSpecial, parseSpecial)
}

// AppendEncode is Encode appending to dst.
func (t *Tokenizer) AppendEncode(dst []int32, text string, addSpecial, parseSpecial bool) []int32 {
	s := t.getSession()
	defer t.pool.Put(s)

	frags := s.frags[:0]
	if text != "" {
		frags = append(frags, fragment{0, len(text), -1})
		frags = t.partition(s, text, frags, parseSpecial)
	}
	s.frags = frags

	switch t.typ {
	case modelSPM:
		prevSpecial := true
		if addSpecial && t.addBOS {
			dst = append(dst, t.bos)
		}
		for _, f := range frags {
			if f.token >= 0 {
				dst = append(dst, f.token)
				prevSpecial = true
				continue
			}
			s.buf = s.buf[:0]
			if t.addSpacePrefix && prevSpecial {
				s.buf = append(s.buf, "\xe2\x96\x81"...)
			}
			for i := f.start; i < f.end; i++ {
				if c := text[i]; c == ' ' {
					s.buf = append(s.buf, "\xe2\x96\x81"...)
				} else {
					s.buf = append(s.buf, c)
				}
			}
			dst = t.spmTokenize(s, dst)
			prevSpecial = false
		}
		if addSpecial && t.addEOS {
			dst = append(dst, t.eos)
		}
	case modelWPM:
		dst = t.wpmEncode(s, dst, text, frags, addSpecial)
	case modelBPE:
		if addSpecial && t.addBOS {
			dst = append(dst, t.bos)
		}
		for _, f := range frags {
			if f.token >= 0 {
				dst = append(dst, f.token)
				continue
			}
			dst = t.bpeTokenize(s, dst, text[f.start:f.end])
		}
		if addSpecial && t.addEOS {
			dst = append(dst, t.eos)
		}
	}
	return dst
}

// encodeText tokenizes raw text without special-token handling.
func (t *Tokenizer) encodeText(dst []int32, text string) []int32 {
	s := t.getSession()
	defer t.pool.Put(s)
	return t.bpeTokenize(s, dst, text)
}

// isSpace is C's isspace in the "C" locale.
func isSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}

// partition is llama.cpp's tokenizer_st_partition: for each special token,
// longest first, every occurrence in the remaining raw fragments is cut out.
// Control and unknown tokens are skipped unless parseSpecial; user-defined
// tokens always match. lstrip/rstrip drop whitespace next to a token.
func (t *Tokenizer) partition(s *session, text string, frags []fragment, parseSpecial bool) []fragment {
	for _, id := range t.special {
		a := t.attr[id]
		if !parseSpecial && a&(attrControl|attrUnknown) != 0 {
			continue
		}
		tok := t.text[id]
		// Cheap reject: is the token anywhere in the raw fragments?
		found := false
		for _, f := range frags {
			if f.token < 0 && indexIn(text, f.start, f.end, tok) >= 0 {
				found = true
				break
			}
		}
		if !found {
			continue
		}
		out := s.frags2[:0]
		for _, f := range frags {
			if f.token >= 0 {
				out = append(out, f)
				continue
			}
			start, end := f.start, f.end
			for {
				m := indexIn(text, start, end, tok)
				if m < 0 {
					out = append(out, fragment{start, end, -1})
					break
				}
				if m > start {
					l := m
					if a&attrLStrip != 0 {
						for l > start && isSpace(text[l-1]) {
							l--
						}
					}
					if l > start {
						out = append(out, fragment{start, l, -1})
					}
				}
				out = append(out, fragment{0, 0, id})
				r := m + len(tok)
				if r >= end {
					break
				}
				if a&attrRStrip != 0 {
					for r < end && isSpace(text[r]) {
						r++
					}
				}
				if r >= end {
					break
				}
				start = r
			}
		}
		s.frags2 = frags
		frags = out
	}
	return frags
}

// indexIn finds tok in text[start:end], returning an absolute offset or -1.
func indexIn(text string, start, end int, tok string) int {
	if end-start < len(tok) {
		return -1
	}
	i := strings.Index(text[start:end], tok)
	if i < 0 {
		return -1
	}
	return start + i
}

// spmTokenize is llama.cpp's llm_tokenizer_spm_session::tokenize on s.buf.
func (t *Tokenizer) spmTokenize(s *session, dst []int32) []int32 {
	text := s.buf
	syms := appendSymbols(s.syms[:0], text)
	s.syms = syms
	m := newMerger[spmOrder](syms, s.queue[:0])
	for left, right, ok := m.next(); ok; left, right, ok = m.next() {
		l := syms[left]
		if id := t.lookupBytes(text[l.start : l.start+l.n+syms[right].n]); id >= 0 {
			m.push(bigram{left: left, right: right, score: t.score[id], size: l.n + syms[right].n})
		}
	}
	s.queue = m.q
	if len(syms) == 0 {
		return dst
	}
	for i := 0; i != -1; i = syms[i].next {
		sym := syms[i]
		piece := text[sym.start : sym.start+sym.n]
		if id := t.lookupBytes(piece); id >= 0 {
			dst = append(dst, id)
			continue
		}
		for _, c := range piece {
			if id := t.byteToToken(c); id >= 0 {
				dst = append(dst, id)
			} else if t.unk >= 0 {
				dst = append(dst, t.unk)
			}
		}
	}
	return dst
}

// bpeTokenize is llama.cpp's llm_tokenizer_bpe_session::tokenize for one raw
// text fragment.
func (t *Tokenizer) bpeTokenize(s *session, dst []int32, text string) []int32 {
	p := &s.pt
	p.cps = decodeCpts(p.cps[:0], text)
	if len(p.cps) == 0 {
		return dst
	}
	p.flags = p.flags[:0]
	for _, c := range p.cps {
		p.flags = append(p.flags, cptFlags(c))
	}
	segs := append(s.segs[:0], len(p.cps))
	for _, split := range t.pre.splitters {
		segs = split(p, segs)
	}
	s.segs = segs

	start := 0
	for _, n := range segs {
		// Byte-encode the word: code points back to UTF-8, every byte to
		// its GPT-2 unicode character.
		var raw [4]byte
		w := s.buf[:0]
		for _, c := range p.cps[start : start+n] {
			for _, b := range appendCpt(raw[:0], c) {
				w = append(w, byteEncoded[b]...)
			}
		}
		s.buf = w
		start += n
		dst = t.bpeWord(s, dst, w)
	}
	return dst
}

// bpeWord merges one byte-encoded word and appends its tokens.
func (t *Tokenizer) bpeWord(s *session, dst []int32, w []byte) []int32 {
	if t.pre.ignoreMerges {
		if id := t.lookupBytes(w); id >= 0 {
			return append(dst, id)
		}
	}
	syms := appendSymbols(s.syms[:0], w)
	s.syms = syms
	m := newMerger[bpeOrder](syms, s.queue[:0])
	for left, right, ok := m.next(); ok; left, right, ok = m.next() {
		l, r := &syms[left], &syms[right]
		key := append(s.key[:0], w[l.start:l.start+l.n]...)
		key = append(key, ' ')
		key = append(key, w[r.start:r.start+r.n]...)
		s.key = key
		if rank, found := t.ranks[string(key)]; found {
			m.push(bigram{left: left, right: right, rank: rank, size: l.n + r.n})
		}
	}
	s.queue = m.q
	for i := 0; i != -1 && i < len(syms); i = syms[i].next {
		sym := syms[i]
		if sym.n == 0 {
			continue
		}
		piece := w[sym.start : sym.start+sym.n]
		if id := t.lookupBytes(piece); id >= 0 {
			dst = append(dst, id)
			continue
		}
		for _, c := range piece {
			if id := t.byteTok[c]; id >= 0 {
				dst = append(dst, id)
			}
		}
	}
	return dst
}

// lookupBytes returns the id of token text b, or -1, without allocating.
func (t *Tokenizer) lookupBytes(b []byte) int32 {
	if id, ok := t.ids[string(b)]; ok {
		return id
	}
	return -1
}
