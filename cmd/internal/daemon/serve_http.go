package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/httpapi"
	"github.com/geisten/geist/cmd/internal/models"
	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/chat"
	"github.com/geisten/geist/engine/gguf"
)

// httpSection is [http]: the Ollama/OpenAI API, metrics and health
// checks (issue 12).
type httpSection struct {
	Addr      string   `toml:"addr"`       // listen address; "" turns the HTTP API off
	Allow     []string `toml:"allow"`      // networks (CIDR) besides loopback allowed in
	TokenFile string   `toml:"token_file"` // bearer token required from non-loopback clients
	MaxBody   int64    `toml:"max_body"`   // largest request body in bytes
	// PageTexts lets the status page at / show the questions and answers
	// of recent requests (the core keeps them only then).
	PageTexts bool `toml:"page_texts"`
	// Hosts are names besides IP literals, localhost and the machine's
	// host name (and NAME.local) that requests may address (DNS
	// rebinding: others get 403); *.SUFFIX for a domain.
	Hosts []string `toml:"hosts"`
	// Origins are other pages' origins allowed to use the API from a
	// browser (like OLLAMA_ORIGINS; * matches any characters).
	Origins []string `toml:"origins"`
	// Pull is who may pull models over the API: loopback (default), on, off.
	Pull string `toml:"pull"`
	// MaxModelSize caps a pulled file in bytes (0: the free space less
	// 64 MiB, whatever the server announces).
	MaxModelSize int64 `toml:"max_model_size"`
	// PullAllowPrivate lets /api/pull fetch from loopback, link-local and
	// private addresses (a user's own mirror); off, only public ones.
	PullAllowPrivate bool `toml:"pull_allow_private"`
}

func (h *httpSection) validate() error {
	if _, err := httpapi.ParseAllow(h.Allow); err != nil {
		return err
	}
	if _, err := httpapi.ParsePullPolicy(h.Pull); err != nil {
		return err
	}
	if h.MaxBody < 1 {
		return errors.New("http: max_body must be positive")
	}
	return nil
}

// httpFront is the HTTP API: Ollama, OpenAI, the status page, metrics and
// health checks.
type httpFront struct {
	srv *httpapi.Server
	ln  net.Listener
	log *slog.Logger
	emb *embedService // the embedding endpoints' models
}

// startHTTP listens on [http] addr; nil when it is empty. mount, when
// set, sees the server before it serves.
func startHTTP(c *Config, core *appliance.Core, ms serveModels, load time.Duration, mount func(*httpapi.Server), log *slog.Logger) (*httpFront, error) {
	if c.HTTP.Addr == "" {
		return nil, nil
	}
	pool := ms.pool
	store := pool.store
	hc, err := c.httpConfig(core, ms.first, store, load, log)
	if err != nil {
		return nil, err
	}
	if ms.unload != nil {
		hc.First = ms.unload
	}
	emb, err := newEmbedService(c.EmbedModel, embedModelName(c.EmbedModel, store), store, c.Threads, log.With("component", "embed"))
	if err != nil {
		return nil, err
	}
	emb.textModel = hc.Model.Name
	hc.Embedder = emb
	// The other stored models, loaded on demand by name.
	hc.Models = pool
	// One pool, one memory budget: the embedding models loaded on demand
	// are pooled beside the text models; --embed-model stays loaded.
	emb.pool = pool
	if emb.fixed != nil {
		rm := httpapi.Model{Name: emb.fixedName, ContextLength: emb.fixed.Ctx(), Capabilities: []string{"embedding"}, Family: emb.fixed.Arch()}
		if d, err := models.Describe(emb.fixedPath); err == nil {
			rm = describedModel(d)
			rm.Name, rm.ContextLength, rm.Capabilities = emb.fixedName, emb.fixed.Ctx(), []string{"embedding"}
		}
		pool.resident = append(pool.resident, rm)
	}
	web, err := httpapi.New(hc)
	if err != nil {
		emb.Close()
		return nil, err
	}
	web.Check("storage", true, storageCheck(c.DataDir))
	mountPage(web, c, ms.reporting(core), log)
	if mount != nil {
		mount(web)
	}
	var ln net.Listener
	if c.early != nil {
		ln = take(&c.early.http)
	}
	if ln == nil {
		if ln, err = net.Listen("tcp", c.HTTP.Addr); err != nil {
			emb.Close()
			return nil, fmt.Errorf("http: %w (--http ADDR, or --http \"\" to turn the HTTP API off)", listenErr(err))
		}
	}
	return &httpFront{srv: web, ln: ln, log: log, emb: emb}, nil
}

