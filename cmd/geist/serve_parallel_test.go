package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/cmd/internal/daemon/daemontest"
	"github.com/geisten/geist/engine/zoo"
)

// TestServeParallelClients: geist serve --parallel 4 with the official
// npm clients. Three requests (greedy Ollama chat, seeded Ollama generate
// streamed, seeded OpenAI chat) sent together while a fourth streams each
// get exactly the text they got alone, and a title request sent during
// the stream is answered before the stream ends.
func TestServeParallelClients(t *testing.T) {
	if testing.Short() || daemontest.Emulated() {
		t.Skip("runs node and the npm clients: native only")
	}
	dir := npmDir(t)
	model := zoo.Path(t, "models", serveModel)
	addr, logs := serveHTTP(t, "-m", model, "--ctx", "2048", "--parallel", "4")
	out := runNode(t, dir, 2*time.Minute, logs, "testdata/http/parallel.mjs", "http://"+addr, "stories260K-Q4_0")
	if !strings.Contains(logs.String(), "parallel=4") {
		t.Errorf("serve did not load with 4 sequences:\n%s", logs.String())
	}
	var r struct {
		Alone, Together []string
		Title, Stream   float64
		StreamChars     int
		ThreeDone       float64
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("parallel.mjs printed %s: %v", out, err)
	}
	t.Logf("clients: %s", out)
	if len(r.Alone) != 3 || len(r.Together) != 3 {
		t.Fatalf("answers alone %q, together %q", r.Alone, r.Together)
	}
	for i := range r.Alone {
		if r.Alone[i] == "" || r.Together[i] != r.Alone[i] {
			t.Errorf("request %d: together %q, alone %q", i, r.Together[i], r.Alone[i])
		}
	}
	if r.Title >= r.Stream {
		t.Errorf("the title request ended at %v ms, the stream at %v ms", r.Title, r.Stream)
	}
}
