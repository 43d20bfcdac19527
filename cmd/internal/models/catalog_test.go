package models

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/geisten/geist/cmd/internal/models/hftest"
	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/quant"
)

func TestLookupCatalog(t *testing.T) {
	for _, tc := range []struct{ name, source, stored string }{
		{"qwen2.5:0.5b", "hf:bartowski/Qwen2.5-0.5B-Instruct-GGUF/Qwen2.5-0.5B-Instruct-Q4_0.gguf", "qwen2.5:0.5b"},
		{"Qwen2.5:0.5B", "hf:bartowski/Qwen2.5-0.5B-Instruct-GGUF/Qwen2.5-0.5B-Instruct-Q4_0.gguf", "qwen2.5:0.5b"},
		{"qwen3:1.7b-q4_0", "hf:bartowski/Qwen_Qwen3-1.7B-GGUF/Qwen_Qwen3-1.7B-Q4_0.gguf", "qwen3:1.7b-q4_0"},
		{"qwen3:1.7b-Q8_0", "hf:bartowski/Qwen_Qwen3-1.7B-GGUF/Qwen_Qwen3-1.7B-Q8_0.gguf", "qwen3:1.7b-q8_0"},
		{"qwen3", "hf:bartowski/Qwen_Qwen3-1.7B-GGUF/Qwen_Qwen3-1.7B-Q4_0.gguf", "qwen3"},
		{"llama3.2:latest", "hf:bartowski/Llama-3.2-1B-Instruct-GGUF/Llama-3.2-1B-Instruct-Q4_0.gguf", "llama3.2"},
		{"llama3.2:1b", "hf:bartowski/Llama-3.2-1B-Instruct-GGUF/Llama-3.2-1B-Instruct-Q4_0.gguf", "llama3.2:1b"},
		{"gemma3:1b", "hf:bartowski/google_gemma-3-1b-it-GGUF/google_gemma-3-1b-it-Q4_0.gguf", "gemma3:1b"},
		{"granite4:1b-h", "hf:ibm-granite/granite-4.0-h-1b-GGUF/granite-4.0-h-1b-Q4_K_M.gguf", "granite4:1b-h"},
		{"granite4:micro-h-q8_0", "hf:ibm-granite/granite-4.0-h-micro-GGUF/granite-4.0-h-micro-Q8_0.gguf", "granite4:micro-h-q8_0"},
		{"granite4", "hf:ibm-granite/granite-4.0-h-1b-GGUF/granite-4.0-h-1b-Q4_K_M.gguf", "granite4"},
	} {
		e, ok := LookupCatalog(tc.name)
		if !ok || e.Source != tc.source || e.Name != tc.stored {
			t.Errorf("LookupCatalog(%q) = %+v, %v; want %s stored as %s", tc.name, e, ok, tc.source, tc.stored)
		}
		if _, err := CheckName(e.Name); err != nil {
			t.Errorf("%s: %v", e.Name, err)
		}
	}
	for _, bad := range []string{"qwen3:1.7b-q9_9", "qwen9:1b", "hf:a/b/c.gguf", ""} {
		if e, ok := LookupCatalog(bad); ok {
			t.Errorf("LookupCatalog(%q) = %+v, want none", bad, e)
		}
	}
	// Every entry parses as a source, has a supported architecture and a
	// name the store takes.
	seen := map[string]bool{}
	for _, e := range Catalog() {
		if seen[e.Name] {
			t.Errorf("%s listed twice", e.Name)
		}
		seen[e.Name] = true
		if _, err := ParseSource(e.Source, HF{}); err != nil {
			t.Errorf("%s: %v", e.Name, err)
		}
		if !strings.Contains(supportedArchs(), e.Architecture) {
			t.Errorf("%s: architecture %s is not one geist runs", e.Name, e.Architecture)
		}
	}
}

func TestResolveSourceSuggests(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"qwen2.5:0.5", `"qwen2.5:0.5b"`},
		{"qwen2.5:7b", `"qwen2.5:0.5b"`},
		{"lama3.2:1b", `"llama3.2:1b"`},
		{"qwen", `"qwen3"`},
		{"gemma3:1b-q5_k_s", `"gemma3:1b"`},
	} {
		_, _, err := ResolveSource(tc.in, HF{})
		var ue *UnknownCatalogError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "did you mean") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ResolveSource(%q): %v; want a suggestion of %s", tc.in, err, tc.want)
		}
	}
}

