package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/models"
	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/engine/sample"
	"github.com/geisten/geist/engine/spec"
)

// Result is one line of `geist bench --json`.
type Result struct {
	Model   string  `json:"model"`
	Threads int     `json:"threads"`
	PPTokS  float64 `json:"pp_tok_s,omitempty"`
	TGTokS  float64 `json:"tg_tok_s,omitempty"`
	// The same per second of the process's CPU time (best repetition):
	// with one thread, close to what an idle machine gives when other
	// programs load this one (with more, the workers' polling counts).
	PPCPUTokS  float64            `json:"pp_cpu_tok_s,omitempty"`
	TGCPUTokS  float64            `json:"tg_cpu_tok_s,omitempty"`
	VerifyCost map[string]float64 `json:"verify_cost,omitempty"`
	// With lists (-p 128,4096, --depth 0,4096): every prefill length's
	// speed and every decoding depth's (tg_tok_s and pp_tok_s are the
	// first of each).
	Prefill []lengthRate `json:"prefill,omitempty"`
	Decode  []lengthRate `json:"decode,omitempty"`
	// c(K) from the passes' CPU time.
	VerifyCostCPU map[string]float64 `json:"verify_cost_cpu,omitempty"`
	// With --step-profile: where one decode step's wall time goes, and a
	// prefill's, in microseconds per token.
	StepProfile    *StepProfile `json:"step_profile,omitempty"`
	PrefillProfile *StepProfile `json:"prefill_profile,omitempty"`
	// With --membw: weight bytes one decode step reads, the machine's
	// memory read bandwidth with this many threads, and the share of it
	// decoding uses (tg_tok_s × decode_bytes / mem_read_bytes_s).
	DecodeBytes int64 `json:"decode_bytes,omitempty"`
	// A mixture of experts: the weight bytes a decoded token read, the
	// experts it really ran counted (State.ExpertBytesRead), and their
	// share of the file's weights; the first repetition's decode rate
	// (experts not yet in the page cache, when the budget left them in
	// the file and the cache had dropped them).
	ReadPerToken int64   `json:"read_bytes_per_token,omitempty"`
	ReadShare    float64 `json:"read_share_of_file,omitempty"`
	TGFirstTokS  float64 `json:"tg_first_tok_s,omitempty"`
	// With --spec on a mixture of experts: the weight bytes per generated
	// token, plain and speculative (the union of a verified batch's
	// experts read once).
	PlainReadPerToken int64   `json:"plain_read_bytes_per_token,omitempty"`
	SpecReadPerToken  int64   `json:"spec_read_bytes_per_token,omitempty"`
	MemReadBps        float64 `json:"mem_read_bytes_s,omitempty"`
	// The KV cache of the context the benchmark ran with (a sliding-window
	// layer holds a ring of its window and a batch, not the context).
	Ctx     int   `json:"ctx,omitempty"`
	KVBytes int64 `json:"kv_bytes,omitempty"`
	// What the load repacked (--repack-budget) and what it left in the
	// mapped file.
	Repack        string  `json:"repack,omitempty"`
	RepackedBytes int64   `json:"repacked_bytes"`
	InFileBytes   int64   `json:"in_file_bytes"`
	BWShare       float64 `json:"bandwidth_share,omitempty"`

	Spec          string                         `json:"spec,omitempty"`
	Oracle        *float64                       `json:"oracle,omitempty"`
	PlainTokS     float64                        `json:"plain_tok_s,omitempty"`
	SpecTokS      float64                        `json:"spec_tok_s,omitempty"`
	Speedup       float64                        `json:"speedup,omitempty"`
	Drafted       int                            `json:"drafted,omitempty"`
	Accepted      int                            `json:"accepted,omitempty"`
	Acceptance    float64                        `json:"acceptance,omitempty"`
	TokensPerPass float64                        `json:"tokens_per_pass,omitempty"`
	MeanTreeSize  float64                        `json:"mean_tree_size,omitempty"`
	PassMs        float64                        `json:"ms_per_pass,omitempty"`
	Drafters      map[string]engine.DrafterStats `json:"drafters,omitempty"`
	SelfSkip      string                         `json:"self_skip,omitempty"`
	// Rounds holds the speed-up of every interleaved round (speculative
	// over plain decoding in the same round).
	Rounds []float64 `json:"rounds,omitempty"`
	// The same in the decoding thread's CPU time (one thread: every
	// product runs on it), what an idle machine gives on a loaded one.
	PlainCPUTokS float64   `json:"plain_cpu_tok_s,omitempty"`
	SpecCPUTokS  float64   `json:"spec_cpu_tok_s,omitempty"`
	SpeedupCPU   float64   `json:"speedup_cpu,omitempty"`
	RoundsCPU    []float64 `json:"rounds_cpu,omitempty"`
	PassCPUMs    float64   `json:"cpu_ms_per_pass,omitempty"`
}

