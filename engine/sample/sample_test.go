package sample

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// off returns params with every filter and penalty disabled and temperature 1.
func off() Params {
	return Params{Temperature: 1, TopP: 1, RepeatPenalty: 1, RepeatLastN: 64}
}

func mustNew(t testing.TB, p Params, n int) *Sampler {
	t.Helper()
	s, err := New(p, n)
	if err != nil {
		t.Fatalf("New(%+v, %d): %v", p, n, err)
	}
	return s
}

// softmax64 is the plain softmax of logits in float64.
func softmax64(logits []float64) []float64 {
	m := math.Inf(-1)
	for _, v := range logits {
		m = math.Max(m, v)
	}
	out := make([]float64, len(logits))
	var sum float64
	for i, v := range logits {
		out[i] = math.Exp(v - m)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// checkDist compares a distribution with expected ids and probabilities.
func checkDist(t *testing.T, got []Candidate, ids []int32, ps []float64) {
	t.Helper()
	if len(got) != len(ids) {
		t.Fatalf("distribution %v: want ids %v with probs %v", got, ids, ps)
	}
	for i := range got {
		if got[i].ID != ids[i] || math.Abs(float64(got[i].P)-ps[i]) > 1e-6 {
			t.Fatalf("distribution %v: want ids %v with probs %v", got, ids, ps)
		}
	}
}

func logs(ps ...float64) []float32 {
	out := make([]float32, len(ps))
	for i, p := range ps {
		out[i] = float32(math.Log(p))
	}
	return out
}

func TestGreedy(t *testing.T) {
	t.Parallel()
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		logits []float32
		want   int32
	}{
		{nil, -1},
		{[]float32{7}, 0},
		{[]float32{1, 3, 3, 2}, 1},
		{[]float32{-5, -2, -3}, 1},
		{[]float32{nan, 1, nan, 2}, 3},
		{[]float32{nan, nan}, 0},
		{[]float32{1, inf, inf}, 1},
		{[]float32{float32(math.Inf(-1)), -1e30}, 1},
	} {
		if got := Greedy(tc.logits); got != tc.want {
			t.Errorf("Greedy(%v) = %d, want %d", tc.logits, got, tc.want)
		}
	}
}

func TestSamplerGreedy(t *testing.T) {
	t.Parallel()
	p := DefaultParams()
	p.Temperature = 0
	s := mustNew(t, p, 5)
	logits := []float32{0.5, 2, 2, -1, 1.9}
	for range 3 {
		if got := s.Sample(logits, nil); got != 1 {
			t.Fatalf("greedy Sample = %d, want 1 (lowest id of the tie)", got)
		}
	}
	checkDist(t, s.Distribution(logits, nil), []int32{1}, []float64{1})
	// Greedy consumes no randomness.
	ref := mustNew(t, p, 5)
	if s.Uniform() != ref.Uniform() {
		t.Fatal("greedy sampling consumed randomness")
	}
	// Penalties still apply before the argmax, as in llama.cpp.
	p.RepeatPenalty = 2
	s = mustNew(t, p, 5)
	if got := s.Sample(logits, []int32{1, 2}); got != 4 {
		t.Fatalf("greedy Sample with repeat penalty = %d, want 4", got)
	}
}

func TestTopK(t *testing.T) {
	t.Parallel()
	p := off()
	p.TopK = 2
	s := mustNew(t, p, 5)
	e := math.Exp(-1)
	checkDist(t, s.Distribution([]float32{1, 2, 3, 5, 4}, nil),
		[]int32{3, 4}, []float64{1 / (1 + e), e / (1 + e)})
	// Ties keep the lowest ids.
	p.TopK = 3
	s = mustNew(t, p, 6)
	got := s.Distribution([]float32{1, 2, 2, 0, 2, 2}, nil)
	checkDist(t, got, []int32{1, 2, 4}, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3})
	// k >= vocabulary keeps everything.
	p.TopK = 10
	s = mustNew(t, p, 3)
	checkDist(t, s.Distribution(logs(0.2, 0.5, 0.3), nil), []int32{1, 2, 0}, []float64{0.5, 0.3, 0.2})
}

