package main

import (
	"encoding/json"
	"strings"
	"testing"

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
		var r benchResult
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