// lengthRate is a speed at a prompt length or a cache depth.
type lengthRate struct {
	Tokens int     `json:"tokens"`
	TokS   float64 `json:"tok_s"`
}

// StepProfile is model.StepProfile per decoded token, in microseconds:
// pool jobs by kind (the caller's own share, then its wait for the
// workers), the serial rest, and the hand-offs to the workers.
type StepProfile struct {
	TotalUs        float64 `json:"total_us"`
	ProductsUs     float64 `json:"products_us"`
	ProductsWaitUs float64 `json:"products_wait_us"`
	AttnUs         float64 `json:"attention_us"`
	AttnWaitUs     float64 `json:"attention_wait_us"`
	QuantUs        float64 `json:"quantize_us"`
	SerialUs       float64 `json:"serial_us"`
	HandOffs       float64 `json:"hand_offs"`
	// RunQueueUs is how long the process's threads were ready but
	// waiting for a processor (Linux; 0 elsewhere): another process's
	// share of the wall time, not the threads waiting for each other.
	RunQueueUs float64 `json:"run_queue_us,omitempty"`
}

func newStepProfile(p model.StepProfile) *StepProfile {
	n := float64(max(p.Tokens, 1))
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / n }
	j := p.Jobs
	q := j[model.JobQuantize]
	return &StepProfile{
		TotalUs:    us(p.Total),
		ProductsUs: us(j[model.JobProducts].Own), ProductsWaitUs: us(j[model.JobProducts].Wait),
		AttnUs: us(j[model.JobAttention].Own), AttnWaitUs: us(j[model.JobAttention].Wait),
		QuantUs: us(q.Own + q.Wait), SerialUs: us(p.Serial()),
		HandOffs: float64(j[model.JobProducts].Parallel+j[model.JobAttention].Parallel+q.Parallel) / n,
	}
}

func parseInts(s, name string) ([]int, error) { return parseCounts(s, name, 1) }

