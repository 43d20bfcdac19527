package tokenizer

import "unicode"

// Code point classification as llama.cpp's unicode.cpp sees it. llama.cpp
// generates its table from Python's regex module (Unicode 15.1); Go's
// unicode package is Unicode 15.0, so the few 15.1 additions are patched in.

// Code point flags, bit for bit as llama.cpp's unicode_cpt_flags.
const (
	flagUndefined   uint16 = 0x0001
	flagNumber      uint16 = 0x0002 // \p{N}
	flagLetter      uint16 = 0x0004 // \p{L}
	flagSeparator   uint16 = 0x0008 // \p{Z}
	flagAccentMark  uint16 = 0x0010 // \p{M}
	flagPunctuation uint16 = 0x0020 // \p{P}
	flagSymbol      uint16 = 0x0040 // \p{S}
	flagControl     uint16 = 0x0080 // \p{C} (without Cn, which is "undefined")
	flagWhitespace  uint16 = 0x0100 // \s
)

// asciiFlags holds the flags of the first 128 code points.
var asciiFlags = func() (t [128]uint16) {
	for r := rune(0); r < 128; r++ {
		t[r] = computeFlags(r)
	}
	return t
}()

// cptFlags returns llama.cpp's flags of code point r. Code points past
// U+10FFFF (possible from llama.cpp's lenient UTF-8 decoder) are undefined.
func cptFlags(r rune) uint16 {
	if r >= 0 && r < 128 {
		return asciiFlags[r]
	}
	return computeFlags(r)
}

func computeFlags(r rune) uint16 {
	if r < 0 || r > unicode.MaxRune {
		return flagUndefined
	}
	var f uint16
	switch {
	case r >= 0x2EBF0 && r <= 0x2EE5D: // CJK Extension I (Unicode 15.1)
		f = flagLetter
	case r >= 0x2FFC && r <= 0x2FFF, r == 0x31EF: // Unicode 15.1 symbols
		f = flagSymbol
	case unicode.IsLetter(r):
		f = flagLetter
	case unicode.IsNumber(r):
		f = flagNumber
	case unicode.IsMark(r):
		f = flagAccentMark
	case unicode.IsPunct(r):
		f = flagPunctuation
	case unicode.IsSymbol(r):
		f = flagSymbol
	case unicode.Is(unicode.Z, r):
		f = flagSeparator
	case unicode.Is(unicode.C, r):
		f = flagControl
	default:
		f = flagUndefined
	}
	if isWhitespace(r) {
		f |= flagWhitespace
	}
	return f
}

// isWhitespace is the Unicode White_Space property, llama.cpp's "\s".
func isWhitespace(r rune) bool {
	switch {
	case r >= 0x09 && r <= 0x0D, r == 0x20, r == 0x85, r == 0xA0, r == 0x1680:
		return true
	case r >= 0x2000 && r <= 0x200A:
		return true
	case r == 0x2028, r == 0x2029, r == 0x202F, r == 0x205F, r == 0x3000:
		return true
	}
	return false
}

// utf8Len is llama.cpp's unicode_len_utf8: the sequence length announced by
// a lead byte, 1 for continuation bytes.
func utf8Len(b byte) int {
	switch b >> 4 {
	case 0xC, 0xD:
		return 2
	case 0xE:
		return 3
	case 0xF:
		return 4
	}
	return 1
}

const runeError = 0xFFFD

// decodeCpts appends the code points of s to dst the way llama.cpp's
// unicode_cpts_from_utf8 does: no check for overlong forms or surrogates,
// and each byte that does not start a complete sequence becomes U+FFFD.
func decodeCpts(dst []rune, s string) []rune {
	n := len(s)
	for i := 0; i < n; {
		b0 := s[i]
		switch {
		case b0 < 0x80:
			dst = append(dst, rune(b0))
			i++
			continue
		case b0&0x40 == 0:
		case b0&0x20 == 0:
			if i+1 < n && s[i+1]&0xC0 == 0x80 {
				dst = append(dst, rune(b0&0x1F)<<6|rune(s[i+1]&0x3F))
				i += 2
				continue
			}
		case b0&0x10 == 0:
			if i+2 < n && s[i+1]&0xC0 == 0x80 && s[i+2]&0xC0 == 0x80 {
				dst = append(dst, rune(b0&0x0F)<<12|rune(s[i+1]&0x3F)<<6|rune(s[i+2]&0x3F))
				i += 3
				continue
			}
		case b0&0x08 == 0:
			if i+3 < n && s[i+1]&0xC0 == 0x80 && s[i+2]&0xC0 == 0x80 && s[i+3]&0xC0 == 0x80 {
				dst = append(dst, rune(b0&0x07)<<18|rune(s[i+1]&0x3F)<<12|rune(s[i+2]&0x3F)<<6|rune(s[i+3]&0x3F))
				i += 4
				continue
			}
		}
		dst = append(dst, runeError)
		i++
	}
	return dst
}

// appendCpt appends the UTF-8 form of r as llama.cpp's unicode_cpt_to_utf8
// writes it (surrogates included). llama.cpp throws on code points past
// U+10FFFF; they are written as U+FFFD here.
func appendCpt(dst []byte, r rune) []byte {
	switch {
	case r >= 0 && r <= 0x7F:
		return append(dst, byte(r))
	case r >= 0x80 && r <= 0x7FF:
		return append(dst, 0xC0|byte(r>>6), 0x80|byte(r)&0x3F)
	case r >= 0x800 && r <= 0xFFFF:
		return append(dst, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
	case r >= 0x10000 && r <= 0x10FFFF:
		return append(dst, 0xF0|byte(r>>18), 0x80|byte(r>>12)&0x3F, 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
	}
	return append(dst, 0xEF, 0xBF, 0xBD)
}

// asciiLower lowers ASCII letters; llama.cpp's unicode_tolower only matters
// here for the ASCII letters of English contractions.
func asciiLower(r rune) rune {
	if r >= 'A' && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}

// byteToRune is GPT-2's byte-to-unicode table: printable Latin-1 bytes map
// to themselves, the others to U+0100 onwards in byte order.
var byteToRune = func() (t [256]rune) {
	n := rune(0)
	for b := 0; b < 256; b++ {
		if (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			t[b] = rune(b)
		} else {
			t[b] = 256 + n
			n++
		}
	}
	return t
}()

// byteEncoded holds the UTF-8 text of byteToRune for every byte.
var byteEncoded = func() (t [256]string) {
	for b := 0; b < 256; b++ {
		t[b] = string(byteToRune[b])
	}
	return t
}()

// runeToByte inverts byteToRune; ok is false for runes that no byte maps to.
func runeToByte(r rune) (byte, bool) {
	switch {
	case (r >= 0x21 && r <= 0x7E) || (r >= 0xA1 && r <= 0xAC) || (r >= 0xAE && r <= 0xFF):
		return byte(r), true
	case r >= 256 && r < 256+68:
		return byte(runeToByteHigh[r-256]), true
	}
	return 0, false
}

// runeToByteHigh maps U+0100+i back to the byte that byteToRune sends there.
var runeToByteHigh = func() (t [68]uint8) {
	for b := 0; b < 256; b++ {
		if r := byteToRune[b]; r >= 256 {
			t[r-256] = uint8(b)
		}
	}
	return t
}()
