package engine

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/sample"
	"github.com/geisten/geist/engine/spec"
	"github.com/geisten/geist/engine/zoo"
)

// mtpGolden is a new2/golden/spec-mtp-*.json file: llama.cpp's own
// speculative decoding with the model's MTP block (llama-server
// --spec-type draft-mtp --spec-draft-n-max 3, greedy, a fresh server per
// run).
type mtpGolden struct {
	Model string `json:"model"`
	Cases []struct {
		Prompt       string  `json:"prompt"`
		PromptTokens []int32 `json:"prompt_tokens"`
		NPredict     int     `json:"n_predict"`
		Tokens       []int32 `json:"tokens"`
		Drafted      int     `json:"drafted"`
		Accepted     int     `json:"accepted"`
		TokensPlain  []int32 `json:"tokens_without_speculation"`
		StopType     string  `json:"stop_type"`
	} `json:"cases"`
}

// TestMTPMatchesLlamaCpp: for every tiny-qwen35-mtp file with a golden,
// geist's greedy output with the file's MTP block drafting equals plain
// decoding's and llama.cpp's; sampling with it draws plain decoding's
// tokens; and with llama.cpp's schedule (a fixed draft of 3, chains, no
// gate) the drafted and accepted counts are llama.cpp's.
func TestMTPMatchesLlamaCpp(t *testing.T) {
	files, _ := filepath.Glob(zoo.Path(t, "new2", "golden", "spec-mtp-*.json"))
	if len(files) == 0 {
		t.Skip("no new2/ MTP goldens in the zoo")
	}
	for _, gf := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(gf), "spec-mtp-"), ".json")
		if testing.Short() && !strings.HasSuffix(name, "Q4_0") {
			continue // under emulation: the Q4_0 file
		}
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(gf)
			if err != nil {
				t.Fatal(err)
			}
			var g mtpGolden
			if err := json.Unmarshal(b, &g); err != nil {
				t.Fatalf("%s: %v", gf, err)
			}
			e := loadFile(t, zoo.Path(t, "new2", "models", g.Model), Options{Ctx: 512, Batch: 64, SelfSpec: SelfSpecOff})
			if e.spec.nativeMode != SpecMTP {
				t.Fatalf("%s: the MTP block is not the model-native drafter (%q)", g.Model, e.spec.nativeMode)
			}
			for ci, c := range g.Cases {
				pt, err := e.Tokens(&Request{Prompt: c.Prompt})
				if err != nil {
					t.Fatal(err)
				}
				if !equal(pt, c.PromptTokens) {
					t.Fatalf("case %d: prompt tokens %v, llama.cpp's %v", ci, pt, c.PromptTokens)
				}
				n := c.NPredict
				if c.StopType == "eos" && len(c.Tokens) > 0 && len(c.TokensPlain) > 0 {
					// llama.cpp lists the end-of-text token it stopped at;
					// geist stops before it.
					c.Tokens, c.TokensPlain = c.Tokens[:len(c.Tokens)-1], c.TokensPlain[:len(c.TokensPlain)-1]
				}
				plain, _ := generateIDs(t, e, c.Prompt, n, SpecOptions{Mode: SpecOff}, greedy())
				same := equal(plain, c.TokensPlain) && equal(c.Tokens, c.TokensPlain)
				if !same {
					// A near-tie of the target itself, not of the drafter
					// (in tiny-qwen35-mtp-Q4_0, "Turn on the kitchen ..."
					// at token 8: 3997 against 1636, logprobs -2.482 and
					// -2.526 in the gen golden, whose tolerance is 0.306;
					// "Once upon a time" parts at token 32): the texts part
					// there, and the counts of different texts are not
					// comparable. The F16 file has no such tie.
					d := spec.CommonPrefix(plain, c.TokensPlain)
					t.Logf("case %d: plain decoding parts from llama.cpp's at token %d (%v, llama.cpp %v): a near-tie of the target; counts not compared", ci, d, plain[d:min(d+3, len(plain))], c.TokensPlain[d:min(d+3, len(c.TokensPlain))])
					if strings.HasSuffix(name, "F16") {
						t.Errorf("case %d: the F16 file's plain decoding parts from llama.cpp's", ci)
					}
				}
				sampled := sample.Params{Temperature: 0.8, TopK: 40, TopP: 0.95, RepeatPenalty: 1, Seed: uint64(11 + ci)}
				want, _ := generateIDs(t, e, c.Prompt, n, SpecOptions{Mode: SpecOff}, sampled)
				for _, sp := range []SpecOptions{{Mode: SpecMTP, Fixed: true, DraftMax: 4}, {Mode: SpecMTP}, {Mode: SpecAuto}} {
					if got, _ := generateIDs(t, e, c.Prompt, n, sp, sampled); !equal(got, want) {
						t.Fatalf("case %d, %+v, sampling: %v, plain decoding %v", ci, sp, got, want)
					}
				}
				for _, sp := range []SpecOptions{
					{Mode: SpecMTP, Fixed: true, Chains: true, DraftMax: 3}, {Mode: SpecMTP, Fixed: true, DraftMax: 5}, {Mode: SpecMTP}, {Mode: SpecAuto},
				} {
					got, st := generateIDs(t, e, c.Prompt, n, sp, greedy())
					if !equal(got, plain) {
						t.Fatalf("case %d, %+v: with the MTP drafter %v, plain decoding %v", ci, sp, got, plain)
					}
					if !sp.Chains {
						continue
					}
					ds := st.Drafters[string(SpecMTP)]
					t.Logf("case %d: drafted %d accepted %d (llama.cpp %d %d)", ci, ds.Drafted, ds.Accepted, c.Drafted, c.Accepted)
					if same && (ds.Drafted != c.Drafted || ds.Accepted != c.Accepted) {
						t.Errorf("case %d: drafted %d, accepted %d; llama.cpp %d, %d", ci, ds.Drafted, ds.Accepted, c.Drafted, c.Accepted)
					}
				}
			}
		})
	}
}