func TestTopP(t *testing.T) {
	t.Parallel()
	logits := logs(0.15, 0.5, 0.05, 0.3)
	for _, tc := range []struct {
		p   float32
		ids []int32
		ps  []float64
	}{
		{0.4, []int32{1}, []float64{1}},
		{0.75, []int32{1, 3}, []float64{0.625, 0.375}},
		{0.9, []int32{1, 3, 0}, []float64{0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95}},
		{0.99, []int32{1, 3, 0, 2}, []float64{0.5, 0.3, 0.15, 0.05}},
		{1, []int32{1, 3, 0, 2}, []float64{0.5, 0.3, 0.15, 0.05}},
	} {
		for _, k := range []int{0, 3, 4} { // nucleus path and sorted path
			p := off()
			p.TopP = tc.p
			p.TopK = k
			s := mustNew(t, p, len(logits))
			ids, ps := tc.ids, tc.ps
			if k == 3 && len(ids) == 4 {
				ids, ps = ids[:3], []float64{0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95}
			}
			checkDist(t, s.Distribution(logits, nil), ids, ps)
		}
	}
}

func TestMinP(t *testing.T) {
	t.Parallel()
	logits := logs(0.15, 0.5, 0.05, 0.3)
	for _, k := range []int{0, 4} {
		for _, tp := range []float32{1, 0.99} {
			p := off()
			p.TopK, p.TopP, p.MinP = k, tp, 0.2 // keep p >= 0.1
			s := mustNew(t, p, len(logits))
			checkDist(t, s.Distribution(logits, nil), []int32{1, 3, 0},
				[]float64{0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95})
			p.MinP = 1 // only the most likely
			s = mustNew(t, p, len(logits))
			checkDist(t, s.Distribution(logits, nil), []int32{1}, []float64{1})
		}
	}
}

func TestTemperature(t *testing.T) {
	t.Parallel()
	logits := logs(1.0/3, 2.0/3)
	for _, tc := range []struct {
		temp float32
		ps   []float64
	}{
		{1, []float64{2.0 / 3, 1.0 / 3}},
		{0.5, []float64{0.8, 0.2}},
		{2, []float64{math.Sqrt2 / (1 + math.Sqrt2), 1 / (1 + math.Sqrt2)}},
	} {
		p := off()
		p.Temperature = tc.temp
		s := mustNew(t, p, 2)
		checkDist(t, s.Distribution(logits, nil), []int32{1, 0}, tc.ps)
	}
	// Top-p works on the probabilities before temperature: at temperature
	// 0.5 token 1 alone would hold 0.8, but with top-p 0.7 it is not enough
	// before temperature (2/3), so both stay.
	p := off()
	p.Temperature, p.TopP = 0.5, 0.7
	s := mustNew(t, p, 2)
	checkDist(t, s.Distribution(logits, nil), []int32{1, 0}, []float64{0.8, 0.2})
}

