package daemon

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/geisten/geist/engine"
)

// The prompt cache beside a running serve. The daemon holds cache.db
// (bbolt's flock admits one process, and a read-only open would wait for
// it), so run and chat reach its prompt cache through the control socket
// instead of going without it:
//
//	POST /v1/cache/lookup  body: the prompt's tokens (int32, little
//	                       endian); Geist-Model: the model's identity
//	                       (hex), Geist-Max-Bytes: the largest blob the
//	                       caller takes; Geist-Above (optional): the
//	                       tokens the caller holds already, whose
//	                       entries are neither read nor verified (nor
//	                       sent). 200: the longest stored prefix,
//	                       Geist-Tokens: its length, Geist-Crc32c: the
//	                       blob's CRC-32C (the store's checksum), the
//	                       blob streamed from the file's pages; 204: none.
//	POST /v1/cache/put     body: the prefix's tokens, then the blob;
//	                       Geist-Model, Geist-Tokens, Geist-Crc32c. 202:
//	                       verified, being stored; 409: the daemon serves another model
//	                       file (or KV type) and stores only its own;
//	                       422: the snapshot is not one its model could
//	                       restore, or its keys and values are not
//	                       plausible (engine.Engine.CheckSnapshot).
//
// Neither waits for a lock: the daemon reads in a bbolt read transaction
// beside its own engine, and takes one put at a time (another gets 503
// and is not stored). Both bodies are read under deadlines: no bytes for
// shareIdle, or the whole slower than shareRate, and the request is
// dropped (408), so that a put that declares a large blob and sends
// nothing frees the one put slot within seconds.
//
// The trust boundary: the socket is 0600, so any process of the daemon's
// user may put snapshots (as it may write cache.db itself). The checks
// refuse what is malformed or implausible; a well-formed snapshot of
// plausible values is trusted (README, "Prompt cache").

// Bounds of the shared cache's requests.
const (
	maxShareTokens = 1 << 20          // tokens of a lookup or a put
	maxShareBlob   = int64(2) << 30   // blob bytes of a put, under the daemon's budget
	shareHeader    = 2 * time.Second  // the daemon's answer to start
	shareLookup    = 30 * time.Second // a lookup's whole transfer
	sharePut       = 30 * time.Second // a put's whole transfer
	shareIdle      = 2 * time.Second  // the longest wait for a body's next bytes
	shareRate      = 8 << 20          // bytes per second a body's transfer averages at least
)

// bodyReader reads a request's body under deadlines: every read within
// shareIdle, and the whole within shareIdle plus its size at shareRate
// (at most whole).
type bodyReader struct {
	r   io.Reader
	rc  *http.ResponseController
	end time.Time
}

func newBodyReader(w http.ResponseWriter, r *http.Request, size int64, whole time.Duration) *bodyReader {
	d := min(shareIdle+time.Duration(size)*time.Second/shareRate, whole)
	return &bodyReader{r: r.Body, rc: http.NewResponseController(w), end: time.Now().Add(d)}
}

func (b *bodyReader) Read(p []byte) (int, error) {
	dl := time.Now().Add(shareIdle)
	if dl.After(b.end) {
		dl = b.end
	}
	b.rc.SetReadDeadline(dl)
	return b.r.Read(p)
}

// bodyError answers a body that could not be read: 408 when it came too
// slowly (or not at all), else 400.
func bodyError(w http.ResponseWriter, what string, err error) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		shareError(w, http.StatusRequestTimeout, "reading the %s: no bytes for %v, or slower than %d MiB/s: dropped", what, shareIdle, shareRate>>20)
		return
	}
	shareError(w, http.StatusBadRequest, "reading the %s: %v", what, err)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// cacheShare is what the daemon shares: its prompt cache and the identity
// of the model it serves (puts of other models are refused: the daemon
// cannot vouch for their snapshots).
type cacheShare struct {
	cache engine.PromptCache
	// check, if set, refuses a put's snapshot its model could not
	// restore, or whose values are implausible (Engine.CheckSnapshot).
	check func(tokens []int32, blob []byte) error
	model []byte
	path  string // the model file, named in refusals
	max   int64  // the largest blob a put may carry (the cache's budget)
	puts  chan struct{}
}

// shareCache makes the daemon's prompt cache reachable on its control
// socket.
func (s *controlServer) shareCache(c engine.PromptCache, model []byte, path string, budget int64, check func([]int32, []byte) error) {
	s.share.Store(&cacheShare{cache: c, check: check, model: model, path: path, max: min(budget, maxShareBlob), puts: make(chan struct{}, 1)})
}

