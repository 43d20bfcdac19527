package sample

import (
	"math"
	"math/bits"
	"slices"
)

const (
	// heapMaxK is the largest top-k selected with a heap during one scan of
	// the logits (if also at most a quarter of the vocabulary); larger k use
	// quickselect.
	heapMaxK = 4096
	// The top-p pre-cut sorts tokens into buckets by how far their logit is
	// below the maximum: bucketsPerNat buckets per unit of logit, the last
	// bucket holding everything further than nBuckets/bucketsPerNat below.
	nBuckets      = 4096
	bucketsPerNat = 128
)

// filter applies top-k, top-p and min-p, in llama.cpp's order, to the
// penalized logits. It returns the survivors in s.buf, sorted by rank (logit
// descending, id ascending), with the logit in P.
func (s *Sampler) filter(logits []float32) []Candidate {
	n := len(logits)
	if k := s.p.TopK; k > 0 && k < n {
		var c []Candidate
		if k <= heapMaxK && k <= n/4 {
			c = s.topKHeap(logits, k)
		} else {
			c = s.fillAll(logits)
			selectTop(c, k)
			c = c[:k]
		}
		sortRank(c)
		return minP(topP(c, s.p.TopP), s.p.MinP)
	}
	c := s.fillAll(logits)
	if s.p.TopP < 1 {
		if kept, ok := s.nucleus(c); ok {
			return kept
		}
		// The bucket pre-cut fell short by rounding: do it the slow way.
		sortRank(c)
		return minP(topP(c, s.p.TopP), s.p.MinP)
	}
	if s.p.MinP > 0 {
		c = minPUnsorted(c, s.p.MinP)
	}
	sortRank(c)
	return c
}

// fillAll puts every token with its penalized logit into s.buf.
func (s *Sampler) fillAll(logits []float32) []Candidate {
	c := s.buf[:len(logits)]
	for i, v := range logits {
		c[i] = Candidate{ID: int32(i), P: clean(v)}
	}
	for _, id := range s.touched { // ids below len(logits), see countHistory
		c[id].P = s.logit(logits, int(id))
	}
	return c
}

// topKHeap selects the k best tokens in one pass over logits with a heap
// whose root is the worst token kept. Tokens in the penalty window are
// skipped during the pass and offered afterwards with their penalized logit,
// so the pass itself touches counts only for tokens that beat the root.
func (s *Sampler) topKHeap(logits []float32, k int) []Candidate {
	h := s.buf[:0]
	root := float32(math.Inf(-1)) // logit of the root once the heap is full
	for i, v := range logits {
		// Ids grow during the pass, so a tie with the root loses.
		if len(h) == k && !(v > root) {
			continue
		}
		if s.penalize && s.counts[i] != 0 {
			continue
		}
		h = offer(h, k, Candidate{ID: int32(i), P: clean(v)})
		if len(h) == k {
			root = h[0].P
		}
	}
	for _, id := range s.touched {
		h = offer(h, k, Candidate{ID: id, P: s.logit(logits, int(id))})
	}
	return h
}

// above reports whether a ranks before b: higher logit, or lower id on ties.
func above(a, b Candidate) bool {
	return a.P > b.P || (a.P == b.P && a.ID < b.ID)
}

func cmpRank(a, b Candidate) int {
	switch {
	case a.P > b.P:
		return -1
	case a.P < b.P:
		return 1
	case a.ID < b.ID:
		return -1
	case a.ID > b.ID:
		return 1
	}
	return 0
}

func sortRank(c []Candidate) { slices.SortFunc(c, cmpRank) }

// offer adds x to the heap h of at most k entries, evicting the worst entry
// (the root) if h is full and x ranks above it.
func offer(h []Candidate, k int, x Candidate) []Candidate {
	if len(h) < k {
		h = append(h, x)
		for i := len(h) - 1; i > 0; {
			parent := (i - 1) / 2
			if !above(h[parent], h[i]) {
				break
			}
			h[parent], h[i] = h[i], h[parent]
			i = parent
		}
		return h
	}
	if !above(x, h[0]) {
		return h
	}
	h[0] = x
	for i := 0; ; {
		worst, l := i, 2*i+1
		if l < len(h) && above(h[worst], h[l]) {
			worst = l
		}
		if r := l + 1; r < len(h) && above(h[worst], h[r]) {
			worst = r
		}
		if worst == i {
			break
		}
		h[i], h[worst] = h[worst], h[i]
		i = worst
	}
	return h
}

// selectTop reorders c so that c[:k] holds its k best-ranked entries, in no
// particular order (quickselect; sorts the rest of a range that partitions
// badly).
func selectTop(c []Candidate, k int) {
	lo, hi := 0, len(c)
	budget := 2*bits.Len(uint(len(c))) + 4
	for hi-lo > 16 {
		if budget == 0 {
			break
		}
		budget--
		pivot := median3(c[lo], c[lo+(hi-lo)/2], c[hi-1])
		i, j := lo, hi-1
		for i <= j {
			for above(c[i], pivot) {
				i++
			}
			for above(pivot, c[j]) {
				j--
			}
			if i <= j {
				c[i], c[j] = c[j], c[i]
				i++
				j--
			}
		}
		// c[lo:j+1] ranks at or above the pivot, c[i:hi] at or below it.
		switch {
		case k <= j:
			hi = j + 1
		case k > i:
			lo = i
		default:
			return
		}
	}
	sortRank(c[lo:hi])
}

