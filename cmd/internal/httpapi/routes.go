package httpapi

import (
	"net/http"
	"strings"
	"time"
)

// routes mounts geist's own handlers.
func (s *Server) routes() {
	s.builtinChecks()
	m := s.mux
	// Ollama.
	m.HandleFunc("GET /{$}", s.root)
	m.HandleFunc("HEAD /{$}", s.root)
	m.HandleFunc("GET /api/version", s.version)
	m.HandleFunc("HEAD /api/version", s.version)
	m.HandleFunc("GET /api/tags", s.tags)
	m.HandleFunc("GET /api/ps", s.ps)
	m.HandleFunc("POST /api/show", s.show)
	m.HandleFunc("POST /api/chat", s.switched(s.ollamaChat, true))
	m.HandleFunc("POST /api/generate", s.switched(s.ollamaGenerate, true))
	m.HandleFunc("POST /api/pull", s.pull)
	m.HandleFunc("POST /api/embed", s.ollamaEmbed)
	m.HandleFunc("POST /api/embeddings", s.ollamaEmbeddings)
	for _, p := range []string{"POST /api/create", "POST /api/copy", "DELETE /api/delete", "POST /api/push", "HEAD /api/blobs/{digest}", "POST /api/blobs/{digest}"} {
		m.HandleFunc(p, s.unsupported)
	}
	// OpenAI.
	m.HandleFunc("POST /v1/chat/completions", s.switched(s.openaiChat, false))
	m.HandleFunc("POST /v1/completions", s.switched(s.openaiCompletions, false))
	m.HandleFunc("GET /v1/models", s.openaiModels)
	m.HandleFunc("GET /v1/models/{model...}", s.openaiModel)
	m.HandleFunc("POST /v1/embeddings", s.openaiEmbeddings)
	// Operations.
	m.Handle("GET /metrics", s.metricsHandler())
	m.HandleFunc("GET /healthz", s.health(false))
	m.HandleFunc("GET /readyz", s.health(true))
	m.HandleFunc("/", s.notFound)
}

// root answers Ollama's liveness check ("Ollama is running", which
// clients and Home Assistant probe), or serves the page another front end
// mounted at GET /.
func (s *Server) root(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.page
	s.mu.Unlock()
	if h != nil && r.Method == http.MethodGet {
		h.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write([]byte("Ollama is running (geist " + s.cfg.Version + ")"))
	}
}

func (s *Server) version(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": ollamaVersion})
}

// ollamaVersion is the Ollama API version geist reports: clients check it
// for features (the Ollama JavaScript client, Open WebUI), so it names
// the Ollama release whose API geist follows; geist's own version is in
// /api/show and the Server header... and in "GET /".
const ollamaVersion = "0.12.0"

func (s *Server) unsupported(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotImplemented, r.Method+" "+r.URL.Path+" is not supported by geist: "+unsupportedWhy(r.URL.Path))
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	writeError(w, http.StatusNotFound, "404 page not found: "+r.Method+" "+r.URL.Path)
}

// modelDetails is Ollama's "details" object.
type modelDetails struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

func details(m *Model) modelDetails {
	d := modelDetails{Format: "gguf", Family: m.Family, ParameterSize: m.ParameterSize, QuantizationLevel: m.Quantization}
	if m.Family != "" {
		d.Families = []string{m.Family}
	}
	return d
}

// listedModel is an entry of /api/tags.
type listedModel struct {
	Name         string       `json:"name"`
	Model        string       `json:"model"`
	ModifiedAt   time.Time    `json:"modified_at"`
	Size         int64        `json:"size"`
	Digest       string       `json:"digest"`
	Details      modelDetails `json:"details"`
	Capabilities []string     `json:"capabilities,omitempty"`
}

// tags lists the models geist answers for: the loaded one, and with
// Config.Models every stored one, as Ollama lists all it has.
func (s *Server) tags(w http.ResponseWriter, r *http.Request) {
	list := []listedModel{}
	for _, m := range s.storedModels() {
		list = append(list, listedModel{Name: m.tagged(), Model: m.tagged(), ModifiedAt: m.ModifiedAt, Size: m.Size, Digest: m.Digest,
			Details: details(&m), Capabilities: m.Capabilities})
	}
	writeJSON(w, http.StatusOK, map[string][]listedModel{"models": list})
}

// runningModel is an entry of /api/ps.
type runningModel struct {
	Name          string       `json:"name"`
	Model         string       `json:"model"`
	Size          int64        `json:"size"`
	Digest        string       `json:"digest"`
	Details       modelDetails `json:"details"`
	ExpiresAt     time.Time    `json:"expires_at"`
	SizeVRAM      int64        `json:"size_vram"`
	ContextLength int          `json:"context_length"`
}

// neverExpires is the expires_at of the model, which stays loaded for the
// life of the process (Ollama's keep_alive -1).
var neverExpires = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)

// ps lists the loaded models: the one serve started with (while it is
// loaded: Config.First) and those loaded on demand, with when each will
// be unloaded.
func (s *Server) ps(w http.ResponseWriter, r *http.Request) {
	m := &s.cfg.Model
	exp, loaded := neverExpires, true
	if s.cfg.First != nil {
		exp, loaded = s.cfg.First.Expires()
	}
	list := []runningModel{}
	if loaded {
		list = append(list, runningModel{
			Name: m.tagged(), Model: m.tagged(), Size: m.Size, Digest: m.Digest, Details: details(m),
			ExpiresAt: exp.UTC(), ContextLength: m.ContextLength,
		})
	}
	if s.cfg.Models != nil {
		for _, rm := range s.cfg.Models.Running() {
			m := rm.Model
			list = append(list, runningModel{Name: m.tagged(), Model: m.tagged(), Size: m.Size, Digest: m.Digest, Details: details(&m),
				ExpiresAt: rm.ExpiresAt.UTC(), ContextLength: m.ContextLength})
		}
	}
	writeJSON(w, http.StatusOK, map[string][]runningModel{"models": list})
}

// unsupportedWhy says what geist does instead of an Ollama endpoint it
// does not have.
func unsupportedWhy(path string) string {
	switch {
	case path == "/api/delete":
		return "it does not delete models over HTTP; geist rm NAME on the machine removes a stored one"
	case path == "/api/create", path == "/api/copy", path == "/api/push", strings.HasPrefix(path, "/api/blobs"):
		return "models come from Hugging Face GGUF files: geist pull NAME|hf:OWNER/REPO/FILE.gguf (POST /api/pull) stores one, geist models catalog lists the names"
	}
	return "geist pull and geist list manage the stored models, which requests name to use them"
}
