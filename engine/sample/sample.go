// Package sample turns logits into tokens the way llama.cpp's default sampler
// chain does: repetition penalties, top-k, top-p, min-p, temperature, then a
// draw from the softmax. Randomness comes from a PCG generator seeded by the
// caller, so a seed fixes the output.
//
// Besides plain sampling, a Sampler exposes the final distribution and draws
// from it, which exact speculative sampling needs: Sample(l, h) picks the same
// token as Draw(Distribution(l, h)) from the same generator state.
//
// A Sampler preallocates every buffer in New and allocates nothing per call.
// It is not safe for concurrent use.
package sample

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// Params configures a Sampler. The zero value is not useful; start from
// DefaultParams.
type Params struct {
	// Temperature divides the logits before the final softmax. 0 means
	// greedy decoding: the token with the highest (penalized) logit, the
	// lowest id on ties; top-k, top-p and min-p are then irrelevant and no
	// randomness is consumed. Negative values are rejected.
	Temperature float32
	// TopK keeps the K highest logits; <= 0 disables it.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// (softmax of the logits before temperature) reaches TopP; 1 disables it.
	// Must be in (0, 1].
	TopP float32
	// MinP keeps tokens whose probability is at least MinP times the
	// probability of the most likely one; <= 0 disables it. Must be <= 1.
	MinP float32
	// RepeatPenalty divides positive logits and multiplies non-positive
	// logits of tokens seen in the last RepeatLastN tokens of the history;
	// 1 disables it. Must be > 0.
	RepeatPenalty float32
	// RepeatLastN is the window of history the penalties look at: 0 disables
	// the penalties, -1 means the whole history.
	RepeatLastN int
	// PresencePenalty is subtracted from the logit of every token seen in
	// the window; FrequencyPenalty is subtracted once per occurrence.
	PresencePenalty, FrequencyPenalty float32
	// Seed seeds the random generator.
	Seed uint64
}

// DefaultParams returns llama.cpp's defaults: temperature 0.8, top-k 40,
// top-p 0.95, min-p 0.05, repeat penalty 1 (off) over the last 64 tokens,
// no presence or frequency penalty, seed 0.
func DefaultParams() Params {
	return Params{
		Temperature:   0.8,
		TopK:          40,
		TopP:          0.95,
		MinP:          0.05,
		RepeatPenalty: 1,
		RepeatLastN:   64,
	}
}

// Candidate is one token of a distribution and its probability.
type Candidate struct {
	ID int32
	P  float32
}

// ErrParams is wrapped by every error New returns for invalid parameters.
var ErrParams = errors.New("sample: invalid parameters")

// Validate reports whether p is usable, naming the first bad field.
func (p Params) Validate() error {
	finite := func(v float32) bool { return !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) }
	switch {
	case !finite(p.Temperature) || p.Temperature < 0:
		return fmt.Errorf("%w: temperature %v must be finite and >= 0", ErrParams, p.Temperature)
	case !finite(p.TopP) || p.TopP <= 0 || p.TopP > 1:
		return fmt.Errorf("%w: top_p %v must be in (0, 1]", ErrParams, p.TopP)
	case !finite(p.MinP) || p.MinP > 1:
		return fmt.Errorf("%w: min_p %v must be finite and <= 1", ErrParams, p.MinP)
	case !finite(p.RepeatPenalty) || p.RepeatPenalty <= 0:
		return fmt.Errorf("%w: repeat penalty %v must be finite and > 0", ErrParams, p.RepeatPenalty)
	case p.RepeatLastN < -1:
		return fmt.Errorf("%w: repeat last_n %d must be >= -1", ErrParams, p.RepeatLastN)
	case !finite(p.PresencePenalty):
		return fmt.Errorf("%w: presence penalty %v must be finite", ErrParams, p.PresencePenalty)
	case !finite(p.FrequencyPenalty):
		return fmt.Errorf("%w: frequency penalty %v must be finite", ErrParams, p.FrequencyPenalty)
	}
	return nil
}

