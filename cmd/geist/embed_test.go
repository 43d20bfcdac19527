package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/geisten/geist/cmd/internal/models"
	"github.com/geisten/geist/engine/zoo"
)

// TestEmbedCLI: geist embed prints the vectors of its texts (within
// tolerance of llama.cpp's), inspect and models list say the file is an
// embedding model, and run refuses it with a clear error.
func TestEmbedCLI(t *testing.T) {
	g, path := zoo.LoadEmbedGolden(t, "tiny-nomic-embed-Q8_0")
	args := []string{"embed", "-m", path}
	for _, c := range g.Cases[:3] {
		args = append(args, c.Text)
	}
	code, out, errs := geist(t, "", args...)
	if code != 0 {
		t.Fatalf("geist embed: %d %s", code, errs)
	}
	var r embedOutput
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if r.Dim != 128 || len(r.Embeddings) != 3 || r.Model != "tiny-nomic-embed-Q8_0" {
		t.Fatalf("dim %d, %d vectors, model %q", r.Dim, len(r.Embeddings), r.Model)
	}
	for i, c := range g.Cases[:3] {
		if _, _, _, err := g.CompareEmbedding(r.Embeddings[i], c.Embedding); err != nil {
			t.Errorf("%q: %v", c.Text, err)
		}
	}
	if code, out, _ := geist(t, "", "embed", "-m", path, "--dimensions", "8", "hello"); code != 0 || !strings.Contains(out, `"dim":8`) {
		t.Errorf("--dimensions 8: %d %s", code, out)
	}
	if code, _, errs := geist(t, "", "embed", "-m", path, "--ctx", "8", "--no-truncate", strings.Repeat("word ", 20)); code != 2 || !strings.Contains(errs, "truncate") {
		t.Errorf("--no-truncate: %d %s", code, errs)
	}
	if code, _, errs := geist(t, "", "embed", "-m", zoo.Path(t, "models", serveModel), "hello"); code == 0 || !strings.Contains(errs, "not an embedding model") {
		t.Errorf("a text model: %d %s", code, errs)
	}
	if code, _, errs := geist(t, "", "run", "-m", path, "-n", "4", "hello"); code == 0 || !strings.Contains(errs, "is an embedding model") {
		t.Errorf("run: %d %s", code, errs)
	}
	dd := t.TempDir()
	if code, out, _ := geist(t, "", "serve", "--check", "-m", path, "--data-dir", dd, "--http", "127.0.0.1:0"); code == 0 || !strings.Contains(out, "give it as --embed-model") {
		t.Errorf("serve --check -m EMBEDDING: %d %s", code, out)
	}
	if code, out, _ := geist(t, "", "serve", "--check", "-m", zoo.Path(t, "models", serveModel), "--embed-model", path, "--data-dir", dd, "--http", "127.0.0.1:0"); code != 0 || !strings.Contains(out, "ok    embed   tiny-nomic-embed-Q8_0: nomic-bert") {
		t.Errorf("serve --check --embed-model: %d %s", code, out)
	}
	code, out, errs = geist(t, "", "inspect", "--json", path)
	var info inspectInfo
	if code != 0 || json.Unmarshal([]byte(out), &info) != nil || info.Task != "embedding" || !info.Supported || info.Pooling != "mean" || info.EmbeddingDim != 128 {
		t.Errorf("inspect: %d %s %s", code, out, errs)
	}
	m, err := models.Describe(path)
	if err != nil || m.Type != "embedding" || m.Problem != "" {
		t.Errorf("models.Describe: %+v %v", m, err)
	}
}
