// Package models is geist's model store: a directory of GGUF files known by
// name, filled by Pull over HTTP (a Hugging Face repository or any URL) with
// resume, SHA-256 verification, a free-space check and a lock per model.
//
// The directory holds, for a model called NAME:
//
//	NAME.gguf                 the model
//	NAME.gguf.json            what the store knows of it: source, SHA-256, size
//	NAME.gguf.partial         a download in progress or interrupted
//	NAME.gguf.partial.json    the partial download's validator (URL, ETag, size)
//	NAME.gguf.lock            locked (flock) while NAME is pulled or removed
//
// A GGUF file copied in by hand is a stored model too (its digest is then
// unknown). Names come from the network in the HTTP API, so Path and Remove
// accept names only, never paths; Resolve, for the command line, also takes
// a path.
package models

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/model"
)

// Ext is the file extension of stored models.
const Ext = ".gguf"

var (
	// ErrNotFound: no stored model has the name.
	ErrNotFound = errors.New("no such model")
	// ErrBadName: the name is not a valid model name.
	ErrBadName = errors.New("invalid model name")
	// ErrBusy: another pull of the same model holds its lock.
	ErrBusy = errors.New("another pull of this model is running")
)

// Model describes a stored model. The JSON form is what geist models list
// --json prints.
type Model struct {
	Name          string    `json:"name"`
	Path          string    `json:"path"`
	Size          int64     `json:"size"`
	Modified      time.Time `json:"modified"`
	Digest        string    `json:"digest,omitempty"`         // SHA-256 of the file, lowercase hex; "" when unknown
	Source        string    `json:"source,omitempty"`         // the URL it was pulled from
	Type          string    `json:"type"`                     // chat (has a chat template), base, vocab (no tensors), adapter, invalid
	Architecture  string    `json:"architecture,omitempty"`   // general.architecture: llama, qwen2, ...
	Quantization  string    `json:"quantization,omitempty"`   // llama.cpp's file type name: Q4_0, Q4_K_M, ...
	Parameters    int64     `json:"parameters,omitempty"`     // elements of all tensors
	ParameterSize string    `json:"parameter_size,omitempty"` // Parameters, rounded: 494M, 1.2B
	Problem       string    `json:"problem,omitempty"`        // why geist cannot run it ("" when it can)
}

// Store is a model directory. Its methods are safe for concurrent use, and
// for use by several processes at once (pulls lock the model they write).
type Store struct {
	dir string
	// freeSpace returns the bytes an unprivileged process may still write
	// on the file system holding dir (statfs); tests replace it.
	freeSpace func(dir string) (int64, error)
	// retryDelay is the wait before the first retry of a failed transfer;
	// it doubles with each further one (tests shorten it).
	retryDelay time.Duration

	mu    sync.Mutex
	infos map[string]cachedInfo // by path: the header summary of unchanged files
}

type cachedInfo struct {
	size int64
	mod  time.Time
	m    Model
}

