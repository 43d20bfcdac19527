package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/sample"
	"github.com/geisten/geist/engine/spec"
)

// nativeBench is one line of `geist bench --spec assistant|eagle3 --oracle
// A,B,...`: a model-native drafter at one forced acceptance (and, for the
// assistant, one output head).
type nativeBench struct {
	Model    string  `json:"model"`
	Drafter  string  `json:"drafter"`
	Threads  int     `json:"threads"`
	Spec     string  `json:"spec"`
	Head     string  `json:"head,omitempty"` // the assistant's: sparse or dense
	Oracle   float64 `json:"oracle"`
	DraftMax int     `json:"draft_max"`
	// Plain decoding's and speculative decoding's best decode speed, their
	// ratio, and every round's ratio (speculative against the plain runs
	// just before and after it).
	PlainTokS float64   `json:"plain_tok_s"`
	SpecTokS  float64   `json:"spec_tok_s"`
	Speedup   float64   `json:"speedup"`
	Rounds    []float64 `json:"rounds"`
	// The same in the decoding thread's CPU time (with one thread every
	// product runs on it): on a loaded machine, what an idle one gives.
	// The costs below are in CPU time with one thread, else wall time.
	PlainCPUTokS float64   `json:"plain_cpu_tok_s,omitempty"`
	SpecCPUTokS  float64   `json:"spec_cpu_tok_s,omitempty"`
	SpeedupCPU   float64   `json:"speedup_cpu,omitempty"`
	RoundsCPU    []float64 `json:"rounds_cpu,omitempty"`
	// The costs that determine the speed-up: plain decoding's milliseconds
	// per token (best run), the drafter's milliseconds per drafted token
	// (its steps alone, best run) and that as a share of a decode step,
	// a speculative step (drafting, the verification pass over the fed
	// token and its drafts, the walk) in milliseconds, and the step
	// without its drafting as a share of a decode step (c(K+1)).
	StepMs     float64 `json:"step_ms"`
	DraftMs    float64 `json:"draft_ms"`
	DraftCost  float64 `json:"draft_cost"`
	PassMs     float64 `json:"spec_step_ms"`
	VerifyCost float64 `json:"verify_cost"`
	// What the oracle made of it (best run).
	Drafted       int     `json:"drafted"`
	Accepted      int     `json:"accepted"`
	Acceptance    float64 `json:"acceptance"`
	TokensPerPass float64 `json:"tokens_per_pass"`
	Load          float64 `json:"load1"` // the 1-minute load average when the line was made
}

// parseAlphas reads --oracle: one acceptance or a comma-separated list.
func parseAlphas(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		a, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || a < 0 || a > 1 {
			return nil, cli.Usagef("--oracle %q: want acceptances in [0, 1], comma-separated", s)
		}
		out = append(out, a)
	}
	return out, nil
}

