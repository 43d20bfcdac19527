package zoo

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// EmbedModels are the tiny embedding models of embed/models (without
// .gguf); embed/golden/embed-NAME.json holds llama.cpp's vectors.
var EmbedModels = []string{
	"tiny-bert-embed-F16", "tiny-bert-embed-Q8_0",
	"tiny-nomic-embed-F16", "tiny-nomic-embed-Q8_0",
	"tiny-qwen3-embed-F16", "tiny-qwen3-embed-Q8_0",
	"tiny-gemma-embed-F16", "tiny-gemma-embed-Q8_0",
}

// EmbedGolden is an embed/golden file: llama-embedding's tokens and
// pooled, L2-normalized vector per text, and the tolerance to compare with.
type EmbedGolden struct {
	Model        string `json:"model"`
	Architecture string `json:"architecture"`
	Pooling      string `json:"pooling"`
	Tolerance    struct {
		MaxAbs    float64 `json:"max_abs"`
		MeanAbs   float64 `json:"mean_abs"`
		MinCosine float64 `json:"min_cosine"`
	} `json:"tolerance"`
	Cases []struct {
		Text      string    `json:"text"`
		NTokens   int       `json:"n_tokens"`
		Tokens    []int32   `json:"tokens"`
		Embedding []float64 `json:"embedding"`
	} `json:"cases"`
}

// LoadEmbedGolden reads embed/golden/embed-NAME.json and returns it with
// the path of embed/models/NAME.gguf (skipping the test when the zoo is
// absent).
func LoadEmbedGolden(t testing.TB, name string) (*EmbedGolden, string) {
	t.Helper()
	dir := Path(t, "embed")
	raw, err := os.ReadFile(filepath.Join(dir, "golden", "embed-"+name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var g EmbedGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(g.Cases) == 0 {
		t.Fatalf("%s: no cases", name)
	}
	return &g, filepath.Join(dir, "models", name+".gguf")
}

// CompareEmbedding checks got against want within the golden's
// tolerance: every component within max_abs, the mean absolute
// difference within mean_abs, the cosine at least min_cosine. It returns
// the figures and an error naming the first bound broken.
func (g *EmbedGolden) CompareEmbedding(got []float32, want []float64) (maxAbs, meanAbs, cos float64, err error) {
	if len(got) != len(want) {
		return 0, 0, 0, fmt.Errorf("%d values, want %d", len(got), len(want))
	}
	var dot, na, nb float64
	for i, w := range want {
		d := math.Abs(float64(got[i]) - w)
		maxAbs = max(maxAbs, d)
		meanAbs += d
		dot += float64(got[i]) * w
		na += float64(got[i]) * float64(got[i])
		nb += w * w
	}
	meanAbs /= float64(len(want))
	cos = dot / math.Sqrt(na*nb)
	tol := g.Tolerance
	switch {
	case !(maxAbs <= tol.MaxAbs):
		err = fmt.Errorf("max |diff| %.3g > %.3g", maxAbs, tol.MaxAbs)
	case !(meanAbs <= tol.MeanAbs):
		err = fmt.Errorf("mean |diff| %.3g > %.3g", meanAbs, tol.MeanAbs)
	case !(cos >= tol.MinCosine):
		err = fmt.Errorf("cosine %.9f < %.9f", cos, tol.MinCosine)
	}
	return maxAbs, meanAbs, cos, err
}
