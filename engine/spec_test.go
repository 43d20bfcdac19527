package engine

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/engine/sample"
	"github.com/geisten/geist/engine/spec"
	"github.com/geisten/geist/engine/zoo"
)

// copyHeavy are prompts whose answers repeat their input: retelling,
// quoting, editing a code block.
var copyHeavy = []string{
	"Retell this story in your own words: Once upon a time there was a little girl named Lily. She loved to play outside in the park with her red ball. One day, Lily saw a big dog in the park. The dog wanted to play with the ball too. Lily was scared, but then she threw the ball and the dog ran after it. Lily and the dog became friends. Retelling: Once upon a time there was a little girl named Lily.",
	"Summarize by quoting the key sentences. Text: The kitchen lights turn on at sunset. The hallway lights turn on when someone walks by. The bedroom lights stay off after midnight. The garden lights turn on at sunset and off at eleven. Summary: The kitchen lights turn on at sunset. The garden lights",
	"Fix the bug in this code and print the whole function again.\n```go\nfunc sum(xs []int) int {\n\ttotal := 0\n\tfor i := 1; i < len(xs); i++ {\n\t\ttotal += xs[i]\n\t}\n\treturn total\n}\n```\nFixed:\n```go\nfunc sum(xs []int) int {\n\ttotal := 0\n",
}

func generateIDs(t testing.TB, e *Engine, prompt string, n int, sp SpecOptions, p sample.Params) ([]int32, Stats) {
	t.Helper()
	var ids []int32
	st, err := e.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: n, Sampling: p, Spec: sp,
		OnToken: func(id int32) { ids = append(ids, id) }})
	if err != nil {
		t.Fatal(err)
	}
	return ids, st
}

// TestSpeculativeGreedyExact: with greedy sampling, speculative decoding
// emits exactly the tokens of plain decoding, for every golden prompt of
// every zoo model and for copy-heavy prompts: token trees by lookup and
// n-grams, chains, the skipped-layer draft (trees of its first and second
// choices) alone and beside the others in auto mode, and (for stories260K)
// a draft model; adaptive and with every draft verified.
func TestSpeculativeGreedyExact(t *testing.T) {
	files, _ := filepath.Glob(zoo.Path(t, "golden", "gen-*.json"))
	speculativeGreedyExact(t, files)
}