// loadAvg is the 1-minute load average (0 where unknown).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// benchNative measures the model-native drafter of eng (the assistant
// with its sparse and its dense head, or the EAGLE-3 head) at each forced
// acceptance: every arm drafts with the drafter's own steps and verifies
// the oracle's tokens in their place (spec.Forced), a fixed chain of
// draftMax. A round runs plain decoding before and after every arm (the
// arms' order reversed every other round), so the load of a shared
// machine falls on both sides of each ratio.
func benchNative(ctx context.Context, eng *engine.Engine, base nativeBench, prompt string, n int, alphas []float64, rounds, draftMax int) ([]nativeBench, error) {
	nd := eng.NativeDrafter()
	if nd == nil {
		return nil, cli.Usagef("--spec %s --oracle needs the drafter as --draft-model", base.Spec)
	}
	greedy := sample.Params{Temperature: 0, TopP: 1, RepeatPenalty: 1}
	// With one thread every product runs on this goroutine: locked to its
	// thread, the thread's CPU time is the work done, whatever else the
	// machine runs.
	var clock func() time.Duration
	if base.Threads == 1 {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if threadCPU() > 0 {
			clock = threadCPU
		}
	}
	var cpuDecode time.Duration // the last run's decode CPU time (after its first token)
	run := func(so engine.SpecOptions, ids *[]int32) (engine.Stats, error) {
		eng.Reset()
		req := engine.Request{Prompt: prompt, MaxTokens: n, Sampling: greedy, Spec: so}
		var c0 time.Duration
		first := true
		req.OnToken = func(id int32) {
			if first && clock != nil {
				c0, first = clock(), false
			}
			if ids != nil {
				*ids = append(*ids, id)
			}
		}
		st, err := eng.Generate(ctx, req)
		if clock != nil {
			cpuDecode = clock() - c0
		}
		return st, err
	}
	cpuRate := func(st engine.Stats) float64 {
		if clock == nil || cpuDecode <= 0 || st.GeneratedTokens < 2 {
			return 0
		}
		return float64(st.GeneratedTokens-1) / cpuDecode.Seconds()
	}
	plain := engine.SpecOptions{Mode: engine.SpecOff}
	var ref []int32
	if _, err := run(plain, &ref); err != nil {
		return nil, err
	}
	promptToks, err := eng.Tokens(&engine.Request{Prompt: prompt})
	if err != nil {
		return nil, err
	}
	full := append(append([]int32{}, promptToks...), ref...)
	var assist *spec.AssistDraft
	heads := []string{""}
	if a, ok := nd.(*spec.AssistDraft); ok {
		assist = a
		heads = []string{"dense"}
		if a.State().Sparse {
			heads = []string{"sparse", "dense"}
		}
	}
	type arm struct {
		nativeBench
		best    engine.Stats
		draftMs float64 // best run's ms per drafted token
		cpuBest float64 // best run's decode tokens per CPU second
	}
	var arms []*arm
	for _, h := range heads {
		for _, a := range alphas {
			b := base
			b.Head, b.Oracle, b.DraftMax = h, a, draftMax
			arms = append(arms, &arm{nativeBench: b})
		}
	}
	inv := func(x float64) float64 {
		if x <= 0 {
			return 0
		}
		return 1 / x
	}
	// runArm and runPlain return seconds per decoded token, wall and CPU.
	runArm := func(a *arm) (float64, float64, error) {
		if assist != nil {
			assist.State().Sparse = a.Head == "sparse"
		}
		// The same draws in every run of every arm: the best run is then
		// the fastest, not the luckiest, and the heads see the same
		// acceptances.
		f := spec.NewForced(nd, spec.NewOracle(full, a.Oracle, eng.Model().NVocab, 1))
		f.Clock = clock
		st, err := run(engine.SpecOptions{Mode: engine.SpecMode(a.Spec), Drafter: f, Fixed: true, Chains: true, DraftMax: draftMax}, nil)
		if err != nil {
			return 0, 0, err
		}
		cr := cpuRate(st)
		a.cpuBest = max(a.cpuBest, cr)
		if st.DecodeTokS <= 0 {
			return 0, 0, fmt.Errorf("bench: no decode speed (%d tokens)", st.GeneratedTokens)
		}
		if st.DecodeTokS > a.best.DecodeTokS {
			a.best = st
		}
		if f.Steps > 0 {
			ms := float64(f.Time.Microseconds()) / 1000 / float64(f.Steps)
			if a.draftMs == 0 || ms < a.draftMs {
				a.draftMs = ms
			}
		}
		return 1 / st.DecodeTokS, inv(cr), nil
	}
	var plainBest, plainCPU float64
	runPlain := func() (float64, float64, error) {
		st, err := run(plain, nil)
		if err != nil {
			return 0, 0, err
		}
		plainBest = max(plainBest, st.DecodeTokS)
		cr := cpuRate(st)
		plainCPU = max(plainCPU, cr)
		return 1 / st.DecodeTokS, inv(cr), nil
	}
	// Warm-up: one run of each arm.
	for _, a := range arms {
		if _, _, err := runArm(a); err != nil {
			return nil, err
		}
		a.best, a.draftMs, a.cpuBest = engine.Stats{}, 0, 0
	}
	for r := 0; r < rounds; r++ {
		order := slices.Clone(arms)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		before, beforeCPU, err := runPlain()
		if err != nil {
			return nil, err
		}
		for _, a := range order {
			t, tc, err := runArm(a)
			if err != nil {
				return nil, err
			}
			after, afterCPU, err := runPlain()
			if err != nil {
				return nil, err
			}
			a.Rounds = append(a.Rounds, (before+after)/2/t)
			if tc > 0 && beforeCPU > 0 && afterCPU > 0 {
				a.RoundsCPU = append(a.RoundsCPU, (beforeCPU+afterCPU)/2/tc)
			}
			before, beforeCPU = after, afterCPU
		}
	}
	var out []nativeBench
	for _, a := range arms {
		b := a.nativeBench
		b.PlainTokS, b.SpecTokS = plainBest, a.best.DecodeTokS
		b.Speedup = b.SpecTokS / b.PlainTokS
		b.StepMs = 1000 / plainBest
		if plainCPU > 0 && a.cpuBest > 0 {
			b.PlainCPUTokS, b.SpecCPUTokS = plainCPU, a.cpuBest
			b.SpeedupCPU = a.cpuBest / plainCPU
			b.StepMs = 1000 / plainCPU
		}
		b.DraftMs, b.DraftCost = a.draftMs, a.draftMs/b.StepMs
		st := a.best
		b.Drafted, b.Accepted, b.TokensPerPass = st.Drafted, st.Accepted, st.TokensPerPass
		if st.Drafted > 0 {
			b.Acceptance = float64(st.Accepted) / float64(st.Drafted)
		}
		if st.TargetPasses > 1 && st.TreePasses > 0 {
			// The decode time (after the first token, which the prompt's
			// pass emits) over the passes after the first; less the
			// drafting (the drafter's steps per pass at its cost).
			perPass := float64(st.Drafted) / float64(st.TreePasses)
			rate := st.DecodeTokS
			if b.SpecCPUTokS > 0 {
				rate = b.SpecCPUTokS
			}
			b.PassMs = 1000 * float64(st.GeneratedTokens-1) / rate / float64(st.TargetPasses-1)
			b.VerifyCost = (b.PassMs - perPass*b.DraftMs) / b.StepMs
		}
		b.Load = loadAvg()
		out = append(out, b)
	}
	return out, nil
}