// run serves until stop ends.
func (f *httpFront) run(stop, _ context.Context, wg *sync.WaitGroup) {
	wg.Go(func() {
		if err := f.srv.Serve(stop, f.ln); err != nil {
			f.log.Error("HTTP API stopped", "err", err)
		}
	})
}

func (f *httpFront) wait() {}
func (f *httpFront) close() {
	f.ln.Close()
	f.emb.Close()
}

// httpConfig builds the HTTP front end's configuration: the loaded
// model's description (from its GGUF header and chat template), the model
// store for /api/pull, and the token.
func (c *Config) httpConfig(core *appliance.Core, eng *engine.Engine, store *models.Store, load time.Duration, log *slog.Logger) (httpapi.Config, error) {
	allow, err := httpapi.ParseAllow(c.HTTP.Allow)
	if err != nil {
		return httpapi.Config{}, err
	}
	token := ""
	if c.HTTP.TokenFile != "" {
		b, err := os.ReadFile(c.HTTP.TokenFile)
		if err != nil {
			return httpapi.Config{}, fmt.Errorf("http token file: %w", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" {
			return httpapi.Config{}, fmt.Errorf("http token file %s is empty", c.HTTP.TokenFile)
		}
	}
	m, err := c.loadedModel(eng, store, load)
	if err != nil {
		return httpapi.Config{}, err
	}
	pull, err := httpapi.ParsePullPolicy(c.HTTP.Pull)
	if err != nil {
		return httpapi.Config{}, err
	}
	return httpapi.Config{
		Core: core, Model: m, Store: modelStoreAdapter{store, c.HTTP.MaxModelSize, !c.HTTP.PullAllowPrivate}, Allow: allow, Token: token,
		Hosts: c.HTTP.Hosts, Origins: c.HTTP.Origins, Pull: pull,
		MaxBody: c.HTTP.MaxBody, Version: cli.VersionString(), Logger: log.With("component", "http"),
	}, nil
}

// loadedModel describes the running model for the HTTP API.
func (c *Config) loadedModel(eng *engine.Engine, store *models.Store, load time.Duration) (httpapi.Model, error) {
	name := ModelName(c.Model)
	if n, ok := store.NameOf(c.Model); ok {
		name = n
	}
	d, _ := models.Describe(c.Model)
	if n, err := models.CheckName(name); err == nil {
		if sm, err := store.Get(n); err == nil && sm.Path != "" {
			d.Digest = sm.Digest
		}
	}
	m := describedModel(d)
	m.Name = name
	m.ContextLength = eng.Ctx()
	m.LoadDuration = load
	m.System = c.Generation.System
	numPredict := c.Limits.MaxTokens
	if numPredict == 0 {
		numPredict = -1 // Ollama's word for no cap
	}
	m.Parameters = fmt.Sprintf("temperature %g\nnum_ctx %d\nnum_predict %d", c.Generation.Temperature, eng.Ctx(), numPredict)
	tmpl := eng.Template()
	m.Template = tmpl.Source()
	m.ToolFormat = tmpl.ToolFormat()
	m.Capabilities = []string{"completion"}
	if tmpl.SupportsTools() {
		m.Capabilities = append(m.Capabilities, "tools")
	}
	if tmpl.SupportsThinking() {
		m.Capabilities = append(m.Capabilities, "thinking")
	}
	// format, response_format, tool_choice and grammar are enforced by
	// a grammar (engine/grammar).
	m.Capabilities = append(m.Capabilities, "structured_outputs")
	info, err := modelInfo(c.Model, false)
	if err != nil {
		return m, err
	}
	m.Info = info
	if v, ok := info[d.Architecture+".embedding_length"]; ok {
		m.EmbeddingLength = toInt(v)
	}
	if v, ok := info["general.license"].(string); ok {
		m.License = v
	}
	path := c.Model
	m.VerboseInfo = func() map[string]any {
		v, err := modelInfo(path, true)
		if err != nil {
			return info
		}
		return v
	}
	tok := eng.Tokenizer()
	var bos, eos string
	if id := tok.BOS(); id >= 0 {
		bos = tok.TokenText(id)
	}
	if id := tok.EOS(); id >= 0 {
		eos = tok.TokenText(id)
	}
	m.Tokenize = func(text string, addBOS bool) []int {
		ids := tok.Encode(text, addBOS, true)
		out := make([]int, len(ids))
		for i, id := range ids {
			out[i] = int(id)
		}
		return out
	}
	m.Detokenize = func(ids []int) string {
		in := make([]int32, 0, len(ids))
		for _, id := range ids {
			if id >= 0 && id < tok.NTokens() {
				in = append(in, int32(id))
			}
		}
		return tok.Detokenize(in, false, true)
	}
	system := c.Generation.System
	m.RenderPrompt = func(sys, prompt string) (string, error) {
		if sys == "" {
			sys = system
		}
		var msgs []chat.Message
		if sys != "" {
			msgs = append(msgs, chat.Message{Role: "system", Content: sys})
		}
		msgs = append(msgs, chat.Message{Role: "user", Content: prompt})
		return tmpl.Render(msgs, chat.Options{AddGenerationPrompt: true, BOS: bos, EOS: eos})
	}
	return m, nil
}

func describedModel(d models.Model) httpapi.Model {
	return httpapi.Model{Name: d.Name, Size: d.Size, Digest: d.Digest, ModifiedAt: d.Modified, Family: d.Architecture,
		ParameterSize: d.ParameterSize, Quantization: d.Quantization}
}

// toInt reads an integer metadata value.
func toInt(v any) int {
	if rv := reflect.ValueOf(v); rv.CanInt() {
		return int(rv.Int())
	} else if rv.CanUint() {
		return int(rv.Uint())
	}
	return 0
}

// modelInfo is Ollama's model_info: the GGUF metadata, the chat template
// aside (shown as the template) and, unless verbose, arrays of more than
// 64 elements (the vocabulary) as empty lists.
func modelInfo(path string, verbose bool) (map[string]any, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := make(map[string]any, len(f.KV))
	for _, kv := range f.KV {
		if kv.Key == "tokenizer.chat_template" {
			continue
		}
		v := kv.Value
		if n := arrayLen(v); n > 64 && !verbose {
			v = []any{}
		}
		if f, ok := v.(float32); ok && (f != f || f > math.MaxFloat32 || f < -math.MaxFloat32) {
			v = nil // NaN and infinities have no JSON form
		}
		if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			v = nil
		}
		out[kv.Key] = v
	}
	var params int64
	for i := range f.Tensors {
		params += f.Tensors[i].Elements()
	}
	if _, ok := out["general.parameter_count"]; !ok && params > 0 {
		out["general.parameter_count"] = params
	}
	return out, nil
}