// New returns the store in dir. It creates nothing: reading a store that
// does not exist yet lists no models; Pull creates the directory.
func New(dir string) *Store {
	return &Store{dir: filepath.Clean(dir), freeSpace: statfsFree, retryDelay: time.Second, infos: map[string]cachedInfo{}}
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]*(:[A-Za-z0-9][A-Za-z0-9._+-]*)?$`)

// CheckName returns the canonical form of a model name: without a ".gguf"
// suffix or an Ollama-style ":latest" tag (Home Assistant sends
// "NAME:latest"). A name has letters, digits, '.', '_', '+' and '-', and
// at most one ':' before a tag as Ollama's names have (qwen3:1.7b); it
// starts with a letter or digit and is at most 200 bytes long.
func CheckName(name string) (string, error) {
	n := strings.TrimSuffix(name, ":latest")
	n = strings.TrimSuffix(n, Ext)
	if len(n) > 200 || !nameRE.MatchString(n) || strings.HasSuffix(n, ".partial") || strings.HasSuffix(n, ".lock") {
		return "", fmt.Errorf("%w %q: use letters, digits, '.', '_', '+' and '-', and at most one ':' before a tag (qwen3:1.7b), at most 200 in all", ErrBadName, name)
	}
	return n, nil
}

func (s *Store) file(name string) string { return filepath.Join(s.dir, name+Ext) }

// Path returns the file of the stored model name.
func (s *Store) Path(name string) (string, error) {
	n, err := CheckName(name)
	if err != nil {
		return "", err
	}
	p := s.file(n)
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
		return p, nil
	}
	// A catalog name finds the file under another of its names, as
	// Ollama's tags do (llama3.2 pulled, llama3.2:1b asked).
	for _, a := range catalogAliases(n) {
		if st, err := os.Stat(s.file(a)); err == nil && st.Mode().IsRegular() {
			return s.file(a), nil
		}
	}
	return "", fmt.Errorf("%w %q in %s", ErrNotFound, n, s.dir)
}

// Resolve turns what a user gave for a model on the command line into a
// file: an existing file as it is, else a stored model's name. A reference
// that names neither is returned unchanged when it looks like a path (it
// has a '/' or ends in .gguf), so that loading it reports the missing file;
// otherwise the error says that no model of that name is stored.
func (s *Store) Resolve(ref string) (string, error) {
	if ref == "" {
		return "", nil
	}
	if st, err := os.Stat(ref); err == nil && !st.IsDir() {
		return ref, nil
	}
	looksLikePath := strings.ContainsRune(ref, os.PathSeparator) || strings.HasPrefix(ref, ".")
	if !looksLikePath {
		if _, err := CheckName(ref); err == nil {
			if p, err := s.Path(ref); err == nil {
				return p, nil
			}
		}
	}
	if looksLikePath || strings.HasSuffix(ref, Ext) {
		return ref, nil
	}
	return "", s.notStored(ref)
}

// notStored words a model name that is neither a file nor a stored model:
// a catalog name not pulled yet says how to pull it; otherwise the close
// stored and catalog names are offered.
func (s *Store) notStored(ref string) error {
	if e, ok := LookupCatalog(ref); ok {
		return fmt.Errorf("model %q is not downloaded yet: geist pull %s fetches it (%s) into %s", ref, e.Name, e.About, s.dir)
	}
	var names []string
	if ms, err := s.List(); err == nil {
		for _, m := range ms {
			names = append(names, m.Name)
		}
	}
	hint := ""
	if sim := Similar(ref, append(names, catalogNames()...), 3); len(sim) > 0 {
		hint = "; did you mean " + orList(sim) + "?"
	}
	return fmt.Errorf("model %q: no such file, and no model of that name in %s%s (geist list shows the stored models, geist models catalog the ones geist pull fetches by name)", ref, s.dir, hint)
}

// List returns the stored models sorted by name. A missing directory has
// none.
func (s *Store) List() ([]Model, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Model
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), Ext)
		if !ok || !e.Type().IsRegular() && e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		if _, err := CheckName(name); err != nil {
			continue
		}
		st, err := os.Stat(filepath.Join(s.dir, e.Name()))
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		out = append(out, s.describe(name, filepath.Join(s.dir, e.Name()), st))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Get describes the stored model name.
func (s *Store) Get(name string) (Model, error) {
	p, err := s.Path(name)
	if err != nil {
		return Model{}, err
	}
	st, err := os.Stat(p)
	if err != nil {
		return Model{}, err
	}
	n, _ := CheckName(name)
	return s.describe(n, p, st), nil
}

// Remove deletes the stored model name, its record and any partial
// download of it. It fails with ErrBusy while the model is being pulled.
func (s *Store) Remove(name string) error {
	n, err := CheckName(name)
	if err != nil {
		return err
	}
	p := s.file(n)
	if _, err := os.Lstat(p); err != nil {
		if _, perr := os.Lstat(p + partialExt); perr != nil {
			return fmt.Errorf("%w %q in %s", ErrNotFound, n, s.dir)
		}
	}
	l, err := tryLock(p + lockExt)
	if err != nil {
		return err
	}
	defer l.unlock()
	for _, f := range []string{p, p + recordExt, p + partialExt, p + partialExt + recordExt} {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	s.mu.Lock()
	delete(s.infos, p)
	s.mu.Unlock()
	return syncDir(s.dir)
}

// NameOf returns the stored model name of path when path is a model file
// directly inside the store, for commands that accept either.
func (s *Store) NameOf(path string) (string, bool) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", false
	}
	dir, err := filepath.Abs(s.dir)
	if err != nil || filepath.Dir(abs) != dir {
		return "", false
	}
	name, ok := strings.CutSuffix(filepath.Base(abs), Ext)
	if !ok {
		return "", false
	}
	n, err := CheckName(name)
	return n, err == nil
}

const (
	recordExt  = ".json"
	partialExt = ".partial"
	lockExt    = ".lock"
)

// record is NAME.gguf.json: what a pull learned about the file.
type record struct {
	Source string `json:"source,omitempty"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	ETag   string `json:"etag,omitempty"`
	// LastModified is the server's Last-Modified, the validator of a
	// plain URL without an ETag.
	LastModified string    `json:"last_modified,omitempty"`
	Pulled       time.Time `json:"pulled"`
}