func TestPullCatalogName(t *testing.T) {
	srv := hftest.New(t)
	data := testModel(t, 21)
	srv.Put("bartowski/Qwen2.5-0.5B-Instruct-GGUF/main/Qwen2.5-0.5B-Instruct-Q4_0.gguf", hftest.File{Data: data})
	s := newStore(t)
	res, err := s.Pull(context.Background(), "qwen2.5:0.5b", PullOptions{HF: HF{Endpoint: srv.Endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Model.Name != "qwen2.5:0.5b" || res.Verified == "" {
		t.Errorf("result %+v: want qwen2.5:0.5b, verified", res)
	}
	checkStored(t, s, "qwen2.5:0.5b", data)
	if p, err := s.Resolve("qwen2.5:0.5b"); err != nil || p != s.file("qwen2.5:0.5b") {
		t.Errorf("Resolve = %q, %v", p, err)
	}
	// A catalog name not pulled yet says how to get it; a mistyped one
	// offers the close names.
	if _, err := s.Resolve("llama3.2:1b"); err == nil || !strings.Contains(err.Error(), "geist pull llama3.2:1b") {
		t.Errorf("Resolve(not pulled) = %v", err)
	}
	if _, err := s.Resolve("qwen2.5:0.5bb"); err == nil || !strings.Contains(err.Error(), `did you mean "qwen2.5:0.5b"`) {
		t.Errorf("Resolve(mistyped) = %v", err)
	}
	if _, err := os.Stat(s.file("qwen2.5:0.5b") + recordExt); err != nil {
		t.Error(err)
	}
}

func TestSimilar(t *testing.T) {
	got := Similar("serv", []string{"serve", "sessions", "run", "synth"}, 2)
	if len(got) == 0 || got[0] != "serve" {
		t.Errorf("Similar(serv) = %v", got)
	}
	if got := Similar("xyzzy", []string{"serve", "run"}, 2); len(got) != 0 {
		t.Errorf("Similar(xyzzy) = %v, want none", got)
	}
}

func supportedArchs() string {
	return strings.Join(append(model.SupportedArchs(), model.EncoderArchs()...), " ")
}

// TestCatalogAliases: a catalog model pulled under one of its names
// (llama3.2, the family's default) is found under the others
// (llama3.2:1b, llama3.2:latest, llama3.2:1b-q4_0), as Ollama's tags are;
// pulling it again under another name, or its digest under a name of
// one's own, stores no second copy (a hard link to the same file, nothing
// downloaded), and removing one name leaves the other.
func TestCatalogAliases(t *testing.T) {
	srv := hftest.New(t)
	data := testModel(t, 23)
	srv.Put("bartowski/Llama-3.2-1B-Instruct-GGUF/main/Llama-3.2-1B-Instruct-Q4_0.gguf", hftest.File{Data: data})
	s := newStore(t)
	hf := HF{Endpoint: srv.Endpoint()}
	if _, err := s.Pull(context.Background(), "llama3.2", PullOptions{HF: hf}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"llama3.2", "llama3.2:latest", "llama3.2:1b", "llama3.2:1b-q4_0", "LLAMA3.2:1B"} {
		if p, err := s.Resolve(name); err != nil || p != s.file("llama3.2") {
			t.Errorf("Resolve(%q) = %q, %v; want the stored llama3.2", name, p, err)
		}
	}
	if _, err := s.Resolve("llama3.2:1b-q8_0"); err == nil {
		t.Error("another quantization resolves to the stored file")
	}
	res, err := s.Pull(context.Background(), "llama3.2:1b", PullOptions{HF: hf})
	if err != nil {
		t.Fatal(err)
	}
	if !res.UpToDate || res.Model.Name != "llama3.2:1b" {
		t.Errorf("second pull: %+v, want up to date as llama3.2:1b", res)
	}
	if m, err := s.Get("llama3.2:1b"); err != nil || m.Digest != digest(data) || m.Size != int64(len(data)) {
		t.Errorf("llama3.2:1b: %+v, %v", m, err)
	}
	a, errA := os.Stat(s.file("llama3.2"))
	b, errB := os.Stat(s.file("llama3.2:1b"))
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		t.Errorf("the two names are not one file: %v %v", errA, errB)
	}
	// By digest: the same file under a name of one's own, its SHA-256
	// given, is the stored one too.
	src := "hf:bartowski/Llama-3.2-1B-Instruct-GGUF/Llama-3.2-1B-Instruct-Q4_0.gguf"
	if res, err := s.Pull(context.Background(), src, PullOptions{HF: hf, Name: "mine", SHA256: digest(data)}); err != nil || !res.UpToDate {
		t.Errorf("pull by digest: %+v, %v; want up to date", res, err)
	}
	if c, err := os.Stat(s.file("mine")); err != nil || !os.SameFile(a, c) {
		t.Errorf("mine is not the stored file: %v", err)
	}
	for _, n := range []string{"llama3.2", "mine"} {
		if err := s.Remove(n); err != nil {
			t.Fatal(err)
		}
	}
	checkStored(t, s, "llama3.2:1b", data)
}

// TestPullManifestOnce: a pull reports "pulling manifest" once, though
// it fetches the header first and then the rest (issue 37: /api/pull sent
// it twice).
func TestPullManifestOnce(t *testing.T) {
	srv := hftest.New(t)
	b := gguf.NewBuilder() // 2 MiB: more than the first request's header probe
	b.Set("general.architecture", "llama")
	b.Set("llama.block_count", uint32(1))
	b.Set("llama.embedding_length", uint32(512))
	b.Set("llama.feed_forward_length", uint32(1024))
	b.Set("llama.attention.head_count", uint32(4))
	if err := b.AddTensor("blk.0.ffn_up.weight", quant.F32, []int64{1024, 512}, make([]byte, 2<<20)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	srv.Put("bartowski/Qwen2.5-0.5B-Instruct-GGUF/main/Qwen2.5-0.5B-Instruct-Q4_0.gguf", hftest.File{Data: data})
	var statuses []string
	_, err := newStore(t).Pull(context.Background(), "qwen2.5:0.5b", PullOptions{HF: HF{Endpoint: srv.Endpoint()}, Progress: func(p Progress) {
		if len(statuses) == 0 || statuses[len(statuses)-1] != p.Status {
			statuses = append(statuses, p.Status)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.Join(statuses, "|"), StatusManifest); n != 1 || len(srv.CDNRequests()) < 2 {
		t.Errorf("%d manifests in %v (%d requests to the CDN)", n, statuses, len(srv.CDNRequests()))
	}
}

// TestCatalogEmbedding: the embedding models' names resolve to their
// publishers' files, a quantization spelled in lower case in the file name
// included, and report it in upper case.
func TestCatalogEmbedding(t *testing.T) {
	for _, c := range []struct{ name, arch, source, quant string }{
		{"all-minilm", "bert", "hf:leliuga/all-MiniLM-L6-v2-GGUF/all-MiniLM-L6-v2.Q8_0.gguf", "Q8_0"},
		{"all-minilm:latest", "bert", "hf:leliuga/all-MiniLM-L6-v2-GGUF/all-MiniLM-L6-v2.Q8_0.gguf", "Q8_0"},
		{"bge-small", "bert", "hf:CompendiumLabs/bge-small-en-v1.5-gguf/bge-small-en-v1.5-q8_0.gguf", "Q8_0"},
		{"bge-small:en-v1.5-f16", "bert", "hf:CompendiumLabs/bge-small-en-v1.5-gguf/bge-small-en-v1.5-f16.gguf", "F16"},
		{"nomic-embed-text", "nomic-bert", "hf:nomic-ai/nomic-embed-text-v1.5-GGUF/nomic-embed-text-v1.5.Q8_0.gguf", "Q8_0"},
		{"nomic-embed-text:v1.5-F16", "nomic-bert", "hf:nomic-ai/nomic-embed-text-v1.5-GGUF/nomic-embed-text-v1.5.f16.gguf", "F16"},
		{"qwen3-embedding:0.6b", "qwen3", "hf:Qwen/Qwen3-Embedding-0.6B-GGUF/Qwen3-Embedding-0.6B-Q8_0.gguf", "Q8_0"},
		{"embeddinggemma", "gemma-embedding", "hf:ggml-org/embeddinggemma-300M-GGUF/embeddinggemma-300M-Q8_0.gguf", "Q8_0"},
	} {
		e, ok := LookupCatalog(c.name)
		if !ok || e.Architecture != c.arch || e.Source != c.source || e.Quantization != c.quant {
			t.Errorf("%s: %+v %v", c.name, e, ok)
		}
	}
	if e, _ := LookupCatalog("qwen3"); e.Architecture != "qwen3" || e.Model != "qwen3:1.7b" {
		t.Errorf("qwen3 now resolves to %+v", e)
	}
}
