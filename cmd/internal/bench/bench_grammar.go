package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/sample"
)

// grammarBench is bench's constrained-decoding measurement.
type grammarBench struct {
	CompileMs     float64 `json:"compile_ms"`      // schema to grammar, parsed
	States        int     `json:"states"`          // automaton states
	MasksMs       float64 `json:"masks_ms"`        // the masks of every state (the worst first request)
	MaskUs        float64 `json:"mask_us"`         // mean per-token mask, cached
	MaskMaxUs     float64 `json:"mask_max_us"`     // slowest token's mask
	MaskShare     float64 `json:"mask_share"`      // mean mask over a plain constrained decode step
	PlainTokS     float64 `json:"plain_tok_s"`     // unconstrained, no speculation
	ConTokS       float64 `json:"con_tok_s"`       // constrained, no speculation
	ConSpecTokS   float64 `json:"con_spec_tok_s"`  // constrained, speculative
	ConTokens     int     `json:"con_tokens"`      // tokens of the constrained answer
	TokensPerPass float64 `json:"tokens_per_pass"` // constrained, speculative
	// Ratios of summed decode times per round (interleaved arms):
	// constrained over plain, and constrained speculative over plain.
	ConRatio     []float64                      `json:"con_over_plain"`
	ConSpecRatio []float64                      `json:"con_spec_over_plain"`
	Drafters     map[string]engine.DrafterStats `json:"drafters,omitempty"`
}

// benchGrammar compares, in interleaved rounds on one prompt, plain
// unconstrained decoding with constrained decoding without and with
// speculation, and times compiling and masking.
func benchGrammar(ctx context.Context, eng *engine.Engine, src func() (string, error), prompt string, n, rounds int, sp engine.SpecOptions) (*grammarBench, error) {
	var b grammarBench
	t0 := time.Now()
	gbnf, err := src()
	if err != nil {
		return nil, err
	}
	b.CompileMs = float64(time.Since(t0).Microseconds()) / 1000
	c, err := eng.CompileGrammar(gbnf)
	if err != nil {
		return nil, err
	}
	b.States = c.Grammar().States()
	t0 = time.Now()
	c.Precompute()
	b.MasksMs = float64(time.Since(t0).Microseconds()) / 1000

	greedy := sample.Params{Temperature: 0, TopP: 1, RepeatPenalty: 1}
	var conIDs []int32
	run := func(constrained bool, so engine.SpecOptions) (engine.Stats, error) {
		eng.Reset()
		req := engine.Request{Prompt: prompt, MaxTokens: n, Sampling: greedy, Spec: so}
		if constrained {
			req.Grammar = gbnf
			if conIDs == nil {
				req.OnToken = func(id int32) { conIDs = append(conIDs, id) }
			}
		}
		return eng.Generate(ctx, req)
	}
	off := engine.SpecOptions{Mode: engine.SpecOff}
	for _, warm := range []struct {
		c  bool
		so engine.SpecOptions
	}{{false, off}, {true, off}, {true, sp}} {
		if _, err := run(warm.c, warm.so); err != nil {
			return nil, err
		}
	}
	b.ConTokens = len(conIDs)
	var best engine.Stats
	for range rounds {
		var t [3]float64
		for _, arm := range [6]int{0, 1, 2, 2, 1, 0} {
			so := off
			if arm == 2 {
				so = sp
			}
			st, err := run(arm > 0, so)
			if err != nil {
				return nil, err
			}
			if st.DecodeTokS <= 0 {
				return nil, fmt.Errorf("bench: a generation decoded fewer than two tokens")
			}
			t[arm] += 1 / st.DecodeTokS
			switch arm {
			case 0:
				b.PlainTokS = max(b.PlainTokS, st.DecodeTokS)
			case 1:
				b.ConTokS = max(b.ConTokS, st.DecodeTokS)
			case 2:
				if st.DecodeTokS > best.DecodeTokS {
					best = st
				}
			}
		}
		b.ConRatio = append(b.ConRatio, t[0]/t[1])
		b.ConSpecRatio = append(b.ConSpecRatio, t[0]/t[2])
	}
	b.ConSpecTokS, b.TokensPerPass, b.Drafters = best.DecodeTokS, best.TokensPerPass, best.Drafters

	// The mask of every step of the constrained answer, replayed.
	m := c.NewMatcher()
	mask := make([]uint64, (c.Vocab().Size()+63)/64)
	var total time.Duration
	for _, id := range conIDs {
		t := time.Now()
		m.Mask(mask)
		d := time.Since(t)
		total += d
		b.MaskMaxUs = max(b.MaskMaxUs, float64(d.Nanoseconds())/1000)
		if !m.AcceptToken(id) {
			return nil, fmt.Errorf("bench: the constrained answer's token %d does not replay", id)
		}
	}
	if len(conIDs) > 0 {
		b.MaskUs = float64(total.Nanoseconds()) / 1000 / float64(len(conIDs))
		b.MaskShare = b.MaskUs / (1e6 / b.ConTokS)
	}
	return &b, nil
}

func printGrammarBench(e *cli.Env, model string, threads int, b *grammarBench) {
	fmt.Fprintf(e.Stdout, "%s  t=%d  grammar: compile %.2f ms, %d states, all masks %.1f ms; mask %.1f us/token (max %.1f, %.4f%% of a constrained step); plain %.2f tok/s, constrained %.2f tok/s, constrained speculative %.2f tok/s (%.2f tokens/pass, %d tokens)\n",
		model, threads, b.CompileMs, b.States, b.MasksMs, b.MaskUs, b.MaskMaxUs, 100*b.MaskShare, b.PlainTokS, b.ConTokS, b.ConSpecTokS, b.TokensPerPass, b.ConTokens)
	fmt.Fprintf(e.Stdout, "  rounds, constrained/plain speed:")
	for _, x := range b.ConRatio {
		fmt.Fprintf(e.Stdout, " %.3f×", x)
	}
	fmt.Fprintf(e.Stdout, " (%.3f..%.3f); constrained speculative/plain:", slices.Min(b.ConRatio), slices.Max(b.ConRatio))
	for _, x := range b.ConSpecRatio {
		fmt.Fprintf(e.Stdout, " %.3f×", x)
	}
	fmt.Fprintf(e.Stdout, " (%.3f..%.3f)\n", slices.Min(b.ConSpecRatio), slices.Max(b.ConSpecRatio))
}