// arrayLen is the length of a metadata array (0 for other values).
func arrayLen(v any) int {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice {
		return rv.Len()
	}
	return 0
}

// modelStoreAdapter gives the HTTP API the model store.
type modelStoreAdapter struct {
	s             *models.Store
	maxSize       int64
	refusePrivate bool
}

func (a modelStoreAdapter) Get(name string) (httpapi.Model, bool, error) {
	n, err := models.CheckName(strings.TrimSpace(name))
	if err != nil {
		return httpapi.Model{}, false, nil
	}
	m, err := a.s.Get(n)
	if errors.Is(err, models.ErrNotFound) {
		return httpapi.Model{}, false, nil
	}
	if err != nil {
		return httpapi.Model{}, false, err
	}
	if m.Type == "invalid" {
		// A file geist cannot read is named with what is wrong, not
		// shown with empty details as if it were a model.
		return httpapi.Model{}, false, fmt.Errorf("model %s (%s) is not a usable GGUF file: %s", n, m.Path, m.Problem)
	}
	hm := describedModel(m)
	hm.Name = n
	if info, err := modelInfo(m.Path, false); err == nil {
		hm.Info = info
		if t, ok := info["general.license"].(string); ok {
			hm.License = t
		}
	}
	if f, err := gguf.Open(m.Path); err == nil {
		hm.Template, _ = f.String("tokenizer.chat_template")
		if v, ok := f.Int(m.Architecture + ".context_length"); ok {
			hm.ContextLength = int(v)
		}
		f.Close()
	}
	if m.Type == "embedding" {
		hm.Capabilities = []string{"embedding"} // Ollama's word: /api/embed answers with it
	} else {
		hm.Capabilities = templateCapabilities(m.Path, hm.Template)
	}
	return hm, true, nil
}