func TestPenalties(t *testing.T) {
	t.Parallel()
	logits := []float32{2, -1, 0.5, 3, 0}
	history := []int32{3, 0, 1, 1, 99, -4} // out-of-vocabulary ids are ignored
	for _, tc := range []struct {
		name               string
		repeat, freq, pres float32
		lastN              int
		want               []float64
	}{
		{"repeat", 2, 0, 0, 64, []float64{1, -2, 0.5, 1.5, 0}},
		{"frequency", 1, 0.5, 0, 64, []float64{1.5, -2, 0.5, 2.5, 0}},
		{"presence", 1, 0, 0.25, 64, []float64{1.75, -1.25, 0.5, 2.75, 0}},
		{"all", 2, 0.5, 0.25, 64, []float64{0.25, -3.25, 0.5, 0.75, 0}},
		{"window", 2, 0, 0, 4, []float64{2, -2, 0.5, 3, 0}}, // tokens 3 and 0 left the window
		{"whole history", 2, 0, 0, -1, []float64{1, -2, 0.5, 1.5, 0}},
		{"off", 2, 0.5, 0.25, 0, []float64{2, -1, 0.5, 3, 0}},
		{"below one", 0.5, 0, 0, 64, []float64{4, -0.5, 0.5, 6, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := off()
			p.RepeatPenalty, p.FrequencyPenalty, p.PresencePenalty, p.RepeatLastN = tc.repeat, tc.freq, tc.pres, tc.lastN
			s := mustNew(t, p, len(logits))
			want := softmax64(tc.want)
			ids := make([]int32, len(want))
			for i := range ids {
				ids[i] = int32(i)
			}
			slices.SortFunc(ids, func(a, b int32) int {
				if want[a] != want[b] {
					if want[a] > want[b] {
						return -1
					}
					return 1
				}
				return int(a - b)
			})
			ps := make([]float64, len(ids))
			for i, id := range ids {
				ps[i] = want[id]
			}
			for range 2 { // counts must be reset between calls
				checkDist(t, s.Distribution(logits, history), ids, ps)
			}
			// The caller's slices are not modified.
			if !slices.Equal(logits, []float32{2, -1, 0.5, 3, 0}) {
				t.Fatalf("logits modified: %v", logits)
			}
		})
	}
}

