package tokenizer

// Pre-tokenizers: the word splitting that llama.cpp's unicode_regex_split
// does before byte-level BPE. llama.cpp runs a list of regexes; each one
// cuts every current segment into its matches and the text between them.
// Two regexes (GPT-2's and Llama 3's) have hand-written matchers in
// llama.cpp; the others go through std::regex on a "collapsed" text (one byte
// per code point standing for its category) or std::wregex on the code
// points with non-ASCII whitespace replaced by U+000B. The scanners here
// reproduce each path, including where they disagree with the original
// Python regexes.

// splitter refines segments of cps: segs holds segment lengths in code
// points and the result replaces it.
type splitter func(p *pretokState, segs []int) []int

// pretokState holds one text's code points and their flags.
type pretokState struct {
	cps   []rune
	flags []uint16
	out   []int // scratch for the next segment list

	// The segment a hand-written matcher (splitHand) is in: it ends at
	// end, the piece being matched starts at prev, and pieces collects the
	// pieces' lengths.
	end, prev int
	pieces    []int
}

// matcher returns the length of the match of a regex at position pos of
// the segment ending at end, or 0 when it does not match there.
type matcher func(p *pretokState, pos, end int) int

// skipper, for matchers that scan ahead, returns how many positions from
// pos are known not to start a match (at least 1).
type skipper func(p *pretokState, pos, end int) int

// regexSplit is std::regex_iterator's splitting: leftmost matches, the text
// between matches kept as its own segment.
func regexSplit(m matcher) splitter { return regexSplitSkip(m, nil) }

// regexSplitSkip is regexSplit with a skipper that keeps scanning linear.
func regexSplitSkip(m matcher, skip skipper) splitter {
	return func(p *pretokState, segs []int) []int {
		out := p.out[:0]
		start := 0
		for _, n := range segs {
			end := start + n
			gap := start
			for pos := start; pos < end; {
				if l := m(p, pos, end); l > 0 {
					if pos > gap {
						out = append(out, pos-gap)
					}
					out = append(out, l)
					pos += l
					gap = pos
				} else if skip != nil {
					pos += skip(p, pos, end)
				} else {
					pos++
				}
			}
			if end > gap {
				out = append(out, end-gap)
			}
			start = end
		}
		p.out = segs[:0]
		return out
	}
}

func (p *pretokState) isWS(pos int) bool   { return p.flags[pos]&flagWhitespace != 0 }
func (p *pretokState) isL(pos int) bool    { return p.flags[pos]&flagLetter != 0 }
func (p *pretokState) isN(pos int) bool    { return p.flags[pos]&flagNumber != 0 }
func (p *pretokState) isP(pos int) bool    { return p.flags[pos]&flagPunctuation != 0 }
func (p *pretokState) isLM(pos int) bool   { return p.flags[pos]&(flagLetter|flagAccentMark) != 0 }
func (p *pretokState) isCRLF(pos int) bool { c := p.cps[pos]; return c == '\r' || c == '\n' }

// wcp is the code point as std::wregex sees it: non-ASCII whitespace
// becomes U+000B.
func (p *pretokState) wcp(pos int) rune {
	c := p.cps[pos]
	if c > 0x7F && p.flags[pos]&flagWhitespace != 0 {
		return 0x0B
	}
	return c
}

// run returns the end of the run of positions from pos satisfying pred.
func run(p *pretokState, pos, end int, pred func(*pretokState, int) bool) int {
	for pos < end && pred(p, pos) {
		pos++
	}
	return pos
}

// optWSRun matches \s?X+ (greedy, with backtracking).
func optWSRun(pred func(*pretokState, int) bool) matcher {
	return func(p *pretokState, pos, end int) int {
		if p.isWS(pos) && pos+1 < end && pred(p, pos+1) {
			return run(p, pos+1, end, pred) - pos
		}
		if pred(p, pos) {
			return run(p, pos, end, pred) - pos
		}
		return 0
	}
}

// plusRun matches X+.
func plusRun(pred func(*pretokState, int) bool) matcher {
	return func(p *pretokState, pos, end int) int {
		return run(p, pos, end, pred) - pos
	}
}

// single matches one code point of a class.
func single(pred func(*pretokState, int) bool) matcher {
	return func(p *pretokState, pos, end int) int {
		if pred(p, pos) {
			return 1
		}
		return 0
	}
}

// wsToEnd matches \s+$.
func wsToEnd(p *pretokState, pos, end int) int {
	if e := run(p, pos, end, (*pretokState).isWS); e == end && e > pos {
		return e - pos
	}
	return 0
}

