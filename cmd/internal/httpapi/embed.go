package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Embeddings: Ollama's /api/embed and /api/embeddings and OpenAI's
// /v1/embeddings, answered by Config.Embedder with an embedding model
// named by the request (or the one serve was started with). They do not
// go through the core's generation queue: an embedding model is another
// model, and the embedder runs one computation at a time.

// EmbedInput is one input: a text, or (Tokens non-nil) the model's token
// ids taken as they are.
type EmbedInput struct {
	Text   string
	Tokens []int32
}

// Embedder computes embeddings for the HTTP API.
type Embedder interface {
	Embed(ctx context.Context, r EmbedRequest) (EmbedResult, error)
}

// EmbedRequest is one request of any of the three endpoints.
type EmbedRequest struct {
	// Model is the name the request gives ("" when it names none).
	Model  string
	Inputs []EmbedInput
	// Truncate cuts inputs longer than the model's context; false
	// refuses them (ErrEmbedInput).
	Truncate bool
	// Dimensions, if positive, shortens the vectors.
	Dimensions int
	// KeepAlive is the request's keep_alive as sent ("" when absent): "0"
	// (any zero duration) asks to unload a model loaded for the request
	// after it.
	KeepAlive string
}

// EmbedResult is what the embedder answers.
type EmbedResult struct {
	Model        string // the name to answer with
	Embeddings   [][]float32
	Tokens       int
	LoadDuration time.Duration
}

// Errors an Embedder returns besides the context's (the client left).
var (
	// ErrEmbedInput: an input that cannot be embedded (400): too many,
	// too long without truncation, a token outside the vocabulary, a
	// dimension out of range.
	ErrEmbedInput = errors.New("bad embedding input")
	// ErrEmbedModelNotFound: no stored model of that name (404).
	ErrEmbedModelNotFound = errors.New("embedding model not found")
	// ErrNotEmbeddingModel: the model named generates text (400).
	ErrNotEmbeddingModel = errors.New("model does not compute embeddings")
	// ErrEmbedBusy: the embedder cannot take the request now (503).
	ErrEmbedBusy = errors.New("embedder busy")
)

// embedStatus maps an embedder's error to an HTTP status.
func embedStatus(err error) int {
	switch {
	case errors.Is(err, ErrEmbedInput), errors.Is(err, ErrNotEmbeddingModel):
		return http.StatusBadRequest
	case errors.Is(err, ErrEmbedModelNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrEmbedBusy):
		return http.StatusServiceUnavailable
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return 499 // the client went away; nobody reads this
	}
	return http.StatusInternalServerError
}

// noEmbedder answers 501 when serve has no embedder; true when it did.
func (s *Server) noEmbedder(w http.ResponseWriter, r *http.Request, write errorWriter) bool {
	if s.cfg.Embedder != nil {
		return false
	}
	write(w, http.StatusNotImplemented, r.Method+" "+r.URL.Path+" is not supported by this geist serve: it has no embedder (start it with --embed-model NAME: all-minilm, nomic-embed-text, bge-small, qwen3-embedding:0.6b or embeddinggemma; geist pull NAME fetches one)")
	return true
}

// embedAnswer runs r on the embedder and writes the error in write's
// shape; ok is false when it did.
func (s *Server) embedAnswer(w http.ResponseWriter, r *http.Request, er EmbedRequest, write errorWriter) (EmbedResult, bool) {
	res, err := s.cfg.Embedder.Embed(r.Context(), er)
	if err != nil {
		status := embedStatus(err)
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", strconv.Itoa(int((s.cfg.RetryAfter+time.Second-1)/time.Second)))
		}
		write(w, status, err.Error())
		return EmbedResult{}, false
	}
	return res, true
}

// keepAliveText is keep_alive as the embedder sees it: a JSON string's
// contents or a number's text, "" when absent or null.
func keepAliveText(raw json.RawMessage) string {
	t := strings.TrimSpace(string(raw))
	if t == "" || t == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return t
}