func (s *controlServer) registerCache(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/cache/lookup", s.cacheLookup)
	mux.HandleFunc("POST /v1/cache/put", s.cachePut)
}

func shareError(w http.ResponseWriter, code int, format string, a ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": fmt.Sprintf(format, a...)})
}

// readTokens reads n tokens from r.
func readTokens(r io.Reader, n int) ([]int32, error) {
	b := make([]byte, 4*n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return toks, nil
}

// shared returns the shared cache and the model identity a request
// names, or answers why not.
func (s *controlServer) shared(w http.ResponseWriter, r *http.Request) (*cacheShare, []byte, bool) {
	sh := s.share.Load()
	if sh == nil {
		shareError(w, http.StatusServiceUnavailable, "geist serve is loading its model or has no prompt cache")
		return nil, nil, false
	}
	m, err := hex.DecodeString(r.Header.Get("Geist-Model"))
	if err != nil || len(m) == 0 || len(m) > 64 {
		shareError(w, http.StatusBadRequest, "Geist-Model is not a model identity in hex")
		return nil, nil, false
	}
	return sh, m, true
}

func (s *controlServer) cacheLookup(w http.ResponseWriter, r *http.Request) {
	sh, model, ok := s.shared(w, r)
	if !ok {
		return
	}
	most, err := strconv.ParseInt(r.Header.Get("Geist-Max-Bytes"), 10, 64)
	if err != nil || most <= 0 {
		shareError(w, http.StatusBadRequest, "Geist-Max-Bytes is not a positive byte count")
		return
	}
	if n := r.ContentLength; n <= 0 || n%4 != 0 || n > 4*maxShareTokens {
		shareError(w, http.StatusBadRequest, "the body must be 1 to %d tokens of 4 bytes (Content-Length %d)", maxShareTokens, n)
		return
	}
	above := 0
	if h := r.Header.Get("Geist-Above"); h != "" {
		if above, err = strconv.Atoi(h); err != nil || above < 0 || int64(above) >= r.ContentLength/4 {
			shareError(w, http.StatusBadRequest, "Geist-Above is not a token count below the %d tokens sent", r.ContentLength/4)
			return
		}
	}
	toks, err := readTokens(newBodyReader(w, r, r.ContentLength, shareLookup), int(r.ContentLength/4))
	if err != nil {
		bodyError(w, "tokens", err)
		return
	}
	send := func(n int, blob [][]byte) bool {
		var size int64
		crc := uint32(0)
		for _, b := range blob {
			size += int64(len(b))
			crc = crc32.Update(crc, castagnoli, b)
		}
		if size > most {
			return false
		}
		h := w.Header()
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Length", strconv.FormatInt(size, 10))
		h.Set("Geist-Tokens", strconv.Itoa(n))
		h.Set("Geist-Crc32c", fmt.Sprintf("%08x", crc))
		// The pieces are the file's pages, valid in this read
		// transaction: a caller that stalls is cut off.
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(shareLookup))
		w.WriteHeader(http.StatusOK)
		for _, b := range blob {
			if _, err := w.Write(b); err != nil {
				break
			}
		}
		return true
	}
	var hit bool
	if ip, ok := sh.cache.(engine.PromptCacheInPlace); ok {
		_, hit = ip.LookupFunc(model, toks, above, send)
	} else if n, blob, ok := sh.cache.Lookup(model, toks); ok && n > above {
		hit = send(n, [][]byte{blob})
	}
	if !hit {
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *controlServer) cachePut(w http.ResponseWriter, r *http.Request) {
	sh, model, ok := s.shared(w, r)
	if !ok {
		return
	}
	if !bytes.Equal(model, sh.model) {
		shareError(w, http.StatusConflict, "geist serve has another model file or KV type loaded (%s) and stores only its prefixes", sh.path)
		return
	}
	n, err := strconv.Atoi(r.Header.Get("Geist-Tokens"))
	if err != nil || n <= 0 || n > maxShareTokens {
		shareError(w, http.StatusBadRequest, "Geist-Tokens must be 1 to %d", maxShareTokens)
		return
	}
	want, err := strconv.ParseUint(r.Header.Get("Geist-Crc32c"), 16, 32)
	if err != nil {
		shareError(w, http.StatusBadRequest, "Geist-Crc32c is not a CRC-32C in hex")
		return
	}
	blobLen := r.ContentLength - 4*int64(n)
	switch {
	case r.ContentLength < 0 || blobLen <= 0:
		shareError(w, http.StatusBadRequest, "the body must be %d tokens and a blob (Content-Length %d)", n, r.ContentLength)
		return
	case blobLen > sh.max:
		shareError(w, http.StatusRequestEntityTooLarge, "a %d-byte snapshot exceeds the prompt cache's %d bytes", blobLen, sh.max)
		return
	}
	select {
	case sh.puts <- struct{}{}:
	default:
		shareError(w, http.StatusServiceUnavailable, "another snapshot is being stored")
		return
	}
	stored := false
	defer func() {
		if !stored {
			<-sh.puts
		}
	}()
	body := newBodyReader(w, r, r.ContentLength, sharePut)
	toks, err := readTokens(body, n)
	if err != nil {
		bodyError(w, "tokens", err)
		return
	}
	blob := make([]byte, blobLen)
	if _, err := io.ReadFull(body, blob); err != nil {
		bodyError(w, "snapshot", err)
		return
	}
	if got := crc32.Checksum(blob, castagnoli); got != uint32(want) {
		shareError(w, http.StatusBadRequest, "snapshot checksum mismatch (crc32c %08x, sent %08x)", got, want)
		return
	}
	if sh.check != nil {
		if err := sh.check(toks, blob); err != nil {
			s.log.Warn("prompt cache: a snapshot handed over through the control socket was refused", "tokens", len(toks), "err", err)
			shareError(w, http.StatusUnprocessableEntity, "the snapshot was refused: %v", err)
			return
		}
	}
	// Stored in the background, as the daemon's own snapshots are: the
	// command does not wait for the file's commit (Close does).
	stored = true
	s.storing.Add(1)
	go func() {
		defer s.storing.Done()
		defer func() { <-sh.puts }()
		if err := sh.cache.Put(model, toks, blob); err != nil {
			s.log.Warn("prompt cache: storing a prefix a command handed over failed", "tokens", len(toks), "err", err)
		}
	}()
	w.WriteHeader(http.StatusAccepted)
}

// daemonCache is the prompt cache of the geist serve running on a data
// directory, asked through its control socket (engine.PromptCache).
type daemonCache struct {
	c    *http.Client
	max  int64 // the largest blob taken (--cache-size)
	log  *slog.Logger
	once sync.Once
	mu   sync.Mutex
	off  bool // the daemon does not share its cache (an older version)
	// noPuts: the daemon serves another model file and keeps only its
	// own prefixes (lookups go on: cache.db may hold this model's).
	noPuts bool
}

// DialCache returns the prompt cache of the serve (pid) running on dir,
// or nil, saying so in one INFO line, when its control socket is missing.
func DialCache(dir, pid string, budget int64, log *slog.Logger) *daemonCache {
	path := filepath.Join(dir, SocketName)
	if _, err := os.Stat(path); err != nil {
		log.Info("prompt cache skipped: geist serve runs on the data directory but its control socket is missing", "data_dir", dir, "pid", pid, "socket", path)
		return nil
	}
	return &daemonCache{max: budget, log: log, c: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			d := net.Dialer{Timeout: 200 * time.Millisecond}
			return d.DialContext(ctx, "unix", path)
		},
		ResponseHeaderTimeout: shareHeader,
		DisableCompression:    true,
	}}}
}