// Sampler draws tokens from logits. Create it with New.
type Sampler struct {
	p   Params
	n   int
	rng *rand.Rand

	// penalties: occurrence counts of the tokens in the history window,
	// and the distinct ids with a nonzero count (to reset them).
	penalize bool
	counts   []int32
	touched  []int32

	// buf holds the candidates; while filtering, P holds the logit.
	buf []Candidate
	// The top-p pre-cut: probability mass per logit bucket, where each
	// bucket starts in tmp and where its next token goes.
	mass  [nBuckets]float64
	start [nBuckets + 1]int32
	next  [nBuckets]int32
	tmp   []Candidate
}

// New returns a Sampler for vocabularies of nVocab tokens with every buffer
// allocated.
func New(p Params, nVocab int) (*Sampler, error) {
	if nVocab <= 0 {
		return nil, fmt.Errorf("%w: vocabulary size %d must be > 0", ErrParams, nVocab)
	}
	if nVocab > math.MaxInt32 {
		return nil, fmt.Errorf("%w: vocabulary size %d does not fit token ids", ErrParams, nVocab)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	s := &Sampler{
		p:   p,
		n:   nVocab,
		rng: rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15)),
		buf: make([]Candidate, nVocab),
	}
	if p.TopP < 1 {
		s.tmp = make([]Candidate, nVocab)
	}
	s.penalize = p.RepeatLastN != 0 &&
		(p.RepeatPenalty != 1 || p.PresencePenalty != 0 || p.FrequencyPenalty != 0)
	if s.penalize {
		s.counts = make([]int32, nVocab)
		window := nVocab
		if p.RepeatLastN > 0 && p.RepeatLastN < window {
			window = p.RepeatLastN
		}
		s.touched = make([]int32, 0, window)
	}
	return s, nil
}

// Sample picks the next token from logits given the token history (prompt
// and generated tokens, oldest first; only the last RepeatLastN matter).
// Only the first nVocab logits are considered and history ids outside the
// vocabulary are ignored. It returns -1 for empty logits. It allocates
// nothing and does not modify logits or history.
func (s *Sampler) Sample(logits []float32, history []int32) int32 {
	return s.Draw(s.Distribution(logits, history))
}

// Distribution returns the final distribution after penalties, top-k, top-p,
// min-p and temperature: the surviving tokens sorted by probability
// descending (lowest id first on ties), every probability positive, summing
// to 1 up to rounding. With Temperature 0 it is the greedy token with
// probability 1. The slice is the Sampler's own buffer, valid until the next
// call of Distribution or Sample. It consumes no randomness.
func (s *Sampler) Distribution(logits []float32, history []int32) []Candidate {
	n := min(len(logits), s.n)
	if n == 0 {
		return s.buf[:0]
	}
	logits = logits[:n]
	s.countHistory(history, n)
	var c []Candidate
	if s.p.Temperature <= 0 {
		c = s.buf[:1]
		c[0] = Candidate{ID: s.argmax(logits), P: 1}
	} else {
		c = s.filter(logits)
		softmaxTemp(c, s.p.Temperature)
		// Drop the tail whose probability underflowed: Draw never picks
		// it and speculative sampling is cleaner without it.
		for len(c) > 1 && !(c[len(c)-1].P > 0) {
			c = c[:len(c)-1]
		}
	}
	s.clearCounts()
	return c
}

// Draw picks a token from c with probability proportional to P. It returns
// -1 for an empty list. It consumes exactly one Uniform draw when two or more
// candidates have positive probability, none otherwise.
func (s *Sampler) Draw(c []Candidate) int32 {
	return s.draw(c, -1, false)
}