// TestPromptCacheRestoreQwen35MTP: with the file's MTP block loaded, a
// prefix restored from the prompt cache (which holds no MTP cache)
// continues as a cold run under every speculation mode: the block's cache
// restarts after the restored rows (or keeps them where they are the
// previous request's own) and drafting goes on.
func TestPromptCacheRestoreQwen35MTP(t *testing.T) {
	specs := []SpecOptions{{Mode: SpecMTP, Fixed: true, Chains: true, DraftMax: 3}, {Mode: SpecMTP, Fixed: true, DraftMax: 4}, {Mode: SpecAuto}, {Mode: SpecOff}}
	promptCacheRestore(t, []string{zoo.Path(t, "new2", "models", "tiny-qwen35-mtp-Q4_0.gguf"), zoo.Path(t, "new2", "models", "tiny-qwen35-mtp-F16.gguf")}, specs...)
}

// TestMTPDraftVocabExact: drafting from a cut draft vocabulary changes
// which drafts are made, never the output (greedy and sampled).
func TestMTPDraftVocabExact(t *testing.T) {
	e := loadFile(t, zoo.Path(t, "new2", "models", "tiny-qwen35-mtp-Q4_0.gguf"), Options{Ctx: 512, Batch: 64, SelfSpec: SelfSpecOff, DraftVocab: 1024})
	for ci, prompt := range []string{"Once upon a time", "def fibonacci(n):\n    if n < 2:\n        return n\n"} {
		for _, p := range []sample.Params{greedy(), {Temperature: 0.8, TopK: 40, TopP: 0.95, RepeatPenalty: 1, Seed: 5}} {
			want, _ := generateIDs(t, e, prompt, 40, SpecOptions{Mode: SpecOff}, p)
			drafted := 0
			for _, sp := range []SpecOptions{{Mode: SpecMTP, Fixed: true, Chains: true, DraftMax: 3}, {Mode: SpecMTP, Fixed: true, DraftMax: 5}, {Mode: SpecMTP}} {
				got, st := generateIDs(t, e, prompt, 40, sp, p)
				if !equal(got, want) {
					t.Fatalf("case %d, %+v, %+v: %v, plain decoding %v", ci, sp, p, got, want)
				}
				drafted += st.Drafters[string(SpecMTP)].Drafted
			}
			if drafted == 0 {
				t.Errorf("case %d: nothing drafted", ci)
			}
		}
	}
}