// parseCounts reads a comma-separated list of integers of at least least.
func parseCounts(s, name string, least int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < least {
			if least == 0 {
				return nil, cli.Usagef("--%s: %q is not a list of integers >= 0", name, s)
			}
			return nil, cli.Usagef("--%s: %q is not a list of positive integers", name, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseThreads reads -t: one thread count or a comma-separated list, 0
// meaning all performance cores (engine.DefaultThreads), as in run.
func parseThreads(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, cli.Usagef("--threads: %q is not a thread count or a comma-separated list of them", s)
		}
		if n == 0 {
			n = engine.DefaultThreads()
		}
		out = append(out, n)
	}
	return out, nil
}

func Command(ctx context.Context, e *cli.Env, args []string) error {
	fs := cli.NewFlags(e, "bench", "bench -m MODEL [-p 128] [-n 64] [-t 1,2] [--batch 1,2,4,8] [--json] [--spec MODE --prompt-file FILE] [--oracle ALPHA] | bench --ha [--url URL] [--api ollama|openai] [--turns 10] [--entities 50]")
	path := fs.StringP("model", "m", "", "GGUF model file")
	ppList := fs.StringP("n-prompt", "p", "128", "prompt tokens for the prefill test (0: skip); a comma-separated list (-p 128,512,2048,4096) measures each")
	tg := fs.IntP("n-gen", "n", 64, "tokens for the decode test (0: skip)")
	depthList := fs.String("depth", "0", "cache positions filled before the decode test; a comma-separated list (--depth 0,2048,4096) measures each")
	threads := fs.StringP("threads", "t", "0", "threads for matrix products, as in run (0: all performance cores); a comma-separated list (-t 1,2) measures each")
	batch := fs.String("batch", "1,2,4,8", "batch sizes K for the verification cost c(K)")
	reps := fs.IntP("repetitions", "r", 3, "repetitions of each measurement (the best counts); with --spec/--oracle, interleaved rounds")
	asJSON := fs.Bool("json", false, "one JSON object per line")
	specMode := fs.String("spec", "", "compare speculative decoding in this mode with plain decoding")
	promptFile := fs.String("prompt-file", "", "prompt for --spec and --oracle")
	oracleList := fs.String("oracle", "", "compare an oracle drafter with acceptance ALPHA (0..1) with plain decoding; a comma-separated list measures each; with --spec mtp, or assistant|eagle3 and the drafter as --draft-model, the drafter's own steps run and the oracle's tokens take their place (a fixed chain of --draft-max; the assistant with its sparse and its dense head), interleaved with plain decoding")
	draftVocab := fs.Int("draft-vocab", 0, "the MTP drafter scores only token ids below N (0: every token)")
	draftMax := fs.Int("draft-max", 8, "most tokens drafted per step")
	draftModel := fs.String("draft-model", "", "draft model for --spec draft")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile to this file")
	kvType := fs.String("kv-type", "f16", "KV cache type: f16 or q8_0")
	repack := fs.String("repack-budget", engine.RepackAuto, cli.RepackHelp)
	fixed := fs.Bool("spec-fixed", false, "with --spec/--oracle: verify every drafted token (no adaptive control)")
	chains := fs.Bool("spec-chains", false, "with --spec/--oracle: draft one chain per step instead of a token tree")
	selfSpec := fs.String("self-spec", "off", "when to choose the blocks the skipped-layer draft skips: auto, load or off (--spec self: at load; off keeps a background search out of the measurements)")
	costSlope := fs.Float64("spec-cost", 0, "with --spec/--oracle: plan drafting with c(k) = 1 + SLOPE·(k-1) instead of measured times")
	membw := fs.Bool("membw", false, "also measure the memory read bandwidth and the share of it decoding uses")
	stepProf := fs.Bool("step-profile", false, "also show where a decode step's time goes (pool jobs, waiting, serial work)")
	var gf cli.GrammarFlags
	gf.Register(fs)
	var ha haFlags
	ha.register(fs)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *ha.on {
		return benchHA(ctx, e, &ha, *asJSON)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *path == "" {
		return cli.Usagef("no model given (-m MODEL)")
	}
	ths, err := parseThreads(*threads)
	if err != nil {
		return err
	}
	ks, err := parseInts(*batch, "batch")
	if err != nil {
		return err
	}
	pps, err := parseCounts(*ppList, "n-prompt", 0)
	if err != nil {
		return err
	}
	depths, err := parseCounts(*depthList, "depth", 0)
	if err != nil {
		return err
	}
	if slices.Min(pps) < 0 || slices.Min(depths) < 0 || *tg < 0 || *reps < 1 {
		return cli.Usagef("-p, --depth, -n must be >= 0 and -r >= 1")
	}
	pp := &pps[0]
	maxPP, maxDepth := slices.Max(pps), slices.Max(depths)
	alphas := []float64{-1}
	if *oracleList != "" {
		if alphas, err = parseAlphas(*oracleList); err != nil {
			return err
		}
	}
	var mode engine.SpecMode
	if *specMode != "" {
		if mode, err = engine.ParseSpecMode(*specMode); err != nil {
			return cli.UsageError{Err: err}
		}
	}
	nativeOracle := *oracleList != "" && (mode == engine.SpecAssistant || mode == engine.SpecEagle3 || mode == engine.SpecMTP)
	prompt := "The quick brown fox jumps over the lazy dog. Once upon a time, in a small house at the edge of the forest, there lived an old clockmaker who repaired every clock in the village."
	if *promptFile != "" {
		b, err := os.ReadFile(*promptFile)
		if err != nil {
			return err
		}
		prompt = string(b)
	}
	maxK := slices.Max(ks)
	for _, t := range ths {
		opt := engine.Options{Threads: t, Ctx: max(*pp+maxK, maxPP, maxDepth+*tg, 512) + 1024, Batch: max(maxPP, maxK, *draftMax+1), LogitRows: max(maxK, *draftMax+1),
			DraftModel: *draftModel, KVType: *kvType, SelfSpec: *selfSpec, RepackBudget: *repack, DraftVocab: max(*draftVocab, 0)}
		if mode == engine.SpecSelf && *selfSpec != engine.SelfSpecLoad {
			opt.SelfSpec = engine.SelfSpecLoad
		}
		eng, err := engine.Load(*path, opt)
		if err != nil {
			return err
		}
		r := Result{Model: filepath.Base(*path), Threads: t, Repack: eng.Model().Repack.String(), RepackedBytes: eng.Model().Repack.Packed, InFileBytes: eng.Model().Repack.InFile}
		if gf.Set() {
			sp := engine.SpecOptions{Mode: mode, DraftMax: *draftMax, Fixed: *fixed, Chains: *chains, CostSlope: *costSlope}
			if sp.Mode == "" {
				sp.Mode = engine.SpecAuto
			}
			gb, err := benchGrammar(ctx, eng, func() (string, error) { c, err := gf.Load(); return cli.Source(c), err }, prompt, max(*tg, 16), *reps, sp)
			eng.Close()
			if err != nil {
				return err
			}
			if *asJSON {
				b, _ := json.Marshal(struct {
					Model   string `json:"model"`
					Threads int    `json:"threads"`
					*grammarBench
				}{r.Model, t, gb})
				fmt.Fprintf(e.Stdout, "%s\n", b)
			} else {
				printGrammarBench(e, r.Model, t, gb)
			}
			continue
		}
		if nativeOracle {
			base := nativeBench{Model: r.Model, Drafter: filepath.Base(*draftModel), Threads: t, Spec: string(mode)}
			if *draftModel == "" {
				base.Drafter = "the target's own MTP block"
			}
			bs, err := benchNative(ctx, eng, base, prompt, max(*tg, 16), alphas, *reps, *draftMax)
			eng.Close()
			if err != nil {
				return err
			}
			for i := range bs {
				printNative(e, &bs[i], *asJSON)
			}
			continue
		}
		if mode != "" || alphas[0] >= 0 {
			for i, alpha := range alphas {
				if i > 0 {
					printBench(e, &r, *asJSON, ks)
					r = Result{Model: r.Model, Threads: t, Repack: r.Repack, RepackedBytes: r.RepackedBytes, InFileBytes: r.InFileBytes}
				}
				if err = benchSpec(ctx, eng, &r, prompt, max(*tg, 16), alpha, *reps,
					engine.SpecOptions{Mode: mode, DraftMax: *draftMax, Fixed: *fixed, Chains: *chains, CostSlope: *costSlope}); err != nil {
					break
				}
			}
		} else {
			err = benchPlain(ctx, eng, &r, pps, depths, *tg, ks, *reps, *stepProf)
			if err == nil && *membw {
				r.DecodeBytes = eng.Model().DecodeBytes()
				r.MemReadBps = memReadBandwidth(t, max(*reps, 3))
				r.BWShare = r.TGTokS * float64(r.DecodeBytes) / r.MemReadBps
			}
		}
		r.Ctx, r.KVBytes = eng.Ctx(), eng.State().KVBytes()
		eng.Close()
		if err != nil {
			return err
		}
		printBench(e, &r, *asJSON, ks)
	}
	return nil
}

func randomTokens(n, vocab int, seed uint64) []int32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(vocab))
	}
	return out
}