// The penalized tokens must be found by top-k even when the penalty raises
// them (repeat penalty < 1, negative presence penalty).
func TestPenaltiesWithTopK(t *testing.T) {
	t.Parallel()
	logits := []float32{3, 2.9, 2.8, 0.1, 0.2}
	p := off()
	p.TopK, p.PresencePenalty = 2, -5
	s := mustNew(t, p, len(logits))
	got := s.Distribution(logits, []int32{3})
	if len(got) != 2 || got[0].ID != 3 || got[1].ID != 0 {
		t.Fatalf("top-2 with boosted token 3: got %v", got)
	}
	p.PresencePenalty = 5
	s = mustNew(t, p, len(logits))
	got = s.Distribution(logits, []int32{0, 0})
	if len(got) != 2 || got[0].ID != 1 || got[1].ID != 2 {
		t.Fatalf("top-2 with penalized token 0: got %v", got)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	nan := float32(math.NaN())
	for _, tc := range []struct {
		name string
		edit func(*Params)
	}{
		{"negative temperature", func(p *Params) { p.Temperature = -0.1 }},
		{"NaN temperature", func(p *Params) { p.Temperature = nan }},
		{"top_p zero", func(p *Params) { p.TopP = 0 }},
		{"top_p above one", func(p *Params) { p.TopP = 1.01 }},
		{"top_p NaN", func(p *Params) { p.TopP = nan }},
		{"min_p above one", func(p *Params) { p.MinP = 1.5 }},
		{"min_p NaN", func(p *Params) { p.MinP = nan }},
		{"repeat penalty zero", func(p *Params) { p.RepeatPenalty = 0 }},
		{"repeat penalty infinite", func(p *Params) { p.RepeatPenalty = float32(math.Inf(1)) }},
		{"last_n below -1", func(p *Params) { p.RepeatLastN = -2 }},
		{"presence NaN", func(p *Params) { p.PresencePenalty = nan }},
		{"frequency infinite", func(p *Params) { p.FrequencyPenalty = float32(math.Inf(-1)) }},
	} {
		p := DefaultParams()
		tc.edit(&p)
		if _, err := New(p, 10); !errors.Is(err, ErrParams) {
			t.Errorf("%s: New error %v, want ErrParams", tc.name, err)
		}
	}
	if _, err := New(DefaultParams(), 0); !errors.Is(err, ErrParams) {
		t.Errorf("vocabulary 0: New error %v, want ErrParams", err)
	}
	for _, edit := range []func(*Params){
		func(p *Params) { p.Temperature = 0 },
		func(p *Params) { p.TopK = -1 },
		func(p *Params) { p.MinP = -1 },
		func(p *Params) { p.TopP = 1 },
		func(p *Params) { p.RepeatLastN = -1 },
	} {
		p := DefaultParams()
		edit(&p)
		if _, err := New(p, 10); err != nil {
			t.Errorf("New(%+v): %v", p, err)
		}
	}
}

func TestDeterminism(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	logits := randLogits(rng, 1000, 2)
	run := func(seed uint64) []int32 {
		p := DefaultParams()
		p.Seed = seed
		p.TopK = 100
		s := mustNew(t, p, len(logits))
		out := make([]int32, 200)
		for i := range out {
			out[i] = s.Sample(logits, out[:i])
		}
		return out
	}
	a, b, c := run(42), run(42), run(43)
	if !slices.Equal(a, b) {
		t.Fatal("same seed gave different tokens")
	}
	if slices.Equal(a, c) {
		t.Fatal("different seeds gave identical tokens")
	}
}

// Sample must consume randomness exactly as Draw(Distribution(...)).
func TestSampleEqualsDrawDistribution(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, p := range []Params{DefaultParams(), off(), {Temperature: 0, TopP: 1, RepeatPenalty: 1}} {
		p.Seed = 7
		p.RepeatPenalty = 1.1
		a := mustNew(t, p, 300)
		b := mustNew(t, p, 300)
		var hist []int32
		for range 300 {
			logits := randLogits(rng, 300, 3)
			x := a.Sample(logits, hist)
			y := b.Draw(b.Distribution(logits, hist))
			if x != y {
				t.Fatalf("params %+v: Sample %d, Draw(Distribution) %d", p, x, y)
			}
			hist = append(hist, x)
		}
		if a.Uniform() != b.Uniform() {
			t.Fatalf("params %+v: generators diverged", p)
		}
	}
}

// Empirical frequencies of Sample match Distribution (chi-square test with a
// fixed seed, so it is deterministic).
func TestChiSquare(t *testing.T) {
	t.Parallel()
	logits := []float32{1.2, -0.3, 0.8, 2.0, 0.1, -2.5, 1.9, 0.0, -1.0, 0.5}
	p := Params{Temperature: 0.9, TopK: 8, TopP: 0.97, MinP: 0.02, RepeatPenalty: 1.3, RepeatLastN: 64, Seed: 2024}
	history := []int32{3, 6}
	s := mustNew(t, p, len(logits))
	dist := slices.Clone(s.Distribution(logits, history))
	if len(dist) < 4 {
		t.Fatalf("distribution too small for the test: %v", dist)
	}
	const draws = 10000
	counts := map[int32]int{}
	for range draws {
		counts[s.Sample(logits, history)]++
	}
	var chi2 float64
	seen := 0
	for _, c := range dist {
		exp := float64(c.P) * draws
		d := float64(counts[c.ID]) - exp
		chi2 += d * d / exp
		seen += counts[c.ID]
	}
	if seen != draws {
		t.Fatalf("%d draws fell outside the distribution %v", draws-seen, dist)
	}
	// 99.9% quantiles of chi-square for 1..9 degrees of freedom.
	crit := []float64{10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88}
	if df := len(dist) - 1; chi2 > crit[df-1] {
		t.Fatalf("chi-square %.2f > %.2f with %d degrees of freedom (counts %v, dist %v)", chi2, crit[df-1], df, counts, dist)
	}
}

func TestDrawExcluding(t *testing.T) {
	t.Parallel()
	s := mustNew(t, off(), 10)
	c := []Candidate{{5, 0.5}, {7, 0.3}, {9, 0.2}}
	counts := map[int32]int{}
	const draws = 10000
	for range draws {
		counts[s.DrawExcluding(c, 5)]++
	}
	if counts[5] != 0 || math.Abs(float64(counts[7])/draws-0.6) > 0.03 || math.Abs(float64(counts[9])/draws-0.4) > 0.03 {
		t.Fatalf("DrawExcluding counts %v, want 7:60%% 9:40%%", counts)
	}
	// Excluding a token not in the list is a plain draw.
	if id := s.DrawExcluding(c, 1); id != 5 && id != 7 && id != 9 {
		t.Fatalf("DrawExcluding returned %d", id)
	}
	// One remaining candidate: no randomness consumed.
	a, b := mustNew(t, off(), 10), mustNew(t, off(), 10)
	if id := a.DrawExcluding(c[:2], 5); id != 7 {
		t.Fatalf("DrawExcluding of two = %d, want 7", id)
	}
	if id := a.Draw(c[:1]); id != 5 {
		t.Fatalf("Draw of one = %d, want 5", id)
	}
	if a.Uniform() != b.Uniform() {
		t.Fatal("single-candidate draws consumed randomness")
	}
	if id := a.DrawExcluding(c[:1], 5); id != -1 {
		t.Fatalf("DrawExcluding of nothing = %d, want -1", id)
	}
	if id := a.Draw(nil); id != -1 {
		t.Fatalf("Draw(nil) = %d, want -1", id)
	}
	if id := a.DrawExcluding([]Candidate{{1, 1}, {2, 0}}, 1); id != -1 {
		t.Fatalf("DrawExcluding with only zero mass left = %d, want -1", id)
	}
	u := a.Uniform()
	if u < 0 || u >= 1 {
		t.Fatalf("Uniform() = %v", u)
	}
}

func TestDistributionInvariants(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 200 {
		n := 1 + rng.IntN(400)
		p := randParams(rng)
		s := mustNew(t, p, n)
		logits := randLogits(rng, n, 4)
		d := s.Distribution(logits, randHistory(rng, n))
		if len(d) == 0 {
			t.Fatalf("trial %d: empty distribution", trial)
		}
		var sum float64
		seen := map[int32]bool{}
		for i, c := range d {
			if !(c.P > 0) || c.ID < 0 || int(c.ID) >= n || seen[c.ID] {
				t.Fatalf("trial %d: bad candidate %v", trial, c)
			}
			seen[c.ID] = true
			if i > 0 && (d[i-1].P < c.P || d[i-1].P == c.P && d[i-1].ID > c.ID) {
				t.Fatalf("trial %d: not sorted at %d: %v", trial, i, d)
			}
			sum += float64(c.P)
		}
		if math.Abs(sum-1) > 1e-5 {
			t.Fatalf("trial %d: probabilities sum to %v", trial, sum)
		}
	}
}

// reference is a plain transcription of llama.cpp's chain: full sort, no
// shortcuts. Distribution must agree with it on every path.
func reference(p Params, logits []float32, history []int32) []Candidate {
	n := len(logits)
	counts := make([]int32, n)
	if p.RepeatLastN != 0 {
		h := history
		if p.RepeatLastN > 0 && len(h) > p.RepeatLastN {
			h = h[len(h)-p.RepeatLastN:]
		}
		for _, id := range h {
			if id >= 0 && int(id) < n {
				counts[id]++
			}
		}
	}
	c := make([]Candidate, n)
	for i, v := range logits {
		if counts[i] > 0 {
			if v <= 0 {
				v *= p.RepeatPenalty
			} else {
				v /= p.RepeatPenalty
			}
			v -= float32(counts[i])*p.FrequencyPenalty + p.PresencePenalty
		}
		c[i] = Candidate{int32(i), clean(v)}
	}
	sortRank(c)
	if p.Temperature <= 0 {
		return []Candidate{{c[0].ID, 1}}
	}
	if p.TopK > 0 && p.TopK < len(c) {
		c = c[:p.TopK]
	}
	c = minP(topP(c, p.TopP), p.MinP)
	softmaxTemp(c, p.Temperature)
	for len(c) > 1 && !(c[len(c)-1].P > 0) {
		c = c[:len(c)-1]
	}
	return c
}

func TestAgainstReference(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 300 {
		n := 1 + rng.IntN(3000)
		p := randParams(rng)
		switch trial % 4 { // make sure every path is taken often
		case 0:
			p.TopK = 0
		case 1:
			p.TopK = n/4 + 1 + rng.IntN(n)
		}
		s := mustNew(t, p, n)
		logits := randLogits(rng, n, 1+rng.Float64()*5)
		history := randHistory(rng, n)
		for range 2 {
			got := s.Distribution(logits, history)
			want := reference(p, logits, history)
			if len(got) != len(want) {
				t.Fatalf("trial %d (n %d, %+v): %d candidates, reference %d", trial, n, p, len(got), len(want))
			}
			for i := range got {
				if got[i].ID != want[i].ID || math.Abs(float64(got[i].P-want[i].P)) > 1e-6 {
					t.Fatalf("trial %d (n %d, %+v): candidate %d = %v, reference %v", trial, n, p, i, got[i], want[i])
				}
			}
		}
	}
}

// The shortcuts at a real vocabulary size (the bucket pre-cut spreads tokens
// over many buckets only when there are many of them).
func TestAgainstReferenceLargeVocab(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("short")
	}
	rng := rand.New(rand.NewPCG(15, 16))
	const n = 151936
	for _, tc := range []struct {
		topK       int
		topP, minP float32
		scale      float64
	}{
		{0, 0.95, 0, 2},
		{0, 0.9, 0.05, 3},
		{0, 0.5, 0, 8},
		{40, 0.95, 0.05, 2},
		{5000, 0.99, 0, 2},
		{60000, 0.8, 0.01, 1},
	} {
		p := Params{Temperature: 0.8, TopK: tc.topK, TopP: tc.topP, MinP: tc.minP,
			RepeatPenalty: 1.3, PresencePenalty: -0.5, RepeatLastN: 64}
		s := mustNew(t, p, n)
		logits := randLogits(rng, n, tc.scale)
		history := randHistory(rng, n)
		got := s.Distribution(logits, history)
		want := reference(p, logits, history)
		if len(got) != len(want) {
			t.Fatalf("%+v: %d candidates, reference %d", tc, len(got), len(want))
		}
		for i := range got {
			if got[i].ID != want[i].ID || math.Abs(float64(got[i].P-want[i].P)) > 1e-7 {
				t.Fatalf("%+v: candidate %d = %v, reference %v", tc, i, got[i], want[i])
			}
		}
	}
}

