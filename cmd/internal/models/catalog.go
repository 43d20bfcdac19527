package models

import (
	"fmt"
	"slices"
	"strings"
)

// The catalog: Ollama-style names (FAMILY:SIZE, FAMILY:SIZE-QUANT, FAMILY
// alone for the family's default size) for the GGUF files of Hugging Face
// repositories that geist runs. geist pull qwen2.5:0.5b fetches
// hf:bartowski/Qwen2.5-0.5B-Instruct-GGUF/Qwen2.5-0.5B-Instruct-Q4_0.gguf
// and stores it as qwen2.5:0.5b; -m and the HTTP API's model field then
// take that name. A file's SHA-256 is checked against the catalog's
// digest where it has one, else against the Hub's X-Linked-Etag.

// catalogModel is one model of the catalog, in every quantization its
// repository has.
type catalogModel struct {
	name    string   // FAMILY:SIZE
	arch    string   // general.architecture
	repo    string   // OWNER/REPO on Hugging Face
	rev     string   // branch, tag or commit ("" is main)
	file    string   // the file name, QUANT standing for the quantization ("Qwen2.5-0.5B-Instruct-QUANT.gguf")
	quants  []string // the quantizations, the default first ("Q4_0")
	about   string   // for people: what it is, roughly how big, where it fits
	dflt    bool     // the family's default size (FAMILY alone, FAMILY:latest)
	digests map[string]catalogFile
	// draft is the source (hf:OWNER/REPO/FILE.gguf) of the model-native
	// drafter published for it (a Gemma 4 assistant, an EAGLE-3 head),
	// pulled beside it as NAME.draft, which serve drafts with; "" for
	// none (a Qwen3.5 MTP file carries its drafter inside).
	draft string
}

// catalogFile is what is published of one file: its size and SHA-256.
type catalogFile struct {
	size   int64
	sha256 string
}