// TestMTPLazyFeed: a request that cannot draft with the MTP block
// (--spec off) only records the pairs of the positions it keeps; the next
// request that drafts runs them first, so its drafts are those of an
// engine whose block ran every pair at once: the same output, the same
// drafted and accepted counts.
func TestMTPLazyFeed(t *testing.T) {
	path := zoo.Path(t, "new2", "models", "tiny-qwen35-mtp-Q4_0.gguf")
	opt := Options{Ctx: 512, Batch: 64, SelfSpec: SelfSpecOff}
	lazy, eager := loadFile(t, path, opt), loadFile(t, path, opt)
	prompt := "Once upon a time, in a small house at the edge of the forest"
	a, _ := generateIDs(t, lazy, prompt, 24, SpecOptions{Mode: SpecOff}, greedy())
	b, _ := generateIDs(t, eager, prompt, 24, SpecOptions{Mode: SpecMTP}, greedy())
	if !equal(a, b) {
		t.Fatalf("plain %v, with the MTP drafter %v", a, b)
	}
	dl, de := lazy.spec.native.(*spec.MTPDraft), eager.spec.native.(*spec.MTPDraft)
	if st := dl.State(); st.Len() >= st.Fed() {
		t.Fatalf("plain decoding ran the MTP block: %d pairs run of %d fed", st.Len(), st.Fed())
	}
	// The drafts after the same history: the block's cache, run late or
	// at once, gives the same logits.
	hl, he := lazy.state.Tokens(), eager.state.Tokens()
	if !equal(hl, he) || len(hl) == 0 {
		t.Fatalf("the caches hold %v and %v", hl, he)
	}
	hist := append(append([]int32{}, hl...), a[len(a)-1])
	dl.SetGate(nil, 0)
	de.SetGate(nil, 0)
	x, _ := dl.Draft(hist, 4, make([]int32, 0, 4))
	y, _ := de.Draft(hist, 4, make([]int32, 0, 4))
	if len(x) == 0 || !equal(x, y) {
		t.Fatalf("drafts after a plain request %v, with the block fed all along %v", x, y)
	}
	N := len(hist) - 1
	sl, se := dl.State(), de.State()
	ll, err := sl.Step(hist[N], sl.H(N-1), N)
	if err != nil {
		t.Fatal(err)
	}
	ll = append([]float32{}, ll...)
	le, err := se.Step(hist[N], se.H(N-1), N)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ll {
		if math.Float32bits(ll[i]) != math.Float32bits(le[i]) {
			t.Fatalf("the first draft step's logit %d: %v after a plain request, %v with the block fed all along", i, ll[i], le[i])
		}
	}
	sl.Rewind(N)
	se.Rewind(N)
	for _, sp := range []SpecOptions{{Mode: SpecMTP, Fixed: true, Chains: true, DraftMax: 3}, {Mode: SpecMTP, Fixed: true, DraftMax: 4}} {
		for _, p := range []string{prompt, prompt + " there lived"} {
			x, sx := generateIDs(t, lazy, p, 24, sp, greedy())
			y, sy := generateIDs(t, eager, p, 24, sp, greedy())
			dx, dy := sx.Drafters[string(SpecMTP)], sy.Drafters[string(SpecMTP)]
			if !equal(x, y) || dx.Drafted != dy.Drafted || dx.Accepted != dy.Accepted || dx.Drafted == 0 {
				t.Fatalf("%+v %q: after a plain request %v (drafted %d, accepted %d); fed all along %v (%d, %d)", sp, p, x, dx.Drafted, dx.Accepted, y, dy.Drafted, dy.Accepted)
			}
		}
	}
}