// benchPlain measures prefill and decode speed and the verification cost.
func benchPlain(ctx context.Context, eng *engine.Engine, r *Result, pps, depths []int, tg int, ks []int, reps int, stepProf bool) error {
	pp := pps[0]
	s := eng.State()
	nv := eng.Model().NVocab
	var cpuBest, first time.Duration // the best repetition's CPU time and the first's wall time, set by best
	best := func(f func() error) (time.Duration, error) {
		var b time.Duration
		for i := 0; i < reps; i++ {
			t0, c0 := time.Now(), cpuTime()
			if err := f(); err != nil {
				return 0, err
			}
			if i == 0 {
				first = time.Since(t0)
			}
			if d := time.Since(t0); i == 0 || d < b {
				b = d
			}
			if c := cpuTime() - c0; i == 0 || c < cpuBest {
				cpuBest = c
			}
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		}
		return b, nil
	}
	for i, pp := range pps {
		if pp == 0 {
			continue
		}
		toks := randomTokens(pp, nv, 1)
		d, err := best(func() error {
			s.Truncate(0)
			_, err := s.Forward(toks, false)
			return err
		})
		if err != nil {
			return err
		}
		if len(pps) > 1 {
			r.Prefill = append(r.Prefill, lengthRate{pp, float64(pp) / d.Seconds()})
		}
		if i > 0 {
			continue
		}
		r.PPTokS = float64(pp) / d.Seconds()
		if cpuBest > 0 {
			r.PPCPUTokS = float64(pp) / cpuBest.Seconds()
		}
		if stepProf {
			s.EnableProfile(true)
			s.Truncate(0)
			if _, err := s.Forward(toks, false); err != nil {
				return err
			}
			r.PrefillProfile = newStepProfile(s.StepProfile())
			s.EnableProfile(false)
		}
	}
	for i, depth := range depths {
		if tg == 0 {
			break
		}
		// The decode test starts after depth cache positions (filled once,
		// untimed): every token attends to them.
		s.Truncate(0)
		if depth > 0 {
			if _, err := s.Forward(randomTokens(depth, nv, 4), false); err != nil {
				return err
			}
		}
		toks := randomTokens(tg, nv, 2)
		read0 := s.ExpertBytesRead()
		decode := func() error {
			s.Truncate(depth)
			for i := range toks {
				if _, err := s.Forward(toks[i:i+1], false); err != nil {
					return err
				}
			}
			return nil
		}
		d, err := best(decode)
		if err != nil {
			return err
		}
		if len(depths) > 1 {
			r.Decode = append(r.Decode, lengthRate{depth, float64(tg) / d.Seconds()})
		}
		if i > 0 {
			continue
		}
		r.TGTokS = float64(tg) / d.Seconds()
		if m := eng.Model(); m.Experts > 0 {
			r.TGFirstTokS = float64(tg) / first.Seconds()
			r.ReadPerToken = m.DenseDecodeBytes() + (s.ExpertBytesRead()-read0)/int64(tg*reps)
			r.ReadShare = float64(r.ReadPerToken) / float64(weightBytes(m))
		}
		if cpuBest > 0 {
			r.TGCPUTokS = float64(tg) / cpuBest.Seconds()
		}
		if stepProf {
			s.EnableProfile(true)
			rq := runQueueWait()
			if err := decode(); err != nil {
				return err
			}
			r.StepProfile = newStepProfile(s.StepProfile())
			r.StepProfile.RunQueueUs = float64((runQueueWait() - rq).Microseconds()) / float64(tg)
			s.EnableProfile(false)
		}
	}
	// c(K): one pass over K tokens at the end of a pp-token context, all
	// logits computed (as verification needs), relative to one token.
	if len(ks) > 0 {
		ctxToks := randomTokens(max(pp, 1), nv, 3)
		s.Truncate(0)
		if _, err := s.Forward(ctxToks, false); err != nil {
			return err
		}
		base := s.Len()
		// The sizes take turns, round after round, and each keeps its
		// fastest single pass: on a shared machine the load drifts, and
		// measuring one size after the other would fold that drift into
		// the ratios.
		sizes := append([]int{1}, ks...)
		batches := map[int][]int32{}
		costs, cpuCosts := map[int]time.Duration{}, map[int]time.Duration{}
		for _, k := range sizes {
			batches[k] = randomTokens(k, nv, uint64(10+k))
		}
		for round := 0; round < max(reps, 3); round++ {
			for _, k := range sizes {
				for i := 0; i < 3; i++ {
					s.Truncate(base)
					t0, c0 := time.Now(), cpuTime()
					if _, err := s.Forward(batches[k], true); err != nil {
						return err
					}
					if d, ok := costs[k]; !ok || time.Since(t0) < d {
						costs[k] = time.Since(t0)
					}
					if c, ok := cpuCosts[k]; !ok || cpuTime()-c0 < c {
						cpuCosts[k] = cpuTime() - c0
					}
				}
				if err := ctx.Err(); err != nil {
					return err
				}
			}
		}
		r.VerifyCost = map[string]float64{}
		for _, k := range ks {
			r.VerifyCost[strconv.Itoa(k)] = costs[k].Seconds() / costs[1].Seconds()
		}
		if cpuCosts[1] > 0 {
			r.VerifyCostCPU = map[string]float64{}
			for _, k := range ks {
				r.VerifyCostCPU[strconv.Itoa(k)] = cpuCosts[k].Seconds() / cpuCosts[1].Seconds()
			}
		}
	}
	eng.Reset()
	return nil
}