// Bad input must not panic.
func TestOddInput(t *testing.T) {
	t.Parallel()
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, p := range []Params{DefaultParams(), off(), {Temperature: 0, TopP: 1, RepeatPenalty: 1}} {
		p.RepeatPenalty = 1.2
		s := mustNew(t, p, 4)
		if id := s.Sample(nil, nil); id != -1 {
			t.Errorf("Sample(nil) = %d, want -1", id)
		}
		for _, logits := range [][]float32{
			{nan, nan, nan, nan},
			{-inf, -inf, -inf, -inf},
			{inf, 1, inf, 0},
			{nan, 2, -inf, inf},
			{1, 2},                // shorter than the vocabulary
			{1, 2, 3, 4, 5, 6, 7}, // longer: the tail is ignored
		} {
			id := s.Sample(logits, []int32{-1, 2, 1 << 30, 3})
			if id < 0 || int(id) >= min(len(logits), 4) {
				t.Errorf("%+v: Sample(%v) = %d", p, logits, id)
			}
		}
		if id := s.Sample([]float32{0, 0, 9, 0}, nil); id != 2 && p.Temperature == 0 {
			t.Errorf("Sample picked %d, want 2", id)
		}
	}
}

func TestLogSoftmax(t *testing.T) {
	t.Parallel()
	logits := []float32{1, 2, 3, -4, 0}
	dst := make([]float32, len(logits))
	LogSoftmax(dst, logits)
	want := softmax64([]float64{1, 2, 3, -4, 0})
	for i := range dst {
		if math.Abs(float64(dst[i])-math.Log(want[i])) > 1e-6 {
			t.Fatalf("LogSoftmax = %v, want log of %v", dst, want)
		}
	}
	// Large logits stay finite; in place works.
	big := []float32{1000, 1001, 1002}
	LogSoftmax(big, big)
	var sum float64
	for _, v := range big {
		sum += math.Exp(float64(v))
	}
	if math.Abs(sum-1) > 1e-6 || math.Abs(float64(big[2])+0.40760596) > 1e-6 {
		t.Fatalf("in-place LogSoftmax of large logits = %v (sum %v)", big, sum)
	}
	ninf := float32(math.Inf(-1))
	two := make([]float32, 2)
	LogSoftmax(two, []float32{0, ninf})
	if two[0] != 0 || two[1] != ninf {
		t.Fatalf("LogSoftmax with -Inf = %v", two)
	}
	LogSoftmax(two, []float32{ninf, ninf})
	if math.Abs(float64(two[0])+math.Ln2) > 1e-6 || two[0] != two[1] {
		t.Fatalf("LogSoftmax of all -Inf = %v, want uniform", two)
	}
	LogSoftmax(two, []float32{float32(math.Inf(1)), 3})
	if two[0] != 0 || two[1] != ninf {
		t.Fatalf("LogSoftmax with +Inf = %v", two)
	}
	LogSoftmax(nil, logits) // no panic
	short := make([]float32, 1)
	LogSoftmax(short, []float32{0, 0})
	if math.Abs(float64(short[0])+math.Ln2) > 1e-6 {
		t.Fatalf("LogSoftmax into a short dst = %v", short)
	}
}

func TestZeroAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const n = 151936
	logits := randLogits(rng, n, 2)
	history := randHistory(rng, n)
	for _, tc := range []struct {
		name string
		edit func(*Params)
		runs int
	}{
		{"default", func(*Params) {}, 20},
		{"penalties", func(p *Params) { p.RepeatPenalty, p.PresencePenalty, p.FrequencyPenalty = 1.1, 0.2, 0.1 }, 20},
		{"greedy", func(p *Params) { p.Temperature = 0; p.RepeatPenalty = 1.1 }, 20},
		{"top-k 1000", func(p *Params) { p.TopK = 1000 }, 5},
		{"top-p only", func(p *Params) { p.TopK = 0; p.MinP = 0; p.RepeatPenalty = 1.1 }, 2},
		{"no filters", func(p *Params) { p.TopK, p.TopP, p.MinP = 0, 1, 0 }, 2},
	} {
		p := DefaultParams()
		tc.edit(&p)
		s := mustNew(t, p, n)
		var d []Candidate
		if a := testing.AllocsPerRun(tc.runs, func() {
			s.Sample(logits, history)
			d = s.Distribution(logits, history)
			s.Draw(d)
			s.DrawExcluding(d, d[0].ID)
		}); a != 0 {
			t.Errorf("%s: %v allocations per Sample", tc.name, a)
		}
	}
}