// speculativeGreedyExact is TestSpeculativeGreedyExact over the models of
// the goldens files (models/ beside their golden/).
func speculativeGreedyExact(t *testing.T, files []string) {
	for _, gf := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(gf), "gen-"), ".json")
		if testing.Short() && !strings.HasSuffix(name, "Q4_0") && name != "stories260K-F32" {
			continue
		}
		if testing.Short() && (name == "tiny-llama-Q4_0" || name == "tiny-qwen2-Q4_0" || name == "stories260K-Q4_0") {
			// Under emulation the models/ files are llama-like with the
			// same kernels: stories260K-F32 (with its draft model) and
			// tiny-qwen3-Q4_0 stand for them (the three others took 81 s
			// of 132 under A72); the families run below their own tests.
			continue
		}
		n := 256
		if testing.Short() {
			n = 48
		}
		// The weight types that only the portable Go kernels compute
		// (BF16, Q4_1, Q5_1) took 75% of this test's time at full length;
		// the controller's exactness does not depend on the weight type
		// (engine/model's invariance tests cover those kernels at every
		// batch size), so they run 64 tokens of two prompts.
		// So do the float files but stories260K-F32 (the float kernels
		// took 66 of the 181 s left in make test; the same reasoning).
		light := hasAnySuffix(name, "-BF16", "-Q4_1", "-Q5_1") || (hasAnySuffix(name, "-F16", "-F32") && name != "stories260K-F32")
		if light && !testing.Short() {
			n = 64
		}
		t.Run(name, func(t *testing.T) {
			opt := Options{Ctx: 512, Batch: 32}
			if strings.HasPrefix(name, "stories260K") {
				opt.DraftModel = zoo.Path(t, "models", "stories260K-Q4_0.gguf")
			}
			if d, ok := familyDraft[strings.TrimSuffix(name, "-Q4_K_M")]; ok {
				opt.DraftModel = zoo.Path(t, "new", "models", d)
			}
			if d, ok := new2Draft[strings.TrimSuffix(name, "-Q4_K_M")]; ok {
				opt.DraftModel = zoo.Path(t, "new2", "models", d)
			}
			opt.SelfSpec = SelfSpecOff
			e := loadFile(t, filepath.Join(filepath.Dir(filepath.Dir(gf)), "models", name+".gguf"), opt)
			g := readGoldenFile(t, gf)
			prompts := copyHeavy[:]
			for _, c := range g.Cases {
				prompts = append(prompts, c.Prompt)
			}
			if testing.Short() || light {
				prompts = prompts[:2]
				if _, family := familyDraft[strings.TrimSuffix(name, "-Q4_0")]; family || new2Draft[strings.TrimSuffix(name, "-Q4_0")] != "" {
					prompts = prompts[:1] // the families: one copy-heavy prompt under emulation
				}
			}
			// The skipped-layer draft, chosen on the model's own answer to
			// the first golden prompt (-short: the last feed-forward block;
			// any choice must keep the output exact).
			if e.model.RecLayers() > 0 {
				// A recurrent model: the search's probes need past states
				// the model does not keep; a draft that skips a recurrent
				// mixer and a feed-forward block.
				installRecSkip(e)
			} else if testing.Short() {
				installLastMLPSkip(e)
			} else {
				calib, _ := generateIDs(t, e, g.Cases[0].Prompt, 96, SpecOptions{Mode: SpecOff}, greedy())
				pt, _ := e.Tokens(&Request{Prompt: g.Cases[0].Prompt})
				set, err := e.TuneSelfSpec(t.Context(), append(pt, calib...))
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("skipped-layer draft: %s, agreement %.2f", set, set.Agreement)
			}
			modes := []SpecOptions{
				{Mode: SpecLookup}, {Mode: SpecAuto}, {Mode: SpecAuto, Fixed: true, DraftMax: 5},
				{Mode: SpecAuto, Fixed: true, Chains: true}, {Mode: SpecSelf, Fixed: true},
			}
			if opt.DraftModel != "" {
				modes = append(modes, SpecOptions{Mode: SpecDraft}, SpecOptions{Mode: SpecDraft, Fixed: true, DraftMax: 4})
			}
			if strings.Contains(name, "lfm2") || strings.Contains(name, "granitehybrid") {
				// A recurrent state: chains (a rejection truncates) as
				// well as trees (Compact moves the kept path's rows).
				modes = append(modes, SpecOptions{Mode: SpecLookup, Fixed: true, Chains: true}, SpecOptions{Mode: SpecSelf, Fixed: true, Chains: true})
			}
			for pi, prompt := range prompts {
				want, _ := generateIDs(t, e, prompt, n, SpecOptions{Mode: SpecOff}, greedy())
				for _, m := range modes {
					got, st := generateIDs(t, e, prompt, n, m, greedy())
					if !equal(got, want) {
						t.Fatalf("prompt %d, %+v: speculative output differs from plain decoding\n got %v\nwant %v", pi, m, got, want)
					}
					if m.Fixed && (pi < len(copyHeavy) || m.Mode == SpecSelf) && st.Drafted == 0 {
						t.Errorf("prompt %d, %+v: nothing drafted on a copy-heavy prompt", pi, m)
					}
				}
			}
		})
	}
}

// hasAnySuffix reports whether s ends in one of suffixes.
func hasAnySuffix(s string, suffixes ...string) bool {
	for _, x := range suffixes {
		if strings.HasSuffix(s, x) {
			return true
		}
	}
	return false
}

// fixedDrafter always proposes the same tokens.
type fixedDrafter []int32

func (f fixedDrafter) Name() string { return "fixed" }
func (f fixedDrafter) Draft(_ []int32, max int, dst []int32) ([]int32, int) {
	return append(dst[:0], f[:min(max, len(f))]...), 0
}