// wsToEndSkip: inside a whitespace run that stops before the segment end,
// no position matches \s+$.
func wsToEndSkip(p *pretokState, pos, end int) int {
	return max(1, run(p, pos, end, (*pretokState).isWS)-pos)
}

// upTo3Digits matches \p{N}{1,3}.
func upTo3Digits(p *pretokState, pos, end int) int {
	return run(p, pos, min(end, pos+3), (*pretokState).isN) - pos
}

// threeDigits matches [0-9][0-9][0-9].
func threeDigits(p *pretokState, pos, end int) int {
	if pos+3 > end {
		return 0
	}
	for i := pos; i < pos+3; i++ {
		if c := p.cps[i]; c < '0' || c > '9' {
			return 0
		}
	}
	return 3
}

// inRanges reports whether r lies in one of the inclusive ranges.
func inRanges(r rune, ranges [][2]rune) bool {
	for _, rg := range ranges {
		if r >= rg[0] && r <= rg[1] {
			return true
		}
	}
	return false
}

// DeepSeek LLM's letter class, as written in llama.cpp (and DeepSeek's
// tokenizer.json): the cased letters of Unicode.
var dsLetterRanges = [][2]rune{
	{0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA},
	{0x1BC, 0x1BF}, {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377},
	{0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C},
	{0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556},
	{0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF},
	{0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
	{0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B},
	{0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE},
	{0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC},
	{0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113},
	{0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128},
	{0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
	{0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE},
	{0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787},
	{0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A},
	{0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
	{0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
}

// DeepSeek LLM's punctuation class [!-/:-~！-／：-～‘-‟　-。].
var dsPunctRanges = [][2]rune{
	{0x21, 0x2F}, {0x3A, 0x7E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002},
}

// DeepSeek's CJK class [一-龥ࠀ-一가-퟿].
var dsCJKRanges = [][2]rune{{0x4E00, 0x9FA5}, {0x0800, 0x4E00}, {0xAC00, 0xD7FF}}

func dsLetter(p *pretokState, pos int) bool { return inRanges(p.wcp(pos), dsLetterRanges) }
func dsPunct(p *pretokState, pos int) bool  { return inRanges(p.wcp(pos), dsPunctRanges) }
func dsCJK(p *pretokState, pos int) bool    { return inRanges(p.wcp(pos), dsCJKRanges) }

// falconPunct is [\p{P}\$\+<=>\^~\|`] on the collapsed text.
func falconPunct(p *pretokState, pos int) bool {
	switch p.cps[pos] {
	case '$', '+', '<', '=', '>', '^', '~', '|', '`':
		return true
	}
	return p.isP(pos)
}

// defaultPunct is [\p{P}\$\+<=>\^~\|] on the collapsed text.
func defaultPunct(p *pretokState, pos int) bool {
	switch p.cps[pos] {
	case '$', '+', '<', '=', '>', '^', '~', '|':
		return true
	}
	return p.isP(pos)
}

// splitHand runs one of llama.cpp's hand-written matchers over every
// segment: step matches at pos, records the piece with p.add and returns
// where the next match starts.
func splitHand(p *pretokState, segs []int, step func(p *pretokState, pos int) int) []int {
	p.pieces = p.out[:0]
	start := 0
	for _, n := range segs {
		p.end, p.prev = start+n, start
		for pos := start; pos < p.end; {
			pos = step(p, pos)
		}
		start = p.end
	}
	p.out = segs[:0]
	return p.pieces
}

// fl is the flags at pos in splitHand's segment; past its end they are 0,
// as in llama.cpp.
func (p *pretokState) fl(pos int) uint16 {
	if pos < p.end {
		return p.flags[pos]
	}
	return 0
}

// cp is the code point at pos in splitHand's segment, -1 past its end.
func (p *pretokState) cp(pos int) rune {
	if pos < p.end {
		return p.cps[pos]
	}
	return -1
}

// add ends the current piece at e (an empty piece is dropped) and returns
// its length.
func (p *pretokState) add(e int) int {
	l := e - p.prev
	if l > 0 {
		p.pieces = append(p.pieces, l)
	}
	p.prev = e
	return l
}

// runFlag returns the end of the run from pos of code points with a flag in
// mask.
func (p *pretokState) runFlag(pos int, mask uint16) int {
	for p.fl(pos)&mask != 0 {
		pos++
	}
	return pos
}

// runOther returns the end of the run from pos of [^\s\p{L}\p{N}], where a
// code point without flags (and the segment end) stops the run.
func (p *pretokState) runOther(pos int) int {
	for f := p.fl(pos); f&lnw == 0 && f != 0; f = p.fl(pos) {
		pos++
	}
	return pos
}

// wsEnd is where \s+(?!\S)|\s+ ends for the nws whitespace code points at
// pos: before the last one when a non-space follows, else after them all;
// with none it takes the one code point at pos.
func (p *pretokState) wsEnd(pos, nws int) int {
	if nws > 1 && pos+nws < p.end {
		return pos + nws - 1
	}
	if nws > 0 {
		return pos + nws
	}
	return pos + 1
}

// lnw is whitespace, letters and numbers: what [^\s\p{L}\p{N}] excludes.
const lnw = flagWhitespace | flagLetter | flagNumber

// contraction is the length of the English contraction ('s 't 're 've 'm
// 'll 'd) at pos in a segment ending at end, with ASCII case folded when
// fold is set, or 0.
func contraction(p *pretokState, pos, end int, fold bool) int {
	if pos+1 >= end || p.cps[pos] != '\'' {
		return 0
	}
	return contractionAfterQuote(p, pos, end, fold)
}

// contractionAfterQuote is contraction past its cheap test (the quote and
// one more code point), kept apart so that test inlines.
func contractionAfterQuote(p *pretokState, pos, end int, fold bool) int {
	c1 := p.cps[pos+1]
	if fold {
		c1 = asciiLower(c1)
	}
	if c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd' {
		return 2
	}
	if pos+2 < end {
		c2 := p.cps[pos+2]
		if fold {
			c2 = asciiLower(c2)
		}
		if (c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l') {
			return 3
		}
	}
	return 0
}

// splitGPT2 is llama.cpp's hand-written matcher for GPT-2's regex
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitGPT2(p *pretokState, segs []int) []int { return splitHand(p, segs, gpt2Step) }

// gpt2Step is one match of splitGPT2 at pos.
func gpt2Step(p *pretokState, pos int) int {
	if k := contraction(p, pos, p.end, false); k > 0 {
		return pos + p.add(pos+k)
	}
	c, f := p.cps[pos], p.flags[pos]
	from := pos
	if c == ' ' {
		from, f = pos+1, p.fl(pos+1)
	}
	switch {
	case f&flagLetter != 0:
		pos = p.runFlag(from, flagLetter)
	case f&flagNumber != 0:
		pos = p.runFlag(from, flagNumber)
	case f&lnw == 0 && f != 0:
		pos = p.runOther(from)
	default:
		nws := 0
		for p.fl(pos+nws)&flagWhitespace != 0 {
			nws++
		}
		pos = p.wsEnd(pos, nws)
	}
	p.add(pos)
	return pos
}

// splitLlama3 is llama.cpp's hand-written matcher for Llama 3's regex
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// including its quirk of testing the current code point's flags, not the
// next one's, before " ?[^\s\p{L}\p{N}]+".
func splitLlama3(p *pretokState, segs []int) []int { return splitHand(p, segs, llama3Step) }

// llama3Step is one match of splitLlama3 at pos.
func llama3Step(p *pretokState, pos int) int {
	if k := contraction(p, pos, p.end, true); k > 0 {
		return pos + p.add(pos+k)
	}
	c, f := p.cps[pos], p.flags[pos]
	if !(c == '\r' || c == '\n' || f&flagNumber != 0) && (f&flagLetter != 0 || p.fl(pos+1)&flagLetter != 0) {
		pos = p.runFlag(pos+1, flagLetter)
		p.add(pos)
		return pos
	}
	if f&flagNumber != 0 {
		i0 := pos
		for p.fl(pos)&flagNumber != 0 {
			pos++
			if pos-i0 >= 3 {
				p.add(pos)
				i0 = pos
			}
		}
		p.add(pos)
		return pos
	}
	f2 := f
	if c == ' ' {
		f2 = p.fl(pos + 1)
	}
	if f2&lnw == 0 && f != 0 {
		if c == ' ' {
			pos++
		}
		pos = p.runOther(pos)
		for c2 := p.cp(pos); c2 == '\r' || c2 == '\n'; c2 = p.cp(pos) {
			pos++
		}
		p.add(pos)
		return pos
	}
	nws, lastNL := 0, 0
	for p.fl(pos+nws)&flagWhitespace != 0 {
		if c2 := p.cp(pos + nws); c2 == '\r' || c2 == '\n' {
			lastNL = pos + nws + 1
		}
		nws++
	}
	if lastNL > 0 {
		pos = lastNL
	} else {
		pos = p.wsEnd(pos, nws)
	}
	p.add(pos)
	return pos
}

// isOther is [^\s\p{L}\p{N}] on the collapsed text.
func isOther(p *pretokState, pos int) bool { return p.flags[pos]&lnw == 0 }

// isOtherM is [^\s\p{L}\p{M}\p{N}] on the collapsed text.
func isOtherM(p *pretokState, pos int) bool { return p.flags[pos]&(lnw|flagAccentMark) == 0 }

// isSlashOrCRLF is [\r\n/].
func isSlashOrCRLF(p *pretokState, pos int) bool {
	c := p.cps[pos]
	return c == '\r' || c == '\n' || c == '/'
}

// otherOrSpaces is the tail the std::regex matchers share,
//
//	[ ]?O+T*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// with O the class other and T the class tail, at pos in the segment ending
// at end; it returns the match length, 0 for none.
func otherOrSpaces(p *pretokState, pos, end int, other, tail func(*pretokState, int) bool) int {
	e := -1
	if p.cps[pos] == ' ' && pos+1 < end && other(p, pos+1) {
		e = run(p, pos+1, end, other)
	} else if other(p, pos) {
		e = run(p, pos, end, other)
	}
	if e >= 0 {
		return run(p, e, end, tail) - pos
	}
	ws := run(p, pos, end, (*pretokState).isWS)
	if ws == pos {
		return 0
	}
	for i := ws - 1; i >= pos; i-- {
		if p.isCRLF(i) {
			return i + 1 - pos
		}
	}
	if ws == end {
		return ws - pos
	}
	if ws-pos > 1 {
		return ws - 1 - pos
	}
	return ws - pos
}

// notCRLFLN is [^\r\n\p{L}\p{N}], the optional lead of a letter run.
func notCRLFLN(p *pretokState, pos int) bool {
	c := p.cps[pos]
	return c != '\r' && c != '\n' && !p.isL(pos) && !p.isN(pos)
}

// qwenMatcher is std::regex on the collapsed text for Qwen2's regex
//
//	(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// and, with marks set, Qwen3.5's, where \p{L}+ becomes [\p{L}\p{M}]+ and the
// "other" class also excludes \p{M}.
//
// With digits set, \p{N} becomes \p{N}+ (MiniCPM5).
func qwenMatcher(marks, digits bool) matcher {
	word, other := (*pretokState).isL, isOther
	if marks {
		word, other = (*pretokState).isLM, isOtherM
	}
	return func(p *pretokState, pos, end int) int {
		if k := contraction(p, pos, end, true); k > 0 {
			return k
		}
		// [^\r\n\p{L}\p{N}]?\p{L}+
		if notCRLFLN(p, pos) && pos+1 < end && word(p, pos+1) {
			return run(p, pos+1, end, word) - pos
		}
		if word(p, pos) {
			return run(p, pos, end, word) - pos
		}
		// \p{N} or \p{N}+
		if p.isN(pos) {
			if digits {
				return run(p, pos, end, (*pretokState).isN) - pos
			}
			return 1
		}
		return otherOrSpaces(p, pos, end, other, (*pretokState).isCRLF)
	}
}

// isU is "a letter, not a-z" on the collapsed text.
func isU(p *pretokState, pos int) bool { c := p.cps[pos]; return p.isL(pos) && (c < 'a' || c > 'z') }

// isW is "a letter, not A-Z" on the collapsed text.
func isW(p *pretokState, pos int) bool { c := p.cps[pos]; return p.isL(pos) && (c < 'A' || c > 'Z') }

// caseLetters tries both letter alternatives of caseMatcher from s, each
// followed by an optional contraction when gpt4o is set; it returns the
// match end or -1.
func caseLetters(p *pretokState, s, end int, gpt4o bool) int {
	K := run(p, s, end, isU) - s // U* / U+ greedy
	e := -1
	// Alternative 1: U* W+, backtracking U* until W+ can start.
	for k := K; k >= 0; k-- {
		if s+k < end && isW(p, s+k) {
			e = run(p, s+k, end, isW)
			break
		}
	}
	// Alternative 2: U+ W*.
	if e < 0 && K > 0 {
		e = run(p, s+K, end, isW)
	}
	if e >= 0 && gpt4o {
		e += contraction(p, e, end, true)
	}
	return e
}

// caseMatcher is std::regex on the collapsed text for the case-splitting
// regexes of Tekken (Mistral)
//
//	[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// and, with gpt4o set, GPT-4o/Llama 4, which append an optional English
// contraction to both letter alternatives and take \p{N}{1,3}. On the
// collapsed text every non-ASCII letter is both "not a-z" (U) and "not A-Z"
// (W), which the backtracking in caseLetters follows.
func caseMatcher(gpt4o bool) matcher {
	return func(p *pretokState, pos, end int) int {
		// [^\r\n\p{L}\p{N}]? is tried first, then without it; without it
		// a non-letter cannot start a letter run, so one try suffices.
		s := -1
		if notCRLFLN(p, pos) {
			if pos+1 < end {
				s = pos + 1
			}
		} else if p.isL(pos) {
			s = pos
		}
		if s >= 0 {
			if e := caseLetters(p, s, end, gpt4o); e >= 0 {
				return e - pos
			}
		}
		if p.isN(pos) {
			if gpt4o {
				return upTo3Digits(p, pos, end)
			}
			return 1
		}
		return otherOrSpaces(p, pos, end, isOther, isSlashOrCRLF)
	}
}

// preConfig is what llama.cpp derives from tokenizer.ggml.pre for BPE vocabs.
type preConfig struct {
	splitters    []splitter
	cleanSpaces  bool
	ignoreMerges bool
	addBOS       bool // default of add_bos before tokenizer.ggml.add_bos_token
}

var (
	gpt2Splitters    = []splitter{splitGPT2}
	llama3Splitters  = []splitter{splitLlama3}
	qwen2Splitters   = []splitter{regexSplit(qwenMatcher(false, false))}
	qwen35Splitters  = []splitter{regexSplit(qwenMatcher(true, false))}
	tekkenSplitters  = []splitter{regexSplit(caseMatcher(false))}
	gpt4oSplitters   = []splitter{regexSplit(caseMatcher(true))}
	minicpm5Splits   = []splitter{regexSplit(upTo3Digits), regexSplit(qwenMatcher(false, true))}
	starcoderSplits  = []splitter{regexSplit(single((*pretokState).isN)), splitGPT2}
	defaultSplitters = []splitter{
		regexSplit(plusRun(defaultPunct)), splitGPT2,
		regexSplit(plusRun((*pretokState).isN)), regexSplit(threeDigits),
	}
	falconSplitters = []splitter{regexSplit(plusRun(falconPunct)), splitGPT2, regexSplit(threeDigits)}
	dsLLMSplitters  = []splitter{
		regexSplit(single((*pretokState).isCRLF)),
		regexSplit(optWSRun(dsLetter)),
		regexSplit(optWSRun(dsPunct)),
		regexSplitSkip(wsToEnd, wsToEndSkip),
		regexSplit(plusRun(dsCJK)),
		regexSplit(plusRun((*pretokState).isN)),
	}
	dsCoderSplitters = []splitter{
		regexSplit(single((*pretokState).isCRLF)),
		regexSplit(optWSRun((*pretokState).isL)),
		regexSplit(optWSRun((*pretokState).isP)),
		regexSplit(plusRun(dsCJK)),
		regexSplit(single((*pretokState).isN)),
	}
)

// lookupPre maps tokenizer.ggml.pre to llama.cpp's pre-tokenizer settings.
// Only pre-tokenizers whose regexes are implemented here are accepted.
func lookupPre(pre string) (preConfig, bool) {
	switch pre {
	case "", "default":
		return preConfig{splitters: defaultSplitters, cleanSpaces: true}, true
	case "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano":
		return preConfig{splitters: llama3Splitters, cleanSpaces: true, ignoreMerges: true, addBOS: true}, true
	case "dbrx", "smaug-bpe":
		return preConfig{splitters: llama3Splitters, cleanSpaces: true}, true
	case "deepseek-llm":
		return preConfig{splitters: dsLLMSplitters}, true
	case "deepseek-coder":
		return preConfig{splitters: dsCoderSplitters}, true
	case "falcon":
		return preConfig{splitters: falconSplitters, cleanSpaces: true}, true
	case "mpt", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
		"a.x-4.0", "mellum", "modern-bert", "olmo", "exaone4":
		return preConfig{splitters: gpt2Splitters, cleanSpaces: true}, true
	case "starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2":
		return preConfig{splitters: starcoderSplits, cleanSpaces: true}, true
	case "command-r", "smollm":
		return preConfig{splitters: starcoderSplits}, true
	case "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2":
		return preConfig{splitters: qwen2Splitters}, true
	case "megrez", "stablelm2":
		return preConfig{splitters: qwen2Splitters, cleanSpaces: true}, true
	case "tekken":
		return preConfig{splitters: tekkenSplitters, ignoreMerges: true, addBOS: true}, true
	case "gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2":
		return preConfig{splitters: gpt4oSplitters}, true
	case "minicpm5":
		return preConfig{splitters: minicpm5Splits, cleanSpaces: true, ignoreMerges: true}, true
	case "qwen35":
		return preConfig{splitters: qwen35Splitters}, true
	}
	return preConfig{}, false
}