func printNative(e *cli.Env, b *nativeBench, asJSON bool) {
	if asJSON {
		j, _ := json.Marshal(b)
		fmt.Fprintf(e.Stdout, "%s\n", j)
		return
	}
	name := b.Spec
	if b.Head != "" {
		name += " " + b.Head
	}
	fmt.Fprintf(e.Stdout, "%s + %s  t=%d  %s α=%.2f K=%d: plain %.2f tok/s (%.1f ms), speculative %.2f tok/s, speedup %.3f×, rounds",
		b.Model, b.Drafter, b.Threads, name, b.Oracle, b.DraftMax, b.PlainTokS, b.StepMs, b.SpecTokS, b.Speedup)
	for _, x := range b.Rounds {
		fmt.Fprintf(e.Stdout, " %.3f×", x)
	}
	if b.SpeedupCPU > 0 {
		fmt.Fprintf(e.Stdout, "; CPU time: plain %.2f tok/s, speculative %.2f tok/s, speedup %.3f×, rounds", b.PlainCPUTokS, b.SpecCPUTokS, b.SpeedupCPU)
		for _, x := range b.RoundsCPU {
			fmt.Fprintf(e.Stdout, " %.3f×", x)
		}
	}
	fmt.Fprintf(e.Stdout, "; draft %.3f ms/token (%.4f of a step), step %.1f ms (c(%d) %.3f), accepted %d/%d (%.1f%%), %.2f tokens/pass; load %.1f\n",
		b.DraftMs, b.DraftCost, b.PassMs, b.DraftMax+1, b.VerifyCost, b.Accepted, b.Drafted, 100*b.Acceptance, b.TokensPerPass, b.Load)
}

// threadCPU is the calling thread's CPU time (0 where unknown).
func threadCPU() time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD (Linux)
	var ru syscall.Rusage
	if syscall.Getrusage(rusageThread, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
