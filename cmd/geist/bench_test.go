package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/geisten/geist/cmd/internal/bench"
	"github.com/geisten/geist/cmd/internal/daemon/daemontest"
	"github.com/geisten/geist/engine/zoo"
)

// TestBenchJSON: bench prints one JSON object per thread count with the
// fields of the format, and --membw adds the bandwidth share.
func TestBenchJSON(t *testing.T) {
	model := zoo.Path(t, "models", "stories260K-Q4_0.gguf")
	code, out, errs := geist(t, "", "bench", "-m", model, "-p", "16", "-n", "8", "-t", "1,2", "--batch", "1,4", "-r", "1", "--json", "--membw")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), out)
	}
	for i, l := range lines {
		var r bench.Result
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if r.Threads != i+1 || r.PPTokS <= 0 || r.TGTokS <= 0 || r.VerifyCost["1"] != 1 || r.VerifyCost["4"] <= 0 {
			t.Errorf("line %d: %s", i, l)
		}
		if r.DecodeBytes <= 0 || r.MemReadBps <= 0 || r.BWShare <= 0 {
			t.Errorf("line %d: no bandwidth figures: %s", i, l)
		}
	}
}

// TestBenchLengths: -p and --depth take lists: every prompt length's
// prefill speed and every depth's decode speed.
func TestBenchLengths(t *testing.T) {
	model := zoo.Path(t, "models", "stories260K-Q4_0.gguf")
	code, out, errs := geist(t, "", "bench", "-m", model, "-p", "16,70", "--depth", "0,70", "-n", "4", "-t", "1", "--batch", "1", "-r", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r bench.Result
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Prefill) != 2 || r.Prefill[1].Tokens != 70 || r.Prefill[1].TokS <= 0 || len(r.Decode) != 2 || r.Decode[1].Tokens != 70 || r.Decode[1].TokS <= 0 || r.TGTokS != r.Decode[0].TokS {
		t.Errorf("%s", out)
	}
	code, out, _ = geist(t, "", "bench", "-m", model, "-p", "16,70", "--depth", "0,70", "-n", "4", "-t", "1", "--batch", "1", "-r", "1")
	if code != 0 || !strings.Contains(out, "pp70 ") || !strings.Contains(out, "tg@d70 ") {
		t.Errorf("exit %d: %s", code, out)
	}
}

// TestBenchSpecRounds: --oracle and --spec compare plain and speculative
// decoding in interleaved rounds and report every round's ratio, the
// tokens per pass and, for a skipped-layer draft, the skipped blocks.
func TestBenchSpecRounds(t *testing.T) {
	if daemontest.Emulated() {
		t.Skip("the rounds' bookkeeping is the same Go on every CPU (tested natively); under qemu it took 46 s of make test")
	}
	model := zoo.Path(t, "models", "stories260K-F32.gguf")
	for _, args := range [][]string{
		{"--oracle", "0.9", "--spec-fixed"},
		{"--spec", "self", "--spec-fixed", "--spec-chains"},
	} {
		code, out, errs := geist(t, "", append([]string{"bench", "-m", model, "-n", "24", "-t", "1", "-r", "2", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var r bench.Result
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &r); err != nil {
			t.Fatalf("%v: %v in %q", args, err, out)
		}
		if len(r.Rounds) != 2 || r.PlainTokS <= 0 || r.SpecTokS <= 0 || r.Drafted == 0 || r.TokensPerPass <= 1 || r.PassMs <= 0 {
			t.Errorf("%v: %s", args, out)
		}
		if args[1] == "self" && r.SelfSkip == "" {
			t.Errorf("%v: no skipped blocks named: %s", args, out)
		}
	}
}

// TestBenchStepProfile: --step-profile reports where a prefill pass's and
// a decode step's time goes, in text and in JSON.
func TestBenchStepProfile(t *testing.T) {
	model := zoo.Path(t, "models", "stories260K-Q4_0.gguf")
	code, out, errs := geist(t, "", "bench", "-m", model, "-p", "16", "-n", "8", "-t", "2", "--batch", "1", "-r", "1", "--step-profile")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"\n  prefill, per token ", "\n  decode step ", "products ", "hand-offs"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	code, out, errs = geist(t, "", "bench", "-m", model, "-p", "16", "-n", "8", "-t", "2", "--batch", "1", "-r", "1", "--step-profile", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r bench.Result
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &r); err != nil {
		t.Fatal(err)
	}
	for what, p := range map[string]*bench.StepProfile{"prefill": r.PrefillProfile, "decode": r.StepProfile} {
		if p == nil || p.TotalUs <= 0 || p.ProductsUs <= 0 || p.ProductsUs+p.AttnUs+p.QuantUs > p.TotalUs*1.01 {
			t.Errorf("%s profile: %+v", what, p)
		}
	}
}