// catalog lists small instruct models of the architectures geist runs,
// Q4_0 first where the repository has it (geist's fastest kernels).
var catalog = []catalogModel{
	{name: "qwen2.5:0.5b", arch: "qwen2", repo: "bartowski/Qwen2.5-0.5B-Instruct-GGUF", file: "Qwen2.5-0.5B-Instruct-QUANT.gguf",
		quants: []string{"Q4_0", "Q4_K_M", "Q8_0"}, about: "Qwen2.5 0.5B Instruct, 353 MB (Q4_0); any board", dflt: true},
	{name: "qwen2.5:1.5b", arch: "qwen2", repo: "bartowski/Qwen2.5-1.5B-Instruct-GGUF", file: "Qwen2.5-1.5B-Instruct-QUANT.gguf",
		quants: []string{"Q4_0", "Q4_K_M", "Q8_0"}, about: "Qwen2.5 1.5B Instruct, ~0.9 GB (Q4_0); Pi 4 2 GB and up"},
	{name: "qwen2.5:3b", arch: "qwen2", repo: "bartowski/Qwen2.5-3B-Instruct-GGUF", file: "Qwen2.5-3B-Instruct-QUANT.gguf",
		quants: []string{"Q4_0", "Q4_K_M", "Q8_0"}, about: "Qwen2.5 3B Instruct, ~1.8 GB (Q4_0); Pi 4/5 4 GB and up"},
	{name: "qwen3:0.6b", arch: "qwen3", repo: "bartowski/Qwen_Qwen3-0.6B-GGUF", file: "Qwen_Qwen3-0.6B-QUANT.gguf",
		quants: []string{"Q4_0", "Q4_K_M", "Q8_0"}, about: "Qwen3 0.6B (thinking and tools), ~0.4 GB (Q4_0); any board"},
	{name: "qwen3:1.7b", arch: "qwen3", repo: "bartowski/Qwen_Qwen3-1.7B-GGUF", file: "Qwen_Qwen3-1.7B-QUANT.gguf",
		quants: []string{"Q4_0", "Q4_K_M", "Q8_0"}, about: "Qwen3 1.7B (thinking and tools), ~1.1 GB (Q4_0); Pi 4 2 GB and up", dflt: true},
	{name: "qwen3:4b", arch: "qwen3", repo: "bartowski/Qwen_Qwen3-4B-GGUF", file: "Qwen_Qwen3-4B-QUANT.gguf",
		quants: []string{"Q4_0", "Q4_K_M", "Q8_0"}, about: "Qwen3 4B (thinking and tools), ~2.4 GB (Q4_0); Pi 5 4 GB and up"},
	{name: "qwen3:30b-a3b", arch: "qwen3moe", repo: "unsloth/Qwen3-30B-A3B-GGUF", file: "Qwen3-30B-A3B-QUANT.gguf",
		quants: []string{"Q4_K_M", "Q2_K"}, about: "Qwen3 30B-A3B mixture of experts, 18.6 GB (Q4_K_M), 11 GB (Q2_K); Pi 5 16 GB"},
	// Qwen3.5 (gated DeltaNet hybrids: a quarter of the layers attend, so
	// long prompts cost a fraction of a dense model's KV cache). Unsloth's
	// repositories; no digests pinned (the Hub's X-Linked-Etag is checked).
	{name: "qwen3.5:0.8b", arch: "qwen35", repo: "unsloth/Qwen3.5-0.8B-GGUF", file: "Qwen3.5-0.8B-QUANT.gguf",
		quants: []string{"Q4_0", "Q4_K_M", "Q8_0"}, about: "Qwen3.5 0.8B (thinking and tools, DeltaNet hybrid), ~0.5 GB (Q4_0); any board", dflt: true},
	{name: "qwen3.5:2b", arch: "qwen35", repo: "unsloth/Qwen3.5-2B-GGUF", file: "Qwen3.5-2B-QUANT.gguf",
		quants: []string{"Q4_0", "Q4_K_M", "Q8_0"}, about: "Qwen3.5 2B (thinking and tools, DeltaNet hybrid), ~1.2 GB (Q4_0); Pi 4 4 GB and up"},
	{name: "qwen3.5:4b", arch: "qwen35", repo: "unsloth/Qwen3.5-4B-GGUF", file: "Qwen3.5-4B-QUANT.gguf",
		quants: []string{"Q4_0", "Q4_K_M", "Q8_0"}, about: "Qwen3.5 4B (thinking and tools, DeltaNet hybrid), ~2.5 GB (Q4_0); Pi 5 8 GB"},
	// The same model with its MTP block kept (the drafter of --spec mtp,
	// inside the file): Unsloth's "-MTP" conversion, whose files are named
	// as the plain repository's. Not pinned; the names as other projects
	// fetch them, not checked here (no network when this was written).
	{name: "qwen3.5:4b-mtp", arch: "qwen35", repo: "unsloth/Qwen3.5-4B-MTP-GGUF", file: "Qwen3.5-4B-QUANT.gguf",
		quants: []string{"Q4_K_M"}, about: "Qwen3.5 4B with its MTP drafting block (--spec mtp), ~2.7 GB (Q4_K_M); Pi 5 8 GB"},
	{name: "llama3.2:1b", arch: "llama", repo: "bartowski/Llama-3.2-1B-Instruct-GGUF", file: "Llama-3.2-1B-Instruct-QUANT.gguf",
		quants: []string{"Q4_0", "Q4_K_M", "Q8_0"}, about: "Llama 3.2 1B Instruct, 773 MB (Q4_0); any board", dflt: true},
	{name: "llama3.2:3b", arch: "llama", repo: "bartowski/Llama-3.2-3B-Instruct-GGUF", file: "Llama-3.2-3B-Instruct-QUANT.gguf",
		quants: []string{"Q4_0", "Q4_K_M", "Q8_0"}, about: "Llama 3.2 3B Instruct, ~1.9 GB (Q4_0); Pi 4/5 4 GB and up"},
	{name: "gemma3:1b", arch: "gemma3", repo: "bartowski/google_gemma-3-1b-it-GGUF", file: "google_gemma-3-1b-it-QUANT.gguf",
		quants: []string{"Q4_0", "Q4_K_M", "Q8_0"}, about: "Gemma 3 1B Instruct, ~0.7 GB (Q4_0); Pi 4 4 GB and up", dflt: true},
	{name: "gemma3:270m", arch: "gemma3", repo: "ggml-org/gemma-3-270m-it-GGUF", file: "gemma-3-270m-it-QUANT.gguf",
		quants: []string{"Q8_0"}, about: "Gemma 3 270M Instruct, 292 MB (Q8_0); any board"},
	// Gemma 4 E2B/E4B with Google's assistant drafters (gemma4-assistant,
	// --spec assistant) as llama.cpp's converter writes them (BF16, about
	// 170 MB); the community conversions name the architecture
	// gemma4_assistant and load nowhere. Neither the E4B target's nor the
	// drafters' file names were checked against the Hub here.
	{name: "gemma4:e2b", arch: "gemma4", repo: "ggml-org/gemma-4-E2B-it-GGUF", file: "gemma-4-E2B-it-QUANT.gguf",
		quants: []string{"Q4_0"}, about: "Gemma 4 E2B Instruct with its assistant drafter, ~3.2 GB (Q4_0) + 170 MB; Pi 5 8 GB", dflt: true,
		draft: "hf:srmiles/gemma-4-E2B-it-assistant-GGUF/gemma-4-E2B-it-assistant-official.bf16.gguf"},
	{name: "gemma4:e4b", arch: "gemma4", repo: "ggml-org/gemma-4-E4B-it-GGUF", file: "gemma-4-E4B-it-QUANT.gguf",
		quants: []string{"Q4_0"}, about: "Gemma 4 E4B Instruct with its assistant drafter, ~5 GB (Q4_0) + 172 MB; Pi 5 8 GB",
		draft: "hf:srmiles/gemma-4-E4B-it-assistant-GGUF/gemma-4-E4B-it-assistant-official.bf16.gguf"},
	{name: "lfm2:1.2b", arch: "lfm2", repo: "LiquidAI/LFM2-1.2B-GGUF", file: "LFM2-1.2B-QUANT.gguf",
		quants: []string{"Q4_0", "Q4_K_M", "Q8_0"}, about: "LFM2 1.2B, 696 MB (Q4_0); any board", dflt: true},
	{name: "granite3.3:2b", arch: "granite", repo: "ibm-granite/granite-3.3-2b-instruct-GGUF", file: "granite-3.3-2b-instruct-QUANT.gguf",
		quants: []string{"Q4_K_M", "Q8_0"}, about: "Granite 3.3 2B Instruct, 1.5 GB (Q4_K_M); Pi 4 4 GB and up", dflt: true},
	// Granite 4.0-H: Mamba-2 layers and a few attention layers (granitehybrid);
	// IBM's own GGUF repositories, not pinned to a revision or digests (the
	// names and sizes are those IBM lists; check them on the first pull).
	{name: "granite4:350m-h", arch: "granitehybrid", repo: "ibm-granite/granite-4.0-h-350m-GGUF", file: "granite-4.0-h-350m-QUANT.gguf",
		quants: []string{"Q4_K_M", "Q8_0"}, about: "Granite 4.0-H 350M (Mamba-2 hybrid, tools), ~0.2 GB (Q4_K_M); any board"},
	{name: "granite4:1b-h", arch: "granitehybrid", repo: "ibm-granite/granite-4.0-h-1b-GGUF", file: "granite-4.0-h-1b-QUANT.gguf",
		quants: []string{"Q4_K_M", "Q8_0"}, about: "Granite 4.0-H 1B (Mamba-2 hybrid, tools), ~0.9 GB (Q4_K_M); Pi 4 2 GB and up", dflt: true},
	{name: "granite4:micro-h", arch: "granitehybrid", repo: "ibm-granite/granite-4.0-h-micro-GGUF", file: "granite-4.0-h-micro-QUANT.gguf",
		quants: []string{"Q4_K_M", "Q8_0"}, about: "Granite 4.0-H Micro 3B (Mamba-2 hybrid, tools), ~1.9 GB (Q4_K_M); Pi 4/5 4 GB and up"},
	{name: "smollm3:3b", arch: "smollm3", repo: "ggml-org/SmolLM3-3B-GGUF", file: "SmolLM3-QUANT.gguf",
		quants: []string{"Q4_K_M", "Q8_0"}, about: "SmolLM3 3B, 1.9 GB (Q4_K_M); Pi 5 8 GB", dflt: true},
	{name: "phi4-mini:3.8b", arch: "phi3", repo: "bartowski/microsoft_Phi-4-mini-instruct-GGUF", file: "microsoft_Phi-4-mini-instruct-QUANT.gguf",
		quants: []string{"Q4_K_M", "Q4_0", "Q8_0"}, about: "Phi-4-mini Instruct 3.8B, 2.5 GB (Q4_K_M); Pi 5 8 GB", dflt: true},
	// Embedding models (geist embed, /api/embed, /v1/embeddings: Open
	// WebUI's RAG, Home Assistant). Ollama's names; the GGUF repositories
	// as their publishers name the files (a quantization spelled as in the
	// file name: f16, q8_0). Not pinned to digests: written without network
	// access, the Hub's X-Linked-Etag is checked on the first pull.
	{name: "all-minilm:22m", arch: "bert", repo: "leliuga/all-MiniLM-L6-v2-GGUF", file: "all-MiniLM-L6-v2.QUANT.gguf",
		quants: []string{"Q8_0", "F16"}, about: "all-MiniLM-L6-v2 sentence embeddings (384 values, 512 tokens), ~25 MB (Q8_0); any board", dflt: true},
	{name: "bge-small:en-v1.5", arch: "bert", repo: "CompendiumLabs/bge-small-en-v1.5-gguf", file: "bge-small-en-v1.5-QUANT.gguf",
		quants: []string{"q8_0", "f16"}, about: "BGE small en v1.5 embeddings (384 values, 512 tokens), ~36 MB (Q8_0); any board", dflt: true},
	{name: "nomic-embed-text:v1.5", arch: "nomic-bert", repo: "nomic-ai/nomic-embed-text-v1.5-GGUF", file: "nomic-embed-text-v1.5.QUANT.gguf",
		quants: []string{"Q8_0", "f16", "Q4_K_M"}, about: "Nomic Embed Text v1.5 (768 values, 2048 tokens; prefix texts with search_query: or search_document:), ~146 MB (Q8_0); any board", dflt: true},
	{name: "qwen3-embedding:0.6b", arch: "qwen3", repo: "Qwen/Qwen3-Embedding-0.6B-GGUF", file: "Qwen3-Embedding-0.6B-QUANT.gguf",
		quants: []string{"Q8_0", "f16"}, about: "Qwen3-Embedding 0.6B (1024 values, multilingual), ~640 MB (Q8_0); Pi 4 2 GB and up", dflt: true},
	{name: "embeddinggemma:300m", arch: "gemma-embedding", repo: "ggml-org/embeddinggemma-300M-GGUF", file: "embeddinggemma-300M-QUANT.gguf",
		quants: []string{"Q8_0"}, about: "EmbeddingGemma 300M (768 values, dimensions 512/256/128 too, multilingual), ~330 MB (Q8_0); any board", dflt: true},
}

