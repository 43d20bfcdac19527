package tokenizer

import "unicode/utf8"

// buildPieces renders every token as llama.cpp's token_to_piece(id,
// special=true) does and stores the results in one buffer.
func (t *Tokenizer) buildPieces() {
	n := len(t.text)
	t.pieceOff = make([]int32, n+1)
	size := 0
	for _, s := range t.text {
		size += len(s)
	}
	buf := make([]byte, 0, size)
	var cps []rune
	for id, text := range t.text {
		t.pieceOff[id] = int32(len(buf))
		a := t.attr[id]
		switch {
		case a&(attrUnknown|attrControl|attrUserDefined) != 0:
			buf = append(buf, text...)
		case a&attrNormal != 0:
			if t.typ == modelSPM || t.typ == modelWPM {
				buf = appendUnescaped(buf, text)
			} else {
				cps = decodeCpts(cps[:0], text)
				buf = appendGPT2Decoded(buf, cps, text)
			}
		case a&attrByte != 0:
			buf = append(buf, hexByte(text))
		}
	}
	t.pieceOff[n] = int32(len(buf))
	t.pieces = buf
}

// appendUnescaped appends s with every "▁" replaced by a space.
func appendUnescaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		if i+3 <= len(s) && s[i] == 0xE2 && s[i+1] == 0x96 && s[i+2] == 0x81 {
			dst = append(dst, ' ')
			i += 3
			continue
		}
		dst = append(dst, s[i])
		i++
	}
	return dst
}

// appendGPT2Decoded maps the GPT-2 unicode characters of a token back to
// bytes (llama_decode_text), including llama.cpp's "[UNK_BYTE_0x..]" for
// characters outside the byte table.
func appendGPT2Decoded(dst []byte, cps []rune, text string) []byte {
	const hex = "0123456789abcdef"
	for _, c := range cps {
		if b, ok := runeToByte(c); ok {
			dst = append(dst, b)
			continue
		}
		var raw [4]byte
		dst = append(dst, "[UNK_BYTE_0x"...)
		for _, b := range appendCpt(raw[:0], c) {
			dst = append(dst, hex[b>>4], hex[b&15])
		}
		dst = append(dst, text...)
		dst = append(dst, ']')
	}
	return dst
}

// hexByte parses the two hex digits of "<0xXX>" as strtol does: it stops
// at the first non-hex character.
func hexByte(s string) byte {
	if len(s) < 3 {
		return 0
	}
	s = s[3:]
	if len(s) > 2 {
		s = s[:2]
	}
	v := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		var d int
		switch {
		case c >= '0' && c <= '9':
			d = int(c - '0')
		case c >= 'a' && c <= 'f':
			d = int(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = int(c-'A') + 10
		default:
			return byte(v)
		}
		v = v*16 + d
	}
	return byte(v)
}

// piece returns the rendered text of a valid token id.
func (t *Tokenizer) piece(id int32) []byte {
	return t.pieces[t.pieceOff[id]:t.pieceOff[id+1]:t.pieceOff[id+1]]
}

// TokenToPiece returns the text of token id as llama_token_to_piece
// renders it: SentencePiece "▁" becomes a space, byte tokens their byte,
// GPT-2 characters their bytes. Control and unknown tokens render as their
// text only when special is true (or the token is preserved); user-defined
// tokens always do. The result
// must not be modified.
func (t *Tokenizer) TokenToPiece(id int32, special bool) []byte {
	if id < 0 || int(id) >= len(t.attr) {
		return nil
	}
	if !special && t.attr[id]&(attrUnknown|attrControl) != 0 && t.attr[id]&attrPreserved == 0 {
		return nil
	}
	return t.piece(id)
}

// Detokenize renders ids as llama_detokenize does. removeSpecial drops a
// leading BOS and trailing EOS when the vocabulary adds them; unparseSpecial
// renders control tokens as their text. With a space prefix (SentencePiece)
// the first piece loses one leading space, unless a BOS was removed. BPE
// vocabularies that ask for it get llama.cpp's clean-up of spaces before
// punctuation and contractions.
func (t *Tokenizer) Detokenize(ids []int32, removeSpecial, unparseSpecial bool) string {
	return string(t.AppendDetokenize(nil, ids, removeSpecial, unparseSpecial))
}

