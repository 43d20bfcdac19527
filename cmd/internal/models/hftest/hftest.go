// Package hftest serves files the way the Hugging Face Hub does, for tests
// of model downloads: a resolver that answers /OWNER/REPO/resolve/REV/PATH
// with a redirect to a CDN on another host (a signed URL), carrying
// X-Linked-Etag (the file's SHA-256) and X-Linked-Size, and a CDN that
// serves byte ranges (Range, If-Range against its own ETag). Gated files
// want a bearer token; a response can be cut off or held midway.
package hftest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// File is a file of a repository.
type File struct {
	Data   []byte
	Digest string // the SHA-256 the resolver vouches for; default: the data's
	Token  string // when set, the repository is gated: the resolver wants "Bearer " + Token
}

// Request is one request a server got.
type Request struct {
	Server        string // "hf" or "cdn"
	Path          string
	Range         string
	IfRange       string
	Authorization string
	Status        int // the status answered (0 while the CDN is still sending)
}

// Server is a resolver and a CDN on two hosts (two ports of 127.0.0.1).
type Server struct {
	HF, CDN *httptest.Server

	mu      sync.Mutex
	files   map[string]File   // by "OWNER/REPO/REV/PATH"
	blobs   map[string][]byte // by SHA-256
	log     []Request
	cutAt   int64 // >0: the next CDN body is cut off after this many bytes
	holdAt  int64 // >0: the next CDN body stops after this many bytes until release is closed
	held    chan struct{}
	release chan struct{}
}

// New starts the two servers; they stop when the test ends.
func New(t testing.TB) *Server {
	s := &Server{files: map[string]File{}, blobs: map[string][]byte{}}
	s.HF = httptest.NewServer(http.HandlerFunc(s.resolve))
	s.CDN = httptest.NewServer(http.HandlerFunc(s.serveBlob))
	t.Cleanup(func() {
		s.mu.Lock()
		if s.release != nil {
			select {
			case <-s.release:
			default:
				close(s.release)
			}
		}
		s.mu.Unlock()
		s.HF.Close()
		s.CDN.Close()
	})
	return s
}

// Endpoint is the resolver's URL, for HF_ENDPOINT.
func (s *Server) Endpoint() string { return s.HF.URL }

// Put stores a file at "OWNER/REPO/REV/PATH" (REV is usually main).
func (s *Server) Put(key string, f File) {
	sum := sha256.Sum256(f.Data)
	real := hex.EncodeToString(sum[:])
	if f.Digest == "" {
		f.Digest = real
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[key] = f
	s.blobs[real] = f.Data
}

// CutNext cuts the next CDN response off after n bytes of its body (the
// connection is closed).
func (s *Server) CutNext(n int64) {
	s.mu.Lock()
	s.cutAt = n
	s.mu.Unlock()
}

// HoldNext makes the next CDN response stop after n bytes of its body
// until release is called; held is closed when it stops.
func (s *Server) HoldNext(n int64) (held <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdAt, s.held, s.release = n, make(chan struct{}), make(chan struct{})
	r := s.release
	var once sync.Once
	return s.held, func() { once.Do(func() { close(r) }) }
}

// Requests returns the requests so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

// CDNRequests returns the requests the CDN got.
func (s *Server) CDNRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Server == "cdn" {
			out = append(out, r)
		}
	}
	return out
}

// record logs a request as it arrives; the returned func sets the status
// answered.
func (s *Server) record(server string, r *http.Request, status int) func(int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := len(s.log)
	s.log = append(s.log, Request{Server: server, Path: r.URL.Path, Range: r.Header.Get("Range"),
		IfRange: r.Header.Get("If-Range"), Authorization: r.Header.Get("Authorization"), Status: status})
	return func(status int) {
		s.mu.Lock()
		s.log[i].Status = status
		s.mu.Unlock()
	}
}