// ollamaEmbedRequest is /api/embed's body.
type ollamaEmbedRequest struct {
	Model      string                     `json:"model"`
	Input      json.RawMessage            `json:"input"`
	Truncate   *bool                      `json:"truncate"`
	Dimensions int                        `json:"dimensions"`
	KeepAlive  json.RawMessage            `json:"keep_alive"`
	Options    map[string]json.RawMessage `json:"options"`
}

type ollamaEmbedResponse struct {
	Model           string      `json:"model"`
	Embeddings      [][]float32 `json:"embeddings"`
	TotalDuration   int64       `json:"total_duration"`
	LoadDuration    int64       `json:"load_duration"`
	PromptEvalCount int         `json:"prompt_eval_count"`
}

// ollamaEmbed is POST /api/embed: input is a string or an array of
// strings (none: an empty answer, as Ollama gives).
func (s *Server) ollamaEmbed(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if s.noEmbedder(w, r, writeError) {
		return
	}
	var c ollamaEmbedRequest
	if eb := s.decode(w, r, &c); eb != nil {
		writeError(w, eb.status, eb.msg)
		return
	}
	var texts []string
	switch in := bytes.TrimSpace(c.Input); {
	case len(in) == 0 || string(in) == "null":
	case in[0] == '"':
		var t string
		if err := json.Unmarshal(in, &t); err != nil {
			writeError(w, http.StatusBadRequest, "input: "+jsonError(err))
			return
		}
		if t != "" {
			texts = []string{t}
		}
	case in[0] == '[':
		if err := json.Unmarshal(in, &texts); err != nil {
			writeError(w, http.StatusBadRequest, "input must be a string or an array of strings: "+jsonError(err))
			return
		}
	default:
		writeError(w, http.StatusBadRequest, "input must be a string or an array of strings")
		return
	}
	if len(texts) == 0 {
		writeJSON(w, http.StatusOK, ollamaEmbedResponse{Model: c.Model, Embeddings: [][]float32{}})
		return
	}
	truncate := c.Truncate == nil || *c.Truncate
	inputs := make([]EmbedInput, len(texts))
	for i, t := range texts {
		inputs[i].Text = t
	}
	res, ok := s.embedAnswer(w, r, EmbedRequest{Model: c.Model, Inputs: inputs, Truncate: truncate, Dimensions: c.Dimensions, KeepAlive: keepAliveText(c.KeepAlive)}, writeError)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, ollamaEmbedResponse{Model: res.Model, Embeddings: res.Embeddings,
		TotalDuration: time.Since(start).Nanoseconds(), LoadDuration: res.LoadDuration.Nanoseconds(), PromptEvalCount: res.Tokens})
}

// ollamaEmbeddingsRequest is the legacy /api/embeddings' body.
type ollamaEmbeddingsRequest struct {
	Model     string                     `json:"model"`
	Prompt    string                     `json:"prompt"`
	KeepAlive json.RawMessage            `json:"keep_alive"`
	Options   map[string]json.RawMessage `json:"options"`
}

// ollamaEmbeddings is the legacy POST /api/embeddings: one prompt, one
// embedding (an empty one for an empty prompt, as Ollama).
func (s *Server) ollamaEmbeddings(w http.ResponseWriter, r *http.Request) {
	if s.noEmbedder(w, r, writeError) {
		return
	}
	var c ollamaEmbeddingsRequest
	if eb := s.decode(w, r, &c); eb != nil {
		writeError(w, eb.status, eb.msg)
		return
	}
	if c.Prompt == "" {
		writeJSON(w, http.StatusOK, map[string][]float64{"embedding": {}})
		return
	}
	res, ok := s.embedAnswer(w, r, EmbedRequest{Model: c.Model, Inputs: []EmbedInput{{Text: c.Prompt}}, Truncate: true, KeepAlive: keepAliveText(c.KeepAlive)}, writeError)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string][]float32{"embedding": res.Embeddings[0]})
}

// openaiEmbeddingsRequest is /v1/embeddings' body.
type openaiEmbeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     int             `json:"dimensions"`
	User           string          `json:"user"`
}

type openaiEmbedding struct {
	Object    string `json:"object"`
	Embedding any    `json:"embedding"` // []float32 or a base64 string
	Index     int    `json:"index"`
}