// AppendDetokenize is Detokenize appending to dst.
func (t *Tokenizer) AppendDetokenize(dst []byte, ids []int32, removeSpecial, unparseSpecial bool) []byte {
	base := len(dst)
	removeSpace := t.addSpacePrefix
	if removeSpecial && t.addBOS && len(ids) > 0 && ids[0] == t.bos {
		removeSpace = false
		ids = ids[1:]
	}
	if removeSpecial && t.addEOS && len(ids) > 0 && ids[len(ids)-1] == t.eos {
		ids = ids[:len(ids)-1]
	}
	for _, id := range ids {
		p := t.TokenToPiece(id, unparseSpecial)
		if removeSpace && len(p) > 0 && p[0] == ' ' {
			p = p[1:]
		}
		removeSpace = false
		dst = append(dst, p...)
	}
	if t.cleanSpaces {
		dst = append(dst[:base], cleanSpaces(dst[base:])...)
	}
	return dst
}

// cleanSpaces is llama_detokenize's clean_spaces post-processing, done in
// place on text.
func cleanSpaces(text []byte) []byte {
	// First pass: " ?", " !", " .", " ," lose the space.
	total1 := len(text)
	total := min(total1, 1)
	for i := 1; i < total1; i++ {
		x := text[i]
		if text[i-1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') {
			total--
		}
		text[total] = x
		total++
	}
	// Second pass: a single apostrophe between spaces loses both spaces.
	total2 := total
	total = min(total2, 1)
	for i := 1; i < total2; i++ {
		x := text[i]
		if x == '\'' && i+1 < total2 && text[i-1] == ' ' && text[i+1] == ' ' {
			total--
			i++
			text[i] = 0
		}
		text[total] = x
		total++
	}
	// Third pass: " 's", " 'm", " 're", " 've" lose the space.
	total3 := total
	total = min(total3, 1)
	for i := 1; i < total3; i++ {
		x := text[i]
		if text[i-1] == ' ' && x == '\'' && i+1 < total3 {
			x1 := text[i+1]
			if x1 == 's' || x1 == 'm' {
				total--
			} else if x1 != 't' && x1 != 'd' && i+2 < total3 {
				x2 := text[i+2]
				if (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e') {
					total--
				}
			}
		}
		text[total] = x
		total++
	}
	return text[:total]
}

// Decoder turns a stream of token ids into text. It holds back the bytes
// of an incomplete UTF-8 sequence until the tokens completing it arrive, so
// that a character split over byte tokens is never emitted as U+FFFD.
// Pieces are rendered as TokenToPiece(id, Special), without the leading-space
// removal and clean-up of Detokenize. A Decoder is not safe for concurrent
// use.
type Decoder struct {
	t *Tokenizer
	// Special renders control tokens as their text.
	Special bool

	buf     []byte
	pending [utf8.UTFMax]byte
	npend   int
}

// NewDecoder returns a streaming decoder that does not render control
// tokens.
func (t *Tokenizer) NewDecoder() *Decoder {
	return &Decoder{t: t, buf: make([]byte, 0, 64)}
}

// Add feeds one token and returns the text that is now complete. The result
// is valid until the next call to Add, Flush or Reset. In steady state Add
// does not allocate.
func (d *Decoder) Add(id int32) []byte {
	d.buf = append(d.buf[:0], d.pending[:d.npend]...)
	d.buf = append(d.buf, d.t.TokenToPiece(id, d.Special)...)
	cut := completePrefix(d.buf)
	d.npend = copy(d.pending[:], d.buf[cut:])
	return d.buf[:cut]
}

// Flush returns the held-back bytes, if any, and resets the decoder.
func (d *Decoder) Flush() []byte {
	d.buf = append(d.buf[:0], d.pending[:d.npend]...)
	d.npend = 0
	return d.buf
}

// completePrefix returns the length of b without a trailing UTF-8 sequence
// that is valid so far but incomplete.
func completePrefix(b []byte) int {
	n := len(b)
	// Look back over at most three continuation bytes for a lead byte.
	for i := n - 1; i >= 0 && i >= n-utf8.UTFMax+1; i-- {
		c := b[i]
		if c&0xC0 == 0x80 {
			continue // continuation byte
		}
		if c < 0xC0 {
			return n // ASCII: nothing pending
		}
		need := utf8Len(c)
		if c >= 0xF8 {
			return n // never a valid lead
		}
		if n-i >= need {
			return n // complete (or over-long: not ours to fix)
		}
		if !utf8.FullRune(b[i:]) {
			return i // valid prefix of a longer sequence: hold it back
		}
		return n // invalid sequence: pass it through
	}
	return n
}