func median3(a, b, c Candidate) Candidate {
	if above(b, a) {
		a, b = b, a
	}
	// now a ranks above b
	if above(c, a) {
		return a
	}
	if above(c, b) {
		return c
	}
	return b
}

// topP keeps the shortest prefix of the rank-sorted c whose softmax mass
// reaches p, as llama.cpp's top-p sampler does.
func topP(c []Candidate, p float32) []Candidate {
	if p >= 1 || len(c) == 0 {
		return c
	}
	max := float64(c[0].P)
	if math.IsInf(max, -1) {
		return c // all impossible: nothing to rank
	}
	var sum float64
	for _, x := range c {
		sum += math.Exp(float64(x.P) - max)
	}
	target := float64(p) * sum
	var cum float64
	for i, x := range c {
		cum += math.Exp(float64(x.P) - max)
		if cum >= target {
			return c[:i+1]
		}
	}
	return c
}

// minPThreshold is the smallest logit min-p keeps, computed in float32 as
// llama.cpp does: max + log(p).
func minPThreshold(max, p float32) float32 {
	return max + float32(math.Log(float64(p)))
}

// minP keeps the tokens of the rank-sorted c whose probability is at least p
// times that of the first.
func minP(c []Candidate, p float32) []Candidate {
	if p <= 0 || len(c) == 0 {
		return c
	}
	thr := minPThreshold(c[0].P, p)
	i := 1 // the first always stays
	for i < len(c) && c[i].P >= thr {
		i++
	}
	return c[:i]
}

// minPUnsorted is minP for an unsorted c: it keeps the order of survivors.
func minPUnsorted(c []Candidate, p float32) []Candidate {
	if len(c) == 0 {
		return c
	}
	max := c[0].P
	for _, x := range c[1:] {
		if x.P > max {
			max = x.P
		}
	}
	thr := minPThreshold(max, p)
	kept := c[:0]
	for _, x := range c {
		if x.P >= thr {
			kept = append(kept, x)
		}
	}
	return kept
}

// bucket maps d = max - logit >= 0 to its pre-cut bucket.
func bucket(d float64) int {
	if !(d < nBuckets/bucketsPerNat) {
		return nBuckets - 1
	}
	return int(d * bucketsPerNat)
}

// nucleus applies top-p, then min-p, to all tokens in c (unsorted) without
// sorting the whole vocabulary. A histogram of probability mass over logit
// buckets finds the bucket where the cumulative mass reaches top-p. The
// tokens up to that bucket that min-p keeps (min-p cuts a prefix of the same
// order) are distributed into s.tmp bucket by bucket (a counting sort), each
// bucket is sorted on its own, and the result is walked exactly as topP does.
// c is not modified. It reports false if rounding made the histogram cut too
// early; the caller then sorts everything.
func (s *Sampler) nucleus(c []Candidate) ([]Candidate, bool) {
	max := c[0].P
	for _, x := range c[1:] {
		if x.P > max {
			max = x.P
		}
	}
	if math.IsInf(float64(max), -1) {
		return nil, false
	}
	minThr := float32(math.Inf(-1))
	if s.p.MinP > 0 {
		minThr = minPThreshold(max, s.p.MinP)
	}
	mx := float64(max)
	clear(s.mass[:])
	var sum float64
	for _, x := range c {
		e := math.Exp(float64(x.P) - mx)
		sum += e
		s.mass[bucket(mx-float64(x.P))] += e
	}
	target := float64(s.p.TopP) * sum
	cut := nBuckets - 1
	var cum float64
	for b, m := range s.mass {
		cum += m
		if cum >= target {
			cut = b
			break
		}
	}

	// Count, then place, the tokens kept by the cut and by min-p.
	start := s.start[:cut+2]
	clear(start)
	lostAboveMin := false // a token min-p would keep was cut by bucket
	for _, x := range c {
		if b := bucket(mx - float64(x.P)); b > cut {
			lostAboveMin = lostAboveMin || x.P >= minThr
		} else if x.P >= minThr {
			start[b+1]++
		}
	}
	for b := 1; b < len(start); b++ {
		start[b] += start[b-1]
	}
	kept := s.tmp[:start[cut+1]]
	next := s.next[:cut+1]
	copy(next, start)
	for _, x := range c {
		if b := bucket(mx - float64(x.P)); b <= cut && x.P >= minThr {
			kept[next[b]] = x
			next[b]++
		}
	}

	// Sort each bucket and walk the cumulative mass.
	cum = 0
	for b := 0; b <= cut; b++ {
		part := kept[start[b]:start[b+1]]
		sortRank(part)
		for i, x := range part {
			cum += math.Exp(float64(x.P) - mx)
			if cum >= target {
				return kept[:int(start[b])+i+1], true
			}
		}
	}
	// Not reached: either min-p cut a shorter prefix (then kept is the
	// answer) or rounding cut the histogram too early.
	return kept, !lostAboveMin
}