func (s *Server) resolve(w http.ResponseWriter, r *http.Request) {
	owner, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	repo, rest, _ := strings.Cut(rest, "/")
	kind, rest, _ := strings.Cut(rest, "/")
	rev, path, _ := strings.Cut(rest, "/")
	s.mu.Lock()
	f, ok := s.files[owner+"/"+repo+"/"+rev+"/"+path]
	s.mu.Unlock()
	fail := func(status int, code, msg string) {
		s.record("hf", r, status)
		w.Header().Set("X-Error-Code", code)
		w.Header().Set("X-Error-Message", msg)
		http.Error(w, msg, status)
	}
	switch {
	case kind != "resolve" || !ok:
		fail(http.StatusNotFound, "EntryNotFound", "Entry not found")
		return
	case f.Token != "" && r.Header.Get("Authorization") == "":
		fail(http.StatusUnauthorized, "GatedRepo", "Access to model "+owner+"/"+repo+" is restricted. You must have access to it and be authenticated to access it. Please log in.")
		return
	case f.Token != "" && r.Header.Get("Authorization") != "Bearer "+f.Token:
		fail(http.StatusForbidden, "GatedRepo", "Access to model "+owner+"/"+repo+" is restricted and you are not in the authorized list.")
		return
	}
	sum := sha256.Sum256(f.Data)
	w.Header().Set("X-Linked-Etag", `"`+f.Digest+`"`)
	w.Header().Set("X-Linked-Size", fmt.Sprint(len(f.Data)))
	w.Header().Set("X-Repo-Commit", "0123456789abcdef0123456789abcdef01234567")
	w.Header().Set("Location", fmt.Sprintf("%s/blobs/%x?X-Amz-Signature=%d", s.CDN.URL, sum, time.Now().UnixNano()))
	s.record("hf", r, http.StatusFound)
	w.WriteHeader(http.StatusFound)
}

func (s *Server) serveBlob(w http.ResponseWriter, r *http.Request) {
	sum := strings.TrimPrefix(r.URL.Path, "/blobs/")
	s.mu.Lock()
	data, ok := s.blobs[sum]
	cut, hold, held, release := s.cutAt, s.holdAt, s.held, s.release
	if ok && r.Method == http.MethodGet {
		s.cutAt, s.holdAt = 0, 0
	}
	s.mu.Unlock()
	if !ok || r.URL.Query().Get("X-Amz-Signature") == "" {
		s.record("cdn", r, http.StatusForbidden)
		http.Error(w, "AccessDenied", http.StatusForbidden)
		return
	}
	done := s.record("cdn", r, 0)
	// The CDN's ETag is its own, not the SHA-256 (as S3's and CloudFront's).
	w.Header().Set("ETag", `"cdn-`+sum[:16]+`"`)
	cw := &cutWriter{ResponseWriter: w, cut: cut, hold: hold, held: held, release: release, done: r.Context().Done()}
	rec := &statusWriter{ResponseWriter: cw}
	http.ServeContent(rec, r, "", time.Unix(1700000000, 0), strings.NewReader(string(data)))
	done(rec.status)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// cutWriter cuts a body off or holds it after a number of bytes.
type cutWriter struct {
	http.ResponseWriter
	n, cut, hold int64
	held         chan struct{}
	release      chan struct{}
	done         <-chan struct{}
	dead         bool
}

func (w *cutWriter) Write(b []byte) (int, error) {
	if w.dead {
		return 0, http.ErrHandlerTimeout
	}
	written := 0
	if w.hold > 0 && w.n+int64(len(b)) > w.hold {
		k := int(w.hold - w.n)
		n, err := w.ResponseWriter.Write(b[:k])
		w.n += int64(n)
		written += n
		if err != nil {
			return written, err
		}
		b = b[k:]
		w.hold = 0
		w.ResponseWriter.(http.Flusher).Flush()
		close(w.held)
		select {
		case <-w.release:
		case <-w.done:
			return written, http.ErrHandlerTimeout
		}
	}
	if w.cut > 0 && w.n+int64(len(b)) > w.cut {
		k := int(w.cut - w.n)
		n, _ := w.ResponseWriter.Write(b[:k])
		w.n += int64(n)
		w.ResponseWriter.(http.Flusher).Flush()
		if conn, _, err := w.ResponseWriter.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
		w.dead = true
		return written + n, http.ErrHandlerTimeout
	}
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	return written + n, err
}