// fixedTree always proposes the same tree: roots[0] followed by next,
// and the other roots as alternatives.
type fixedTree struct {
	roots []int32
	next  int32
}

func (f fixedTree) Name() string { return "fixed-tree" }
func (f fixedTree) Draft(_ []int32, max int, dst []int32) ([]int32, int) {
	return append(dst[:0], f.roots[0], f.next)[:min(max, 2)], 0
}
func (f fixedTree) DraftTree(_ []int32, depth int, t *spec.Tree, d int) {
	t.AddChain(-1, []int32{f.roots[0], f.next}[:min(depth, 2)], d, 0)
	for _, r := range f.roots[1:] {
		t.Add(-1, r, d, 0)
	}
}

// samplingDrafts are plausible but uncertain drafts after prompt: the
// second most likely first token a, a likely follower b of it, and the
// most likely and third most likely first tokens as alternatives.
func samplingDrafts(t *testing.T, e *Engine, prompt string) (fixedDrafter, fixedTree) {
	pt, _ := e.Tokens(&Request{Prompt: prompt})
	lp, err := e.Score(context.Background(), pt, 4)
	if err != nil {
		t.Fatal(err)
	}
	a := lp[len(pt)-1][1].ID
	lp2, _ := e.Score(context.Background(), append(pt, a), 4)
	b := lp2[len(pt)][0].ID
	t.Logf("drafting %d (p≈%.3f) then %d; alternatives %d, %d", a, math.Exp(lp[len(pt)-1][1].Logprob), b,
		lp[len(pt)-1][0].ID, lp[len(pt)-1][2].ID)
	return fixedDrafter{a, b}, fixedTree{roots: []int32{a, lp[len(pt)-1][0].ID, lp[len(pt)-1][2].ID}, next: b}
}

var samplingParams = sample.Params{Temperature: 1, TopK: 40, TopP: 0.95, MinP: 0.02, RepeatPenalty: 1.1, RepeatLastN: 64}

// TestSpeculativeSamplingExact: the empirical distribution of the next two
// tokens is the same with and without speculation, with a drafted chain
// and with a drafted tree (chi-square test of homogeneity, p > 0.01), and
// the test does fail when the acceptance rule is broken.
func TestSpeculativeSamplingExact(t *testing.T) {
	samples := 20000
	if testing.Short() {
		t.Skip("-short: 5×20,000 sampled generations are too slow under emulation")
	}
	e := load(t, "stories260K-F32", Options{Ctx: 64, Batch: 8})
	prompt := "Once upon a time, there was a little"
	chain, tree := samplingDrafts(t, e, prompt)
	run := func(sp SpecOptions, seed uint64, samples int) map[[2]int32]int {
		counts := map[[2]int32]int{}
		for i := 0; i < samples; i++ {
			p := samplingParams
			p.Seed = seed + uint64(i)
			// Three tokens, so that both drafted tokens get verified
			// (the third comes from the last row); count the first two.
			ids, _ := generateIDs(t, e, prompt, 3, sp, p)
			if len(ids) != 3 {
				t.Fatalf("generated %v", ids)
			}
			counts[[2]int32{ids[0], ids[1]}]++
		}
		return counts
	}
	plain := run(SpecOptions{Mode: SpecOff}, 1, samples)
	for i, c := range []struct {
		name   string
		sp     SpecOptions
		broken bool
	}{
		{"chain", SpecOptions{Drafter: chain, Fixed: true}, false},
		{"tree", SpecOptions{Drafter: tree, Fixed: true}, false},
		{"broken rule, chain", SpecOptions{Drafter: chain, Fixed: true, BreakAcceptance: true}, true},
		{"broken rule, tree", SpecOptions{Drafter: tree, Fixed: true, BreakAcceptance: true}, true},
	} {
		// A broken rule moves the distribution far (chi² 24,332 at
		// 20,000 samples, p = 0): a tenth of the samples still gives
		// chi² in the thousands against 13.3 for p = 0.01, at a tenth of
		// the time.
		n := samples
		if c.broken {
			n = samples / 10
		}
		got := run(c.sp, uint64(i+1)*1_000_000, n)
		chi, df, p := chiSquare(plain, got)
		t.Logf("%s vs plain: chi² = %.1f, df = %d, p = %.4g", c.name, chi, df, p)
		if !c.broken && p <= 0.01 {
			t.Errorf("%s: speculative sampling changes the distribution: p = %.4g", c.name, p)
		}
		if c.broken && p > 0.01 {
			t.Errorf("%s: the test does not detect a broken acceptance rule: p = %.4g", c.name, p)
		}
	}
}