// CatalogEntry is one pullable name of the catalog: a model in one
// quantization.
type CatalogEntry struct {
	Name         string `json:"name"`         // as the user typed it, canonical (qwen3:1.7b, qwen3:1.7b-q8_0)
	Model        string `json:"model"`        // FAMILY:SIZE
	Quantization string `json:"quantization"` // Q4_0, ...
	Default      bool   `json:"default"`      // the model's default quantization
	Architecture string `json:"architecture"`
	Source       string `json:"source"` // hf:OWNER/REPO[@REV]/FILE
	Size         int64  `json:"size,omitempty"`
	SHA256       string `json:"sha256,omitempty"`
	About        string `json:"about"`
	// Draft is the source of the model-native drafter pulled beside the
	// model as NAME.draft ("": none).
	Draft string `json:"draft,omitempty"`
}

func (m *catalogModel) entry(name, quant string) CatalogEntry {
	file := strings.Replace(m.file, "QUANT", quant, 1)
	repo := m.repo
	if m.rev != "" {
		repo += "@" + m.rev
	}
	e := CatalogEntry{Name: name, Model: m.name, Quantization: strings.ToUpper(quant), Default: quant == m.quants[0],
		Architecture: m.arch, Source: "hf:" + repo + "/" + file, About: m.about, Draft: m.draft}
	if d, ok := m.digests[quant]; ok {
		e.Size, e.SHA256 = d.size, d.sha256
	}
	return e
}