// DrawExcluding draws from c with token excl removed and the rest
// renormalized, as the rejection step of speculative sampling needs. It
// returns -1 if no other candidate has positive probability. Randomness is
// consumed as in Draw, counting only the candidates other than excl.
func (s *Sampler) DrawExcluding(c []Candidate, excl int32) int32 {
	return s.draw(c, excl, true)
}

// Uniform returns a uniform float in [0, 1) from the Sampler's generator.
func (s *Sampler) Uniform() float64 {
	return s.rng.Float64()
}

func (s *Sampler) draw(c []Candidate, excl int32, exclude bool) int32 {
	var total float64
	eligible := 0
	last := int32(-1)
	for _, x := range c {
		if exclude && x.ID == excl || !(x.P > 0) {
			continue
		}
		total += float64(x.P)
		eligible++
		last = x.ID
	}
	switch eligible {
	case 0:
		if !exclude && len(c) > 0 {
			return c[0].ID // nothing has positive mass: the best we can do
		}
		return -1
	case 1:
		return last
	}
	u := s.Uniform() * total
	var cum float64
	for _, x := range c {
		if exclude && x.ID == excl || !(x.P > 0) {
			continue
		}
		cum += float64(x.P)
		if u < cum {
			return x.ID
		}
	}
	return last // rounding: u landed past the accumulated total
}

// countHistory records, in counts, how often each token occurs in the
// penalty window of history.
func (s *Sampler) countHistory(history []int32, n int) {
	if !s.penalize {
		return
	}
	if s.p.RepeatLastN > 0 && len(history) > s.p.RepeatLastN {
		history = history[len(history)-s.p.RepeatLastN:]
	}
	for _, id := range history {
		if id < 0 || int(id) >= n {
			continue
		}
		if s.counts[id] == 0 {
			s.touched = append(s.touched, id) // cap suffices: distinct ids <= window
		}
		s.counts[id]++
	}
}

func (s *Sampler) clearCounts() {
	for _, id := range s.touched {
		s.counts[id] = 0
	}
	s.touched = s.touched[:0]
}

// penalized returns logit v of a token seen cnt > 0 times in the window, as
// llama.cpp's penalties sampler computes it (in float32).
func (s *Sampler) penalized(v float32, cnt int32) float32 {
	if v <= 0 {
		v *= s.p.RepeatPenalty
	} else {
		v /= s.p.RepeatPenalty
	}
	return v - (float32(cnt)*s.p.FrequencyPenalty + s.p.PresencePenalty)
}

// logit returns the penalized, cleaned logit of token i.
func (s *Sampler) logit(logits []float32, i int) float32 {
	v := logits[i]
	if s.penalize && s.counts[i] != 0 {
		v = s.penalized(v, s.counts[i])
	}
	return clean(v)
}

// clean maps NaN to -Inf (never chosen) and +Inf to the largest float, so
// that differences of logits stay defined.
func clean(v float32) float32 {
	switch {
	case v != v:
		return float32(math.Inf(-1))
	case v > math.MaxFloat32:
		return math.MaxFloat32
	}
	return v
}

// argmax returns the token with the highest penalized logit, the lowest id on
// ties.
func (s *Sampler) argmax(logits []float32) int32 {
	return s.topKHeap(logits, 1)[0].ID
}

// softmaxTemp divides the logits held in c[i].P by temp and replaces them by
// their softmax. c must be sorted by logit descending.
func softmaxTemp(c []Candidate, temp float32) {
	if len(c) == 0 {
		return
	}
	for i := range c {
		c[i].P /= temp
	}
	max := float64(c[0].P)
	if math.IsInf(max, -1) {
		for i := range c {
			c[i].P = 1 / float32(len(c))
		}
		return
	}
	var sum float64
	for i := range c {
		e := math.Exp(float64(c[i].P) - max)
		c[i].P = float32(e)
		sum += e
	}
	inv := 1 / sum
	for i := range c {
		c[i].P = float32(float64(c[i].P) * inv)
	}
}