// benchSpec compares greedy decoding of prompt with and without
// speculation (mode), or with an oracle drafter of acceptance alpha. The
// two arms take turns, round after round (after one warm-up run of each),
// so that the load of a shared machine falls on both alike; it reports
// each arm's best decode speed and every round's ratio.
func benchSpec(ctx context.Context, eng *engine.Engine, r *Result, prompt string, n int, alpha float64, rounds int, sp engine.SpecOptions) error {
	greedy := sample.Params{Temperature: 0, TopP: 1, RepeatPenalty: 1}
	var ref []int32
	var read int64 // the last run's expert bytes
	// With one thread every product runs on this goroutine: locked to its
	// thread, the thread's CPU time from the first token on is the
	// decoding's work, whatever else the machine runs.
	var clock func() time.Duration
	if r.Threads == 1 {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if threadCPU() > 0 {
			clock = threadCPU
		}
	}
	var cpuDecode time.Duration // the last run's decode CPU time (after its first token)
	runN := func(so engine.SpecOptions, n int) (engine.Stats, error) {
		eng.Reset()
		var ids []int32
		r0 := eng.State().ExpertBytesRead()
		var c0 time.Duration
		st, err := eng.Generate(ctx, engine.Request{Prompt: prompt, MaxTokens: n, Sampling: greedy, Spec: so,
			OnToken: func(id int32) {
				if len(ids) == 0 && clock != nil {
					c0 = clock()
				}
				ids = append(ids, id)
			}})
		cpuDecode = 0
		if clock != nil && len(ids) > 1 {
			cpuDecode = clock() - c0
		}
		read = eng.State().ExpertBytesRead() - r0
		if err == nil && ref == nil {
			ref = ids
		}
		return st, err
	}
	run := func(so engine.SpecOptions) (engine.Stats, error) { return runN(so, n) }
	plain := func() engine.SpecOptions { return engine.SpecOptions{Mode: engine.SpecOff} }
	if _, err := runN(plain(), 1); err != nil { // the prompt's experts alone
		return err
	}
	prefillRead := read
	ref = nil
	// perToken is the weight bytes a decoded token of the last run read:
	// the dense weights once per pass after the prefill, the experts the
	// passes ran.
	perToken := func(st engine.Stats) int64 {
		m := eng.Model()
		if m.Experts == 0 || st.GeneratedTokens < 2 {
			return 0
		}
		return (m.DenseDecodeBytes()*int64(max(st.TargetPasses-1, 0)) + read - prefillRead) / int64(st.GeneratedTokens-1)
	}
	if _, err := run(plain()); err != nil {
		return err
	}
	promptToks, err := eng.Tokens(&engine.Request{Prompt: prompt})
	if err != nil {
		return err
	}
	full := append(append([]int32{}, promptToks...), ref...)
	so := func() engine.SpecOptions { return sp }
	r.Spec = string(sp.Mode)
	if alpha >= 0 {
		a := alpha
		r.Oracle = &a
		r.Spec = "oracle"
		seed := uint64(0)
		so = func() engine.SpecOptions {
			seed++
			o := sp
			o.Drafter = spec.NewOracle(full, alpha, eng.Model().NVocab, seed)
			return o
		}
	}
	if _, err := run(so()); err != nil { // warm-up
		return err
	}
	// A round runs the arms in the order plain, speculative, speculative,
	// plain, and its ratio is that of the arms' total decoding times: a
	// load that rises or falls steadily through the round weighs on both
	// alike.
	var best engine.Stats
	var bestCPU time.Duration // the fastest speculative run's decode CPU time
	for i := 0; i < rounds; i++ {
		var t, tc [2]float64 // seconds per decoded token, summed: plain, speculative (wall, CPU)
		for _, arm := range [4]int{0, 1, 1, 0} {
			o := plain()
			if arm == 1 {
				o = so()
			}
			st, err := run(o)
			if err != nil {
				return err
			}
			t[arm] += 1 / st.DecodeTokS
			if cpuDecode > 0 && st.GeneratedTokens > 1 {
				per := cpuDecode.Seconds() / float64(st.GeneratedTokens-1)
				tc[arm] += per
				if arm == 0 {
					r.PlainCPUTokS = max(r.PlainCPUTokS, 1/per)
				} else if 1/per > r.SpecCPUTokS {
					r.SpecCPUTokS, bestCPU = 1/per, cpuDecode
					if st.TargetPasses > 1 {
						r.PassCPUMs = 1000 * bestCPU.Seconds() / float64(st.TargetPasses-1)
					}
				}
			}
			if arm == 0 {
				r.PlainTokS = max(r.PlainTokS, st.DecodeTokS)
				r.PlainReadPerToken = perToken(st)
			} else if st.DecodeTokS > best.DecodeTokS {
				best = st
				r.SpecReadPerToken = perToken(st)
			}
		}
		r.Rounds = append(r.Rounds, t[0]/t[1])
		if tc[0] > 0 && tc[1] > 0 {
			r.RoundsCPU = append(r.RoundsCPU, tc[0]/tc[1])
		}
	}
	if r.PlainCPUTokS > 0 && r.SpecCPUTokS > 0 {
		r.SpeedupCPU = r.SpecCPUTokS / r.PlainCPUTokS
	}
	r.SpecTokS = best.DecodeTokS
	r.Speedup = r.SpecTokS / r.PlainTokS
	r.Drafted, r.Accepted, r.TokensPerPass = best.Drafted, best.Accepted, best.TokensPerPass
	r.MeanTreeSize, r.Drafters, r.SelfSkip = best.MeanTreeSize, best.Drafters, best.SelfSkip
	if best.Drafted > 0 {
		r.Acceptance = float64(best.Accepted) / float64(best.Drafted)
	}
	if best.TargetPasses > 1 && best.DecodeTokS > 0 {
		// The decode time (after the first token, which the first pass
		// emits) over the passes after the first.
		r.PassMs = 1000 * float64(best.GeneratedTokens-1) / best.DecodeTokS / float64(best.TargetPasses-1)
	}
	return nil
}