// LookupCatalog finds a catalog name: FAMILY:SIZE (the default
// quantization), FAMILY:SIZE-QUANT (any case: qwen3:1.7b-q4_k_m),
// FAMILY or FAMILY:latest (the family's default size). ok is false for a
// name the catalog does not have.
func LookupCatalog(name string) (CatalogEntry, bool) {
	n := strings.ToLower(strings.TrimSpace(name))
	n = strings.TrimSuffix(n, ":latest")
	for i := range catalog {
		m := &catalog[i]
		family, _, _ := strings.Cut(m.name, ":")
		switch {
		case n == m.name || n == family && m.dflt:
			return m.entry(n, m.quants[0]), true
		case strings.HasPrefix(n, m.name+"-"):
			q := strings.TrimPrefix(n, m.name+"-")
			for _, want := range m.quants {
				if strings.EqualFold(q, want) {
					return m.entry(n, want), true
				}
			}
		}
	}
	return CatalogEntry{}, false
}

// catalogAliases returns the catalog names of the file name stands for
// (llama3.2, llama3.2:1b and llama3.2:1b-q4_0 are one file), name's own
// canonical form first; none when name is not a catalog name.
func catalogAliases(name string) []string {
	e, ok := LookupCatalog(name)
	if !ok {
		return nil
	}
	out := []string{e.Name}
	for i := range catalog {
		m := &catalog[i]
		family, _, _ := strings.Cut(m.name, ":")
		forms := []string{m.name, family}
		for _, q := range m.quants {
			forms = append(forms, m.name+"-"+strings.ToLower(q))
		}
		for _, f := range forms {
			if a, ok := LookupCatalog(f); ok && a.Source == e.Source && !slices.Contains(out, a.Name) {
				out = append(out, a.Name)
			}
		}
	}
	return out
}