func randLogits(rng *rand.Rand, n int, scale float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		v := rng.NormFloat64() * scale
		switch rng.IntN(20) {
		case 0:
			v = math.Round(v) // ties
		case 1:
			v = math.Inf(-1)
		}
		out[i] = float32(v)
	}
	return out
}

func randHistory(rng *rand.Rand, n int) []int32 {
	h := make([]int32, rng.IntN(100))
	for i := range h {
		h[i] = int32(rng.IntN(min(n, 50)))
	}
	return h
}

func randParams(rng *rand.Rand) Params {
	p := Params{
		Temperature:   float32(rng.Float64() * 2),
		TopK:          rng.IntN(60) - 5,
		TopP:          1,
		MinP:          0,
		RepeatPenalty: 1,
		RepeatLastN:   rng.IntN(80) - 1,
		Seed:          rng.Uint64(),
	}
	if rng.IntN(5) == 0 {
		p.Temperature = 0
	}
	if rng.IntN(3) > 0 {
		p.TopP = float32(0.05 + 0.95*rng.Float64())
	}
	if rng.IntN(2) == 0 {
		p.MinP = float32(rng.Float64() * 0.3)
	}
	if rng.IntN(2) == 0 {
		p.RepeatPenalty = float32(0.5 + rng.Float64())
		p.PresencePenalty = float32(rng.Float64() - 0.5)
		p.FrequencyPenalty = float32(rng.Float64() - 0.5)
	}
	return p
}