func printBench(e *cli.Env, r *Result, asJSON bool, ks []int) {
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintf(e.Stdout, "%s\n", b)
		return
	}
	if r.Spec != "" {
		name := r.Spec
		if r.Oracle != nil {
			name = fmt.Sprintf("%s α=%.2f", r.Spec, *r.Oracle)
		}
		fmt.Fprintf(e.Stdout, "%s  t=%d  %s: plain %.2f tok/s, speculative %.2f tok/s (best of %d), speedup %.3f×, drafted %d, accepted %d (%.1f%%), %.2f tokens/pass, tree %.2f nodes, %.3f ms/pass; rounds",
			r.Model, r.Threads, name, r.PlainTokS, r.SpecTokS, len(r.Rounds), r.Speedup, r.Drafted, r.Accepted, 100*r.Acceptance, r.TokensPerPass, r.MeanTreeSize, r.PassMs)
		for _, x := range r.Rounds {
			fmt.Fprintf(e.Stdout, " %.3f×", x)
		}
		if len(r.Rounds) > 0 {
			fmt.Fprintf(e.Stdout, " (%.3f..%.3f)", slices.Min(r.Rounds), slices.Max(r.Rounds))
		}
		if r.SpeedupCPU > 0 {
			fmt.Fprintf(e.Stdout, "; CPU time: plain %.2f tok/s, speculative %.2f tok/s, speedup %.3f×, %.3f ms/pass, rounds", r.PlainCPUTokS, r.SpecCPUTokS, r.SpeedupCPU, r.PassCPUMs)
			for _, x := range r.RoundsCPU {
				fmt.Fprintf(e.Stdout, " %.3f×", x)
			}
		}
		if r.SpecReadPerToken > 0 {
			fmt.Fprintf(e.Stdout, "; reads %.1f MB/token plain, %.1f speculative", float64(r.PlainReadPerToken)/1e6, float64(r.SpecReadPerToken)/1e6)
		}
		fmt.Fprintln(e.Stdout)
		return
	}
	fmt.Fprintf(e.Stdout, "%s  t=%d  pp %.2f tok/s  tg %.2f tok/s", r.Model, r.Threads, r.PPTokS, r.TGTokS)
	for _, x := range r.Prefill {
		fmt.Fprintf(e.Stdout, "  pp%d %.2f", x.Tokens, x.TokS)
	}
	for _, x := range r.Decode {
		fmt.Fprintf(e.Stdout, "  tg@d%d %.2f", x.Tokens, x.TokS)
	}
	for _, k := range ks {
		if c, ok := r.VerifyCost[strconv.Itoa(k)]; ok {
			fmt.Fprintf(e.Stdout, "  c(%d) %.2f", k, c)
		}
	}
	for _, x := range []struct {
		what string
		p    *StepProfile
	}{{"prefill, per token", r.PrefillProfile}, {"decode step", r.StepProfile}} {
		if p := x.p; p != nil {
			fmt.Fprintf(e.Stdout, "\n  %s %.0f us: products %.0f + waiting %.0f, attention %.0f + waiting %.0f, quantize %.0f, serial %.0f, %.1f hand-offs",
				x.what, p.TotalUs, p.ProductsUs, p.ProductsWaitUs, p.AttnUs, p.AttnWaitUs, p.QuantUs, p.SerialUs, p.HandOffs)
			if p.RunQueueUs > 0 {
				fmt.Fprintf(e.Stdout, ", threads kept from a processor %.0f", p.RunQueueUs)
			}
		}
	}
	if r.MemReadBps > 0 {
		fmt.Fprintf(e.Stdout, "  reads %.1f MB/token, memory %.1f GB/s, decode uses %.0f%%", float64(r.DecodeBytes)/1e6, r.MemReadBps/1e9, 100*r.BWShare)
	}
	if r.KVBytes > 0 {
		fmt.Fprintf(e.Stdout, "  kv %s at ctx %d", models.ByteSize(r.KVBytes), r.Ctx)
	}
	if r.ReadPerToken > 0 {
		fmt.Fprintf(e.Stdout, "  reads %.1f MB/token (%.1f%% of the weights), first repetition tg %.2f tok/s", float64(r.ReadPerToken)/1e6, 100*r.ReadShare, r.TGFirstTokS)
	}
	if r.InFileBytes > 0 {
		fmt.Fprintf(e.Stdout, "  %s", r.Repack)
	}
	fmt.Fprintln(e.Stdout)
}

// cpuTime is the CPU time the process has used (0 where unknown).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// weightBytes is the bytes of the model's weight tensors in its file.
func weightBytes(m *model.Model) int64 {
	var n int64
	for i := range m.File.Tensors {
		n += m.File.Tensors[i].Size
	}
	return n
}
