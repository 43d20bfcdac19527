package main

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/zoo"
)

// TestBenchHA: geist bench --ha replays Home Assistant turns against a
// running serve over both APIs: each turn a new conversation (its system
// prompt and tools restored or held, so the second turn's first call
// evaluates only the user's words), then a GetLiveContext call that
// prefills the live context behind the first call's prompt. A tiny model
// with Qwen 2.5's template (tools rendered into the system prompt), two
// turns, a few entities.
func TestBenchHA(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: ~6,000-token prefills, natively only")
	}
	model := withTemplate(t, zoo.Path(t, "models", "tiny-qwen2-Q4_0.gguf"), zooTemplate(t, "Qwen-Qwen2.5-7B-Instruct"))
	addr, logs := serveHTTP(t, "-m", model, "--ctx", "8192")
	for _, api := range []string{"openai", "ollama"} {
		code, out, errs := geist(t, "", "bench", "--ha", "--api", api, "--url", addr, "--turns", "2", "--entities", "8", "--ha-predict", "2", "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s\n%s", api, code, errs, logs.String())
		}
		var calls []haCall
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			var c haCall
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				t.Fatalf("%s: %q: %v", api, sc.Text(), err)
			}
			calls = append(calls, c)
		}
		if len(calls) != 4 {
			t.Fatalf("%s: %d calls, want 4:\n%s", api, len(calls), out)
		}
		for _, c := range calls {
			if c.TTFTms <= 0 || c.TotalMs < c.TTFTms || c.Prefilled <= 0 || c.Generated < 1 {
				t.Errorf("%s: %+v", api, c)
			}
		}
		first, live, next := calls[0], calls[1], calls[2]
		if api == "openai" {
			// The tools and the system prompt are served from the cache
			// from the second call on; the live call prefills the tool
			// result behind the first call's prompt.
			if live.Prompt <= first.Prompt || live.Cached < first.Prompt/2 || next.Cached < next.Prompt/2 || next.Prefilled > next.Prompt/4 {
				t.Errorf("openai: cache not used:\n%s", out)
			}
		} else if first.Prompt != -1 || first.Prefilled > 100 || next.Prefilled > 100 {
			// The same server again: everything but the user's words
			// is held or restored, and prompt_eval_count counts only the
			// tokens evaluated (as Ollama does).
			t.Errorf("ollama: want the evaluated tokens only:\n%s", out)
		}
		t.Logf("%s:\n%s", api, out)
	}
}

// TestParseProcCPU: bench --ha --server-pid reads utime+stime (ticks of
// 10 ms) after the command name, which may hold spaces and parentheses.
func TestParseProcCPU(t *testing.T) {
	line := "4242 (geist (x) y) S 1 4242 4242 0 -1 4194560 1234 0 0 0 250 17 0 0 20 0 9 0 123 456 789"
	if got := parseProcCPU(line); got != 2670 {
		t.Errorf("%q: %v ms, want 2670", line, got)
	}
	if parseProcCPU("garbage") != 0 || procCPU(0) != 0 {
		t.Error("no CPU time expected")
	}
}