func BenchmarkSample(b *testing.B) {
	rng := rand.New(rand.NewPCG(11, 12))
	const n = 151936
	logits := randLogits(rng, n, 2)
	history := randHistory(rng, n)
	for _, tc := range []struct {
		name string
		edit func(*Params)
	}{
		{"default", func(*Params) {}},
		{"default+penalties", func(p *Params) { p.RepeatPenalty, p.PresencePenalty = 1.1, 0.5 }},
		{"greedy", func(p *Params) { p.Temperature = 0 }},
		{"top-k-1000", func(p *Params) { p.TopK = 1000 }},
		{"top-p-min-p", func(p *Params) { p.TopK = 0 }},
		{"top-p", func(p *Params) { p.TopK, p.MinP = 0, 0 }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := DefaultParams()
			tc.edit(&p)
			s := mustNew(b, p, n)
			b.ReportAllocs()
			for b.Loop() {
				s.Sample(logits, history)
			}
		})
	}
}

// Any logits (NaN, infinities, ties) and parameters: Distribution agrees
// with the plain reference and never panics.
func FuzzDistribution(f *testing.F) {
	f.Add([]byte{0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64}, uint8(0), uint8(2), uint8(90), uint8(5), uint8(8), []byte{1, 1})
	f.Add([]byte{0, 0, 192, 127, 0, 0, 128, 127, 0, 0, 128, 255}, uint8(3), uint8(0), uint8(100), uint8(0), uint8(0), []byte{0})
	f.Fuzz(func(t *testing.T, raw []byte, temp, topK, topP, minP, pen uint8, hist []byte) {
		n := len(raw) / 4
		if n == 0 || n > 256 {
			return
		}
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = math.Float32frombits(uint32(raw[4*i]) | uint32(raw[4*i+1])<<8 | uint32(raw[4*i+2])<<16 | uint32(raw[4*i+3])<<24)
		}
		history := make([]int32, len(hist))
		for i, b := range hist {
			history[i] = int32(b) - 8
		}
		p := Params{
			Temperature:      float32(temp%8) / 4,
			TopK:             int(topK%16) - 2,
			TopP:             float32(1+topP%100) / 100,
			MinP:             float32(minP%50) / 100,
			RepeatPenalty:    0.5 + float32(pen%16)/8,
			PresencePenalty:  float32(pen%5) - 2,
			FrequencyPenalty: float32(pen%3) - 1,
			RepeatLastN:      int(pen%10) - 1,
		}
		s, err := New(p, n)
		if err != nil {
			t.Fatal(err)
		}
		got := s.Distribution(logits, history)
		want := reference(p, logits, history)
		if len(got) != len(want) {
			t.Fatalf("%+v: %v, reference %v", p, got, want)
		}
		for i := range got {
			if got[i].ID != want[i].ID || math.Abs(float64(got[i].P-want[i].P)) > 1e-6 {
				t.Fatalf("%+v: %v, reference %v", p, got, want)
			}
		}
		if id := s.Sample(logits, history); id < 0 || int(id) >= n {
			t.Fatalf("Sample = %d", id)
		}
	})
}