// templateCaps caches the capabilities of stored models' templates by
// file (path, size, modification time): /api/show compiles a template,
// trial renders and all, once per file, not once per call (issue 22: a
// hostile template burned seconds of CPU per call after the client left).
var templateCaps sync.Map

func templateCapabilities(path, src string) []string {
	key := path
	if st, err := os.Stat(path); err == nil {
		key = fmt.Sprintf("%s|%d|%d", path, st.Size(), st.ModTime().UnixNano())
	}
	if v, ok := templateCaps.Load(key); ok {
		return slices.Clone(v.([]string))
	}
	caps := []string{"completion"}
	if t, err := chat.Compile(src); err == nil {
		if t.SupportsTools() {
			caps = append(caps, "tools")
		}
		if t.SupportsThinking() {
			caps = append(caps, "thinking")
		}
	}
	templateCaps.Store(key, caps)
	return slices.Clone(caps)
}

func (a modelStoreAdapter) Pull(ctx context.Context, src string, progress func(httpapi.PullProgress)) error {
	if _, _, err := models.ResolveSource(src, models.HFFromEnv()); err != nil {
		return fmt.Errorf("%w: %v", httpapi.ErrBadSource, err)
	}
	_, err := a.s.Pull(ctx, src, models.PullOptions{HF: models.HFFromEnv(), Retries: 3, Wait: true, UserAgent: "geist/" + cli.VersionString(), MaxSize: a.maxSize, RefusePrivate: a.refusePrivate,
		Progress: func(p models.Progress) {
			progress(httpapi.PullProgress{Status: p.Status, Digest: p.Digest, Total: p.Total, Completed: p.Completed})
		}})
	if errors.Is(err, models.ErrPrivate) {
		return httpapi.RefusedSource(err) // the client's request: 403, not a failure of the box
	}
	return err
}

// freeSpace is the free space of a directory's file system (tests replace it).
var freeSpace = models.FreeSpace

// storageCheck is /readyz's storage check: the data directory takes a
// file (sessions and the prompt cache can be written) and its file system
// has more than models.KeepFree free (a full disk is not ready before a
// save fails).
func storageCheck(dir string) func(context.Context) error {
	return func(context.Context) error {
		if dir == "" {
			return nil // sessions in memory, no prompt cache: nothing to write
		}
		if free, err := freeSpace(dir); err == nil && free < models.KeepFree {
			return fmt.Errorf("data directory %s: the disk is full (%s free, %s wanted)", dir, models.ByteSize(free), models.ByteSize(models.KeepFree))
		}
		f, err := os.CreateTemp(dir, ".geist-ready-*")
		if err != nil {
			return fmt.Errorf("data directory %s is not writable: %v", dir, err)
		}
		name := f.Name()
		f.Close()
		os.Remove(name)
		return nil
	}
}

// modelsDirOf is the model store of the serve configuration: the data
// directory's models/ (or the default data directory's).
func (c *Config) modelsDir() string {
	if c.ModelsDir != "" {
		return c.ModelsDir
	}
	dir := c.DataDir
	if dir == "" {
		dir = cli.DefaultDataDir()
	}
	return filepath.Join(dir, "models")
}
