package main

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/cmd/internal/daemon/daemontest"
	"github.com/geisten/geist/engine/zoo"
)

// embedStore links the zoo's embedding models into a model store under
// their file names and returns the store directory.
func embedStore(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "models")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range zoo.EmbedModels {
		if err := os.Symlink(zoo.Path(t, "embed", "models", name+".gguf"), filepath.Join(dir, name+".gguf")); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(zoo.Path(t, "models", "tiny-llama-F16.gguf"), filepath.Join(dir, "tiny-llama-F16.gguf")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// postJSON posts body to url and returns the status and the answer.
func postJSON(t *testing.T, url string, body any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// TestServeHTTPEmbed: geist serve with a text model and --embed-model;
// /api/embed with every golden's texts in one request, each model named
// (loaded from the store on demand, two at most), within tolerance of
// llama.cpp's vectors; /api/embeddings, /v1/embeddings (float and base64,
// token arrays), truncate, dimensions, keep_alive and the refusals.
func TestServeHTTPEmbed(t *testing.T) {
	if daemontest.Emulated() {
		t.Skip("serve over HTTP: native only")
	}
	store := embedStore(t)
	addr, logs := serveHTTP(t, "-m", zoo.Path(t, "models", serveModel), "--ctx", "256", "--models-dir", store, "--embed-model", "tiny-bert-embed-F16")
	base := "http://" + addr
	for _, name := range zoo.EmbedModels {
		g, _ := zoo.LoadEmbedGolden(t, name)
		var texts []string
		want := 0
		for _, c := range g.Cases {
			texts = append(texts, c.Text)
			want += len(c.Tokens)
		}
		model := name
		if name == "tiny-bert-embed-F16" {
			model = "" // the --embed-model
		}
		code, body := postJSON(t, base+"/api/embed", map[string]any{"model": model, "input": texts, "keep_alive": "5m"})
		if code != 200 {
			t.Fatalf("%s: %d %s\n%s", name, code, body, logs)
		}
		var r struct {
			Model           string
			Embeddings      [][]float32
			TotalDuration   int64 `json:"total_duration"`
			LoadDuration    int64 `json:"load_duration"`
			PromptEvalCount int   `json:"prompt_eval_count"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		if r.Model != name || len(r.Embeddings) != len(texts) || r.PromptEvalCount != want || r.TotalDuration <= 0 {
			t.Errorf("%s: model %q, %d embeddings, %d tokens (want %d), total %d", name, r.Model, len(r.Embeddings), r.PromptEvalCount, want, r.TotalDuration)
			continue
		}
		for i, c := range g.Cases {
			if _, _, _, err := g.CompareEmbedding(r.Embeddings[i], c.Embedding); err != nil {
				t.Errorf("%s %q: %v", name, c.Text, err)
			}
		}
	}
	if !strings.Contains(logs.String(), "embedding model unloaded") {
		t.Error("no on-demand model was unloaded: more than two stayed loaded")
	}

	// The legacy endpoint and OpenAI's.
	g, _ := zoo.LoadEmbedGolden(t, "tiny-nomic-embed-Q8_0")
	text := g.Cases[1].Text
	code, body := postJSON(t, base+"/api/embeddings", map[string]any{"model": "tiny-nomic-embed-Q8_0", "prompt": text})
	var legacy struct{ Embedding []float32 }
	if json.Unmarshal(body, &legacy); code != 200 {
		t.Fatalf("/api/embeddings: %d %s", code, body)
	}
	if _, _, _, err := g.CompareEmbedding(legacy.Embedding, g.Cases[1].Embedding); err != nil {
		t.Errorf("/api/embeddings: %v", err)
	}
	for _, format := range []string{"float", "base64"} {
		code, body := postJSON(t, base+"/v1/embeddings", map[string]any{"model": "tiny-nomic-embed-Q8_0", "input": []any{text, g.Cases[1].Tokens}, "encoding_format": format})
		var o struct {
			Object string
			Model  string
			Data   []struct {
				Object    string
				Embedding json.RawMessage
				Index     int
			}
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
				TotalTokens  int `json:"total_tokens"`
			}
		}
		if code != 200 || json.Unmarshal(body, &o) != nil || len(o.Data) != 2 {
			t.Fatalf("/v1/embeddings %s: %d %s", format, code, body)
		}
		if o.Object != "list" || o.Model != "tiny-nomic-embed-Q8_0" || o.Usage.PromptTokens != 2*len(g.Cases[1].Tokens) || o.Data[1].Index != 1 || o.Data[0].Object != "embedding" {
			t.Errorf("/v1/embeddings %s: %s", format, body)
		}
		var vecs [2][]float32
		for i, d := range o.Data {
			if format == "float" {
				json.Unmarshal(d.Embedding, &vecs[i])
				continue
			}
			var s string
			json.Unmarshal(d.Embedding, &s)
			raw, err := base64.StdEncoding.DecodeString(s)
			if err != nil || len(raw)%4 != 0 {
				t.Fatalf("base64: %v", err)
			}
			for j := 0; j < len(raw); j += 4 {
				vecs[i] = append(vecs[i], math.Float32frombits(binary.LittleEndian.Uint32(raw[j:])))
			}
		}
		for i := range vecs {
			if _, _, _, err := g.CompareEmbedding(vecs[i], g.Cases[1].Embedding); err != nil {
				t.Errorf("/v1/embeddings %s, input %d: %v", format, i, err)
			}
		}
		if !slicesEqualBits(vecs[0], vecs[1]) {
			t.Errorf("/v1/embeddings %s: the text and its tokens differ", format)
		}
	}

	// Dimensions, truncate and the refusals.
	code, body = postJSON(t, base+"/api/embed", map[string]any{"input": "hello world", "dimensions": 16})
	var d struct{ Embeddings [][]float64 }
	if json.Unmarshal(body, &d); code != 200 || len(d.Embeddings) != 1 || len(d.Embeddings[0]) != 16 {
		t.Errorf("dimensions 16: %d %s", code, body)
	}
	long := strings.Repeat("hello world ", 400)
	for _, c := range []struct {
		path string
		body map[string]any
		code int
		says string
	}{
		{"/api/embed", map[string]any{"input": long, "truncate": false}, 400, "truncate"},
		{"/api/embed", map[string]any{"input": long}, 200, ""},
		{"/api/embed", map[string]any{"input": "x", "dimensions": 100000}, 400, "dimensions"},
		{"/api/embed", map[string]any{"input": 3}, 400, "input"},
		{"/api/embed", map[string]any{"input": []string{}}, 200, `"embeddings":[]`},
		{"/api/embed", map[string]any{"model": "no-such-model", "input": "x"}, 404, "no-such-model"},
		{"/api/embed", map[string]any{"model": "../../etc/passwd", "input": "x"}, 404, ""},
		{"/api/embed", map[string]any{"model": strings.TrimSuffix(serveModel, ".gguf"), "input": "x"}, 400, "generates text"},
		{"/api/embed", map[string]any{"model": "tiny-llama-F16", "input": "x"}, 400, "generates text"},
		{"/v1/embeddings", map[string]any{"input": []int{1, 99999}}, 400, "vocabulary"},
		{"/v1/embeddings", map[string]any{"input": "x", "encoding_format": "hex"}, 400, "encoding_format"},
		{"/v1/embeddings", map[string]any{}, 400, "input"},
		{"/api/embeddings", map[string]any{"prompt": ""}, 200, `"embedding":[]`},
	} {
		code, body := postJSON(t, base+c.path, c.body)
		if code != c.code || !strings.Contains(string(body), c.says) {
			t.Errorf("%s %v: %d %s, want %d saying %q", c.path, c.body, code, body, c.code, c.says)
		}
	}
	// The model loaded at start, named by its file's other name in the
	// store, is not loaded again.
	if err := os.Link(filepath.Join(store, "tiny-bert-embed-F16.gguf"), filepath.Join(store, "bert-alias.gguf")); err != nil {
		t.Error(err)
	} else {
		code, body := postJSON(t, base+"/api/embed", map[string]any{"model": "bert-alias", "input": "x"})
		if code != 200 || !strings.Contains(string(body), `"model":"tiny-bert-embed-F16"`) || !strings.Contains(string(body), `"load_duration":0`) {
			t.Errorf("another name of --embed-model: %d %s", code, body)
		}
	}
	if code, body := postJSON(t, base+"/api/show", map[string]any{"model": "tiny-nomic-embed-Q8_0"}); code != 200 || !strings.Contains(string(body), `"capabilities":["embedding"]`) {
		t.Errorf("/api/show of an embedding model: %d %.300s", code, body)
	}
	// keep_alive 0 unloads a model loaded on demand.
	code, body = postJSON(t, base+"/api/embed", map[string]any{"model": "tiny-gemma-embed-F16", "input": "x", "keep_alive": 0})
	if code != 200 {
		t.Fatalf("keep_alive 0: %d %s", code, body)
	}
	waitFor(t, 5*time.Second, "keep_alive 0 to unload", func() bool {
		return strings.Contains(logs.String(), `model=tiny-gemma-embed-F16 reason="keep_alive 0"`)
	})
}

func slicesEqualBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestServeHTTPEmbedClients: the official npm clients' embedding calls
// (ollama.embed, ollama.embeddings, openai.embeddings.create in base64 and
// float) against geist serve, within tolerance of llama.cpp's vectors.
func TestServeHTTPEmbedClients(t *testing.T) {
	if testing.Short() || daemontest.Emulated() {
		t.Skip("runs node and the npm clients: native only")
	}
	dir := npmDir(t)
	store := embedStore(t)
	addr, logs := serveHTTP(t, "-m", zoo.Path(t, "models", serveModel), "--ctx", "256", "--models-dir", store)
	for _, name := range []string{"tiny-qwen3-embed-Q8_0", "tiny-bert-embed-Q8_0"} {
		g, _ := zoo.LoadEmbedGolden(t, name)
		var texts []string
		for _, c := range g.Cases {
			texts = append(texts, c.Text)
		}
		tj, _ := json.Marshal(texts)
		out := runNode(t, dir, 2*time.Minute, logs, "testdata/http/embed.mjs", "http://"+addr, name, string(tj))
		var r struct {
			Ollama, OllamaOne, OpenAI [][]float32
			OllamaCount               int
			Legacy, OpenAIFloat       []float32
			OpenAIIndex               []int
			OpenAIUsage               map[string]int
			TooLong                   string
		}
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("embed.mjs printed %s: %v", out, err)
		}
		if len(r.Ollama) != len(texts) || len(r.OpenAI) != len(texts) || len(r.OllamaOne) != 1 {
			t.Fatalf("%s: %d ollama, %d openai vectors", name, len(r.Ollama), len(r.OpenAI))
		}
		for i, c := range g.Cases {
			for what, v := range map[string][]float32{"ollama.embed": r.Ollama[i], "openai.embeddings.create (base64)": r.OpenAI[i]} {
				if _, _, _, err := g.CompareEmbedding(v, c.Embedding); err != nil {
					t.Errorf("%s %s %q: %v", name, what, c.Text, err)
				}
			}
			if r.OpenAIIndex[i] != i {
				t.Errorf("index %v", r.OpenAIIndex)
			}
		}
		for what, v := range map[string][]float32{"ollama.embed one": r.OllamaOne[0], "ollama.embeddings": r.Legacy, "openai float": r.OpenAIFloat} {
			if !slicesEqualBits(v, r.Ollama[0]) {
				t.Errorf("%s %s differs from the batch's first vector", name, what)
			}
		}
		if !strings.HasPrefix(r.TooLong, "400 ") || r.OpenAIUsage["prompt_tokens"] == 0 {
			t.Errorf("%s: truncate false %q, usage %v", name, r.TooLong, r.OpenAIUsage)
		}
	}
}