// IsCatalogName says whether name has the shape of a catalog name
// (FAMILY:TAG) rather than of a source or a file.
func IsCatalogName(name string) bool {
	if strings.HasPrefix(name, "hf:") || strings.Contains(name, "/") || strings.HasSuffix(name, Ext) {
		return false
	}
	f, tag, ok := strings.Cut(name, ":")
	return ok && f != "" && tag != "" && !strings.Contains(tag, ":")
}

// Catalog lists every name of the catalog: each model in each of its
// quantizations, the default one named FAMILY:SIZE.
func Catalog() []CatalogEntry {
	var out []CatalogEntry
	for i := range catalog {
		m := &catalog[i]
		for j, q := range m.quants {
			name := m.name
			if j > 0 {
				name += "-" + strings.ToLower(q)
			}
			out = append(out, m.entry(name, q))
		}
	}
	return out
}

// catalogNames are the names people type: FAMILY:SIZE and the
// families with a default.
func catalogNames() []string {
	var out []string
	for _, e := range Catalog() {
		out = append(out, e.Name)
	}
	for _, m := range catalog {
		if m.dflt {
			f, _, _ := strings.Cut(m.name, ":")
			out = append(out, f)
		}
	}
	return out
}

// UnknownCatalogError is a FAMILY:TAG name the catalog does not have.
type UnknownCatalogError struct {
	Name    string
	Similar []string // the closest catalog names
}

func (e *UnknownCatalogError) Error() string {
	msg := fmt.Sprintf("%q is not in geist's catalog", e.Name)
	if len(e.Similar) > 0 {
		msg += "; did you mean " + orList(e.Similar) + "?"
	}
	return msg + " (geist models catalog lists the names; geist pull also takes hf:OWNER/REPO/FILE.gguf or a URL)"
}

// resolveCatalog turns a catalog name into its source, or fails with the
// close matches for a FAMILY:TAG name the catalog does not have.
func resolveCatalog(name string) (CatalogEntry, error) {
	if e, ok := LookupCatalog(name); ok {
		return e, nil
	}
	return CatalogEntry{}, &UnknownCatalogError{Name: name, Similar: Similar(name, catalogNames(), 3)}
}

// Similar returns up to n of candidates closest to s (edit distance, case
// ignored; a candidate that s is a prefix of, or that shares s's family,
// counts as close), the closest first. Nothing farther than a third of
// the longer string is returned.
func Similar(s string, candidates []string, n int) []string {
	type scored struct {
		c string
		d int
	}
	ls := strings.ToLower(s)
	lfam, _, _ := strings.Cut(ls, ":")
	var out []scored
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if lc == ls {
			continue
		}
		d := editDistance(ls, lc)
		limit := max(len(ls), len(lc))/3 + 1
		cfam, _, _ := strings.Cut(lc, ":")
		switch {
		case strings.Contains(ls, ":") && cfam == lfam:
			// The family's other names first (qwen2.5:7b: qwen2.5's,
			// then qwen3.5's), the closest of them first (its sizes
			// before their quantization tags).
			out = append(out, scored{c, d - 1<<20})
			continue
		case len(ls) >= 3 && strings.HasPrefix(lc, ls):
			d = min(d, limit)
		}
		if d <= limit {
			out = append(out, scored{c, d})
		}
	}
	slices.SortStableFunc(out, func(a, b scored) int { return a.d - b.d })
	var names []string
	for _, o := range out {
		if !slices.Contains(names, o.c) {
			names = append(names, o.c)
		}
		if len(names) == n {
			break
		}
	}
	return names
}

// editDistance is the Levenshtein distance of two strings, by bytes.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// orList writes names as `"a", "b" or "c"`.
func orList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}