// TestSpeculativeSamplingSameDraws: sampling with speculation emits, seed
// for seed, the very tokens plain sampling emits (the target samples every
// token itself, from logits identical to plain decoding's, with the same
// random draws): with chains, trees, lookup and n-gram trees, the
// skipped-layer draft and a draft model.
func TestSpeculativeSamplingSameDraws(t *testing.T) {
	e := load(t, "stories260K-F32", Options{Ctx: 256, Batch: 16, DraftModel: zoo.Path(t, "models", "stories260K-Q4_0.gguf")})
	installLastMLPSkip(e)
	prompt := copyHeavy[0]
	chain, tree := samplingDrafts(t, e, prompt)
	seeds, n := 20, 64
	if testing.Short() {
		seeds, n = 4, 32
	}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		p := samplingParams
		p.Seed = seed
		want, _ := generateIDs(t, e, prompt, n, SpecOptions{Mode: SpecOff}, p)
		for _, sp := range []SpecOptions{{Drafter: chain, Fixed: true}, {Drafter: tree, Fixed: true},
			{Mode: SpecAuto, Fixed: true}, {Mode: SpecAuto}, {Mode: SpecSelf, Fixed: true}, {Mode: SpecDraft, Fixed: true},
			{Mode: SpecLookup, Fixed: true, Chains: true}} {
			got, st := generateIDs(t, e, prompt, n, sp, p)
			if !equal(got, want) {
				t.Fatalf("seed %d, %+v: sampled tokens differ from plain sampling\n got %v\nwant %v", seed, sp, got, want)
			}
			if sp.Fixed && st.Drafted == 0 {
				t.Errorf("seed %d, %+v: nothing drafted", seed, sp)
			}
		}
	}
}

// chiSquare tests whether two samples of equal size come from one
// distribution; categories expected fewer than 10 times are pooled.
func chiSquare(a, b map[[2]int32]int) (chi float64, df int, p float64) {
	keys := map[[2]int32]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	// The two-sample statistic for sizes na and nb (with na = nb it is
	// the sum of (x-y)²/(x+y)).
	var na, nb int
	for _, x := range a {
		na += x
	}
	for _, y := range b {
		nb += y
	}
	ra, rb := math.Sqrt(float64(nb)/float64(na)), math.Sqrt(float64(na)/float64(nb))
	term := func(x, y int) float64 {
		d := float64(x)*ra - float64(y)*rb
		return d * d / float64(x+y)
	}
	var restA, restB int
	cats := 0
	for k := range keys {
		x, y := a[k], b[k]
		if x+y < 20 {
			restA += x
			restB += y
			continue
		}
		chi += term(x, y)
		cats++
	}
	if restA+restB > 0 {
		chi += term(restA, restB)
		cats++
	}
	df = cats - 1
	return chi, df, gammaQ(float64(df)/2, chi/2)
}