// disable turns the shared cache off after an answer that says the daemon
// does not share it, in one INFO line.
func (d *daemonCache) disable(why string, a ...any) {
	d.mu.Lock()
	d.off = true
	d.mu.Unlock()
	d.once.Do(func() { d.log.Info("prompt cache skipped: "+why, a...) })
}

func (d *daemonCache) disabled() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.off
}

func (d *daemonCache) post(ctx context.Context, path string, h map[string]string, body ...[]byte) (*http.Response, error) {
	rs := make([]io.Reader, len(body))
	size := int64(0)
	for i, b := range body {
		rs[i], size = bytes.NewReader(b), size+int64(len(b))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://geist"+path, io.MultiReader(rs...))
	if err != nil {
		return nil, err
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := d.c.Do(req)
	if err != nil {
		d.disable("geist serve's control socket does not answer", "err", err)
		return nil, err
	}
	return resp, nil
}

// daemonSays reads the daemon's error answer.
func daemonSays(resp *http.Response) string {
	var e struct{ Error string }
	json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
	if e.Error == "" {
		return resp.Status
	}
	return e.Error
}

func PutTokens(b []byte, toks []int32) []byte {
	for _, t := range toks {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	return b
}

// Lookup asks the daemon for the longest stored prefix of tokens.
func (d *daemonCache) Lookup(model []byte, tokens []int32) (int, []byte, bool) {
	return d.lookup(model, tokens, 0)
}

// LookupFunc is Lookup of a prefix longer than above tokens (what the
// caller's state holds already: the daemon neither reads, verifies nor
// sends the entries not longer), handed to use in one piece
// (engine.PromptCacheInPlace).
func (d *daemonCache) LookupFunc(model []byte, tokens []int32, above int, use func(n int, blob [][]byte) bool) (int, bool) {
	if above >= len(tokens) {
		return 0, false
	}
	n, blob, ok := d.lookup(model, tokens, max(above, 0))
	if !ok || !use(n, [][]byte{blob}) {
		return 0, false
	}
	return n, true
}

func (d *daemonCache) lookup(model []byte, tokens []int32, above int) (int, []byte, bool) {
	if d.disabled() || len(tokens) == 0 || len(tokens) > maxShareTokens {
		return 0, nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), shareLookup)
	defer cancel()
	head := map[string]string{"Geist-Model": hex.EncodeToString(model), "Geist-Max-Bytes": strconv.FormatInt(d.max, 10)}
	if above > 0 {
		head["Geist-Above"] = strconv.Itoa(above)
	}
	resp, err := d.post(ctx, "/v1/cache/lookup", head, PutTokens(make([]byte, 0, 4*len(tokens)), tokens))
	if err != nil {
		return 0, nil, false
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNoContent:
		return 0, nil, false
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		d.disable("the running geist serve does not share its prompt cache (an older version: restart it)")
		return 0, nil, false
	default:
		d.log.Debug("prompt cache: geist serve's lookup failed", "err", daemonSays(resp))
		return 0, nil, false
	}
	n, err := strconv.Atoi(resp.Header.Get("Geist-Tokens"))
	want, err2 := strconv.ParseUint(resp.Header.Get("Geist-Crc32c"), 16, 32)
	if err == nil && n > 0 && n <= above {
		return 0, nil, false // an older daemon, which does not read Geist-Above
	}
	if err != nil || err2 != nil || n <= 0 || n > len(tokens) || resp.ContentLength <= 0 || resp.ContentLength > d.max {
		d.log.Warn("prompt cache: geist serve's answer is malformed", "tokens", resp.Header.Get("Geist-Tokens"), "bytes", resp.ContentLength)
		return 0, nil, false
	}
	blob := make([]byte, resp.ContentLength)
	if _, err := io.ReadFull(resp.Body, blob); err != nil {
		d.log.Warn("prompt cache: reading geist serve's snapshot failed", "err", err)
		return 0, nil, false
	}
	if got := crc32.Checksum(blob, castagnoli); got != uint32(want) {
		d.log.Warn("prompt cache: geist serve's snapshot is damaged in transit", "crc32c", fmt.Sprintf("%08x", got), "sent", fmt.Sprintf("%08x", want))
		return 0, nil, false
	}
	return n, blob, true
}

// Put hands a snapshot to the daemon to store. A daemon serving another
// model keeps it out (one INFO line, no error: nothing is wrong).
func (d *daemonCache) Put(model []byte, tokens []int32, blob []byte) error {
	d.mu.Lock()
	skip := d.off || d.noPuts
	d.mu.Unlock()
	if skip || len(tokens) == 0 || len(tokens) > maxShareTokens {
		return nil
	}
	if int64(len(blob)) > d.max {
		return fmt.Errorf("a %d-byte snapshot exceeds --cache-size %d", len(blob), d.max)
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharePut)
	defer cancel()
	resp, err := d.post(ctx, "/v1/cache/put", map[string]string{"Geist-Model": hex.EncodeToString(model),
		"Geist-Tokens": strconv.Itoa(len(tokens)), "Geist-Crc32c": fmt.Sprintf("%08x", crc32.Checksum(blob, castagnoli))},
		PutTokens(make([]byte, 0, 4*len(tokens)), tokens), blob)
	if err != nil {
		return nil // said once by post
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusAccepted:
		return nil
	case http.StatusConflict:
		why := daemonSays(resp)
		d.mu.Lock()
		d.noPuts = true
		d.mu.Unlock()
		d.log.Info("prompt cache: this run's prefix is not stored: " + why)
		return nil
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		d.disable("the running geist serve does not share its prompt cache (an older version: restart it)")
		return nil
	case http.StatusServiceUnavailable:
		d.log.Debug("prompt cache: geist serve stores no snapshot now", "err", daemonSays(resp))
		return nil
	}
	return fmt.Errorf("geist serve refused the snapshot: %s", daemonSays(resp))
}