type openaiEmbeddingsResponse struct {
	Object string            `json:"object"`
	Data   []openaiEmbedding `json:"data"`
	Model  string            `json:"model"`
	Usage  struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// openaiInputs reads OpenAI's input: a string, an array of strings, an
// array of token ids, or an array of arrays of token ids.
func openaiInputs(raw json.RawMessage) ([]EmbedInput, error) {
	in := bytes.TrimSpace(raw)
	if len(in) == 0 || string(in) == "null" {
		return nil, badf("input is required: a string, an array of strings or of token arrays")
	}
	if in[0] == '"' {
		var t string
		if err := json.Unmarshal(in, &t); err != nil {
			return nil, badf("input: %s", jsonError(err))
		}
		return []EmbedInput{{Text: t}}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(in, &items); err != nil {
		return nil, badf("input must be a string, an array of strings or of token arrays")
	}
	if len(items) == 0 {
		return nil, badf("input is an empty array")
	}
	if first := bytes.TrimSpace(items[0]); len(first) > 0 && (first[0] == '-' || first[0] >= '0' && first[0] <= '9') {
		var seq []int32
		if err := json.Unmarshal(in, &seq); err != nil {
			return nil, badf("input: an array of token ids must hold only token ids: %s", jsonError(err))
		}
		return []EmbedInput{{Tokens: seq}}, nil
	}
	// Strings and token arrays, mixed as llama-server takes them.
	out := make([]EmbedInput, len(items))
	for i, it := range items {
		it = bytes.TrimSpace(it)
		switch {
		case len(it) > 0 && it[0] == '"':
			if err := json.Unmarshal(it, &out[i].Text); err != nil {
				return nil, badf("input[%d]: %s", i, jsonError(err))
			}
		case len(it) > 0 && it[0] == '[':
			var seq []int32
			if err := json.Unmarshal(it, &seq); err != nil {
				return nil, badf("input[%d]: a token array must hold token ids: %s", i, jsonError(err))
			}
			if seq == nil {
				seq = []int32{}
			}
			out[i].Tokens = seq
		default:
			return nil, badf("input[%d] must be a string or an array of token ids", i)
		}
	}
	return out, nil
}

// openaiEmbeddings is POST /v1/embeddings. Inputs longer than the model's
// context are cut, as llama-server does (OpenAI refuses them).
func (s *Server) openaiEmbeddings(w http.ResponseWriter, r *http.Request) {
	if s.noEmbedder(w, r, writeOpenAIError) {
		return
	}
	var c openaiEmbeddingsRequest
	if eb := s.decode(w, r, &c); eb != nil {
		writeOpenAIError(w, eb.status, eb.msg)
		return
	}
	inputs, err := openaiInputs(c.Input)
	if err != nil {
		var b *badRequest
		errors.As(err, &b)
		writeOpenAIError(w, b.status, b.msg)
		return
	}
	b64 := false
	switch c.EncodingFormat {
	case "", "float":
	case "base64":
		b64 = true
	default:
		writeOpenAIError(w, http.StatusBadRequest, "encoding_format "+c.EncodingFormat+": want float or base64")
		return
	}
	res, ok := s.embedAnswer(w, r, EmbedRequest{Model: c.Model, Inputs: inputs, Truncate: true, Dimensions: c.Dimensions}, writeOpenAIError)
	if !ok {
		return
	}
	out := openaiEmbeddingsResponse{Object: "list", Model: res.Model, Data: make([]openaiEmbedding, len(res.Embeddings))}
	for i, v := range res.Embeddings {
		out.Data[i] = openaiEmbedding{Object: "embedding", Index: i, Embedding: v}
		if b64 {
			buf := make([]byte, 4*len(v))
			for j, x := range v {
				binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(x))
			}
			out.Data[i].Embedding = base64.StdEncoding.EncodeToString(buf)
		}
	}
	out.Usage.PromptTokens, out.Usage.TotalTokens = res.Tokens, res.Tokens
	writeJSON(w, http.StatusOK, out)
}