// gammaQ is the regularized upper incomplete gamma function Q(s, x).
func gammaQ(s, x float64) float64 {
	if x <= 0 {
		return 1
	}
	lg, _ := math.Lgamma(s)
	if x < s+1 {
		// Series for P, then Q = 1 − P.
		sum, term := 1/s, 1/s
		for n := 1; n < 1000; n++ {
			term *= x / (s + float64(n))
			sum += term
			if term < sum*1e-15 {
				break
			}
		}
		return 1 - sum*math.Exp(-x+s*math.Log(x)-lg)
	}
	// Continued fraction for Q (Lentz).
	b := x + 1 - s
	c := 1 / 1e-300
	d := 1 / b
	h := d
	for i := 1; i < 1000; i++ {
		an := -float64(i) * (float64(i) - s)
		b += 2
		d = an*d + b
		if math.Abs(d) < 1e-300 {
			d = 1e-300
		}
		c = b + an/c
		if math.Abs(c) < 1e-300 {
			c = 1e-300
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < 1e-15 {
			break
		}
	}
	return math.Exp(-x+s*math.Log(x)-lg) * h
}

func TestGammaQ(t *testing.T) {
	// chi² with 1 df: P(X > 3.841) = 0.05; 10 df: P(X > 23.209) = 0.01.
	for _, c := range []struct{ df, x, want float64 }{{1, 3.841, 0.05}, {10, 23.209, 0.01}, {4, 1.064, 0.90}} {
		if got := gammaQ(c.df/2, c.x/2); math.Abs(got-c.want) > 1e-3 {
			t.Errorf("Q(%v, %v) = %v, want %v", c.df/2, c.x/2, got, c.want)
		}
	}
}

// TestSpeculativeAllocations: a speculative decoding step allocates
// nothing: drafting a tree by lookup and n-grams, with a draft model, with
// the skipped-layer draft, verifying, emitting, compacting the cache.
func TestSpeculativeAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	e := load(t, "stories260K-Q4_0", Options{Ctx: 512, Batch: 16, DraftModel: zoo.Path(t, "models", "stories260K-Q4_0.gguf")})
	installLastMLPSkip(e)
	runs := 100
	if testing.Short() {
		runs = 10
	}
	prompt := copyHeavy[0]
	ids, _ := e.Tokens(&Request{Prompt: prompt})
	for _, sp := range []SpecOptions{{Mode: SpecAuto}, {Mode: SpecDraft}, {Mode: SpecSelf}} {
		sp.DraftMax, sp.Fixed = 8, true
		t.Run(string(sp.Mode), func(t *testing.T) {
			g := newTestGeneration(e, &sp, ids)
			e.Reset()
			if _, _, err := e.prefill(context.Background(), ids[:len(ids)-1]); err != nil {
				t.Fatal(err)
			}
			step := func() {
				if e.state.Len() > 400 {
					e.state.Truncate(len(ids) - 1)
					g.history = g.history[:len(ids)]
				}
				next, err := g.step(g.history[len(g.history)-1], g.draftTree(8))
				if err != nil {
					t.Fatal(err)
				}
				if err := g.emit(next); err != nil {
					t.Fatal(err)
				}
			}
			for range 5 {
				step()
			}
			if a := steadyAllocs(runs, step); a != 0 {
				t.Errorf("%v allocations per speculative step", a)
			}
			if g.st.Drafted == 0 {
				t.Error("nothing drafted")
			}
		})
	}
}

// newTestGeneration is a greedy generation of e after the prompt ids,
// driven step by step by a test.
func newTestGeneration(e *Engine, sp *SpecOptions, ids []int32) *generation {
	smp, _ := sample.New(greedy(), e.model.NVocab)
	g := &generation{e: e, req: &Request{}, st: &Stats{}, smp: smp, sp: sp,
		lookup: spec.NewLookup(1, 4), dec: e.tok.NewDecoder(), stop: sample.NewStopMatcher(nil)}
	g.history = make([]int32, 0, 4096)
	g.history = append(g.history, ids...)
	g.maxTok = 1 << 30
	return g
}

// installLastMLPSkip gives e a skipped-layer draft that skips the last
// feed-forward block, without a search.
func installLastMLPSkip(e *Engine) {
	L := e.model.NLayer
	set := &spec.SkipSet{Skip: model.Skip{Attn: make([]bool, L), MLP: make([]bool, L)}, Agreement: 0.5, Cost: 0.9}
	set.Skip.MLP[L-1] = true
	e.installSelf(set)
}