func readRecord(path string) (record, bool) {
	var r record
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 64<<10 || json.Unmarshal(b, &r) != nil {
		return record{}, false
	}
	return r, true
}

func writeRecord(path string, r any) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// describe reads what the header and the record say about a model file,
// caching it while the file's size and time stay the same.
func (s *Store) describe(name, path string, st fs.FileInfo) Model {
	s.mu.Lock()
	c, ok := s.infos[path]
	s.mu.Unlock()
	if ok && c.size == st.Size() && c.mod.Equal(st.ModTime()) {
		c.m.Name = name
		return c.m
	}
	m := Model{Name: name, Path: path, Size: st.Size(), Modified: st.ModTime()}
	describeGGUF(&m)
	if r, ok := readRecord(path + recordExt); ok && r.Size == st.Size() {
		m.Digest, m.Source = r.SHA256, r.Source
	}
	s.mu.Lock()
	s.infos[path] = cachedInfo{size: st.Size(), mod: st.ModTime(), m: m}
	s.mu.Unlock()
	return m
}

// Describe reads what the header of the model file at path says, as List
// does for stored models (Problem says why geist cannot run it), for any
// path: serve --check uses it.
func Describe(path string) (Model, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Model{}, err
	}
	if st.IsDir() {
		return Model{}, fmt.Errorf("%s is a directory, not a model file", path)
	}
	m := Model{Name: strings.TrimSuffix(filepath.Base(path), Ext), Path: path, Size: st.Size(), Modified: st.ModTime()}
	describeGGUF(&m)
	return m, nil
}

// describeGGUF fills the header's part of m.
func describeGGUF(m *Model) {
	f, err := gguf.Open(m.Path)
	if err != nil {
		m.Type, m.Problem = "invalid", err.Error()
		return
	}
	defer f.Close()
	m.Architecture = f.Arch()
	m.Quantization = quantization(f)
	for i := range f.Tensors {
		m.Parameters += f.Tensors[i].Elements()
	}
	m.ParameterSize = sizeLabel(m.Parameters)
	_, chat := f.String("tokenizer.chat_template")
	kind, _ := f.String("general.type")
	switch {
	case kind == "adapter":
		m.Type, m.Problem = "adapter", "an adapter (LoRA), not a model"
	case len(f.Tensors) == 0:
		m.Type = "vocab"
	case model.IsEmbedding(f):
		m.Type = "embedding" // geist embed, /api/embed: it does not generate text
	case chat:
		m.Type = "chat"
	default:
		m.Type = "base"
	}
	if m.Type == "embedding" && m.Problem == "" {
		if _, err := model.ReadEncoderConfig(f); err != nil {
			m.Problem = err.Error()
		}
	} else if len(f.Tensors) > 0 && m.Problem == "" {
		if _, err := model.ReadConfig(f); err != nil {
			m.Problem = err.Error()
		}
	}
}

// sizeLabel rounds a parameter count the way model cards do: 494M, 1.2B.
func sizeLabel(n int64) string {
	switch {
	case n <= 0:
		return ""
	case n < 1e6:
		return fmt.Sprintf("%.0fK", float64(n)/1e3)
	case n < 1e9:
		return fmt.Sprintf("%.0fM", float64(n)/1e6)
	}
	return fmt.Sprintf("%.1fB", float64(n)/1e9)
}
