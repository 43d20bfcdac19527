// Package spec holds geist's speculative decoding drafters and the
// controller that decides how many drafted tokens are worth verifying:
// prompt lookup and n-gram statistics (from the token history and from
// earlier generations), a draft model (ModelDraft), and the target itself
// with blocks skipped (SelfDraft) with the search that chooses the blocks
// (SearchSkip, Tuner). The engine keeps generation and verification: it
// feeds a drafted tree through the target and walks it.
//
// A drafter is a deterministic function of what it is given: the output of
// speculative decoding stays exactly that of plain decoding whatever the
// drafts are, because the target model checks every drafted token.
package spec

// Drafter proposes up to max tokens to follow history. It appends them to
// dst[:0] and returns the draft with a confidence class (drafters with
// several qualities of draft report which one, so acceptance is tracked
// separately per class). A nil or empty draft means no proposal.
type Drafter interface {
	Name() string
	Draft(history []int32, max int, dst []int32) (draft []int32, class int)
}

// TreeDrafter is a Drafter that proposes several continuations at once:
// DraftTree adds continuations of history, at most depth tokens deep, to
// t as drafter d (the index of its row in the controller's tables),
// branching where its candidates disagree (up to t.Width ways).
type TreeDrafter interface {
	Drafter
	DraftTree(history []int32, depth int, t *Tree, d int)
}

// maxCandidates bounds how many earlier occurrences of the current suffix
// Lookup weighs against each other.
const maxCandidates = 8

// Lookup is prompt-lookup drafting: it finds the longest recent match of the
// last n tokens (n from NgramMax down to NgramMin) in the history and
// proposes what followed. Among several matches it follows, token by token,
// the continuation that most of the matches agree on, the most recent one
// breaking ties. The draft class is the match length n.
type Lookup struct {
	NgramMin, NgramMax int
	cand               [maxCandidates]int // start of each candidate's continuation
	alive              [maxCandidates]bool
	buf                [MaxTree]int32
}

// NewLookup returns a prompt-lookup drafter for n-grams of nmin..nmax tokens.
func NewLookup(nmin, nmax int) *Lookup {
	nmin = max(nmin, 1)
	nmax = max(nmax, nmin)
	return &Lookup{NgramMin: nmin, NgramMax: nmax}
}

// Name implements Drafter.
func (l *Lookup) Name() string { return "lookup" }

// Draft implements Drafter. It allocates nothing when dst has room.
func (l *Lookup) Draft(history []int32, max int, dst []int32) ([]int32, int) {
	dst = dst[:0]
	L := len(history)
	if max <= 0 {
		return dst, 0
	}
	for n := min(l.NgramMax, L-1); n >= l.NgramMin; n-- {
		nc := l.matches(history, n)
		if nc == 0 {
			continue
		}
		return l.follow(history, nc, max, dst), n
	}
	return dst, 0
}

// matches collects up to maxCandidates earlier occurrences of the last n
// tokens, most recent first, and returns how many it found.
func (l *Lookup) matches(h []int32, n int) int {
	L := len(h)
	suffix := h[L-n:]
	last := suffix[n-1]
	nc := 0
	// An occurrence ending at e (exclusive) must leave a token after it
	// inside the history: e < L.
	for e := L - 1; e >= n && nc < maxCandidates; e-- {
		if h[e-1] != last {
			continue
		}
		match := true
		for j := 0; j < n-1; j++ {
			if h[e-n+j] != suffix[j] {
				match = false
				break
			}
		}
		if match {
			l.cand[nc] = e
			l.alive[nc] = true
			nc++
		}
	}
	return nc
}

// follow extends the draft token by token with the next token most live
// candidates agree on (the most recent candidate wins ties); candidates
// that disagree drop out.
func (l *Lookup) follow(h []int32, nc, max int, dst []int32) []int32 {
	L := len(h)
	for step := 0; len(dst) < max; step++ {
		best, bestVotes := int32(-1), 0
		for i := 0; i < nc; i++ {
			if !l.alive[i] || l.cand[i]+step >= L {
				continue
			}
			tok := h[l.cand[i]+step]
			votes := 0
			for j := 0; j < nc; j++ {
				if l.alive[j] && l.cand[j]+step < L && h[l.cand[j]+step] == tok {
					votes++
				}
			}
			if votes > bestVotes {
				best, bestVotes = tok, votes
			}
		}
		if best < 0 {
			break
		}
		dst = append(dst, best)
		for i := 0; i < nc; i++ {
			if l.alive[i] && (l.cand[i]+step >= L || h[l.cand[i]+step] != best) {
				l.alive[i] = false
			}
		}
	}
	return dst
}

// DraftTree implements TreeDrafter. The trie holds the continuations of
// every match of the longest matching suffix: the majority continuation
// (what Draft proposes) first, every other one branching off where it
// departs from the tokens before it. With room for branches, matches of
// shorter suffixes whose continuations start differently add roots of
// their own. A node's class is the length of the match that proposed it.
// It allocates nothing.
func (l *Lookup) DraftTree(history []int32, depth int, t *Tree, d int) {
	L := len(history)
	depth = min(depth, len(l.buf))
	if depth <= 0 {
		return
	}
	longest := 0
	for n := min(l.NgramMax, L-1); n >= l.NgramMin && !t.Full(); n-- {
		nc := l.matches(history, n)
		if nc == 0 {
			continue
		}
		if longest == 0 {
			longest = n
			t.AddChain(-1, l.follow(history, nc, depth, l.buf[:0]), d, n)
			if t.Width == 1 {
				return
			}
		}
		for i := 0; i < nc; i++ {
			cont := history[l.cand[i]:min(l.cand[i]+depth, L)]
			if n < longest && t.Child(-1, cont[0]) >= 0 {
				continue // a shorter match adds only roots the longer ones lack
			}
			t.AddChain(-1, cont, d, n)
		}
	}
}
