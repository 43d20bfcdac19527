package models

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/geisten/geist/engine/gguf"
)

// Progress is the state of a pull, reported to PullOptions.Progress. Its
// JSON form is one of the progress objects Ollama's /api/pull streams:
// status and, while bytes flow, digest, total and completed.
type Progress struct {
	Status    string `json:"status"`
	Digest    string `json:"digest,omitempty"`
	Total     int64  `json:"total,omitempty"`
	Completed int64  `json:"completed,omitempty"`
	// Start is Completed when the current transfer began: a resumed
	// download starts past 0, so a rate is (Completed-Start)/elapsed.
	Start int64 `json:"-"`
	// Detail says why: the error a retry follows, that a download resumes.
	Detail string `json:"-"`
}

// The statuses of a pull, besides "pulling <digest>" (Ollama's, the first
// 12 hex digits of the SHA-256, or the model name when it is unknown)
// while the file's bytes arrive.
const (
	StatusWaiting   = "waiting for another pull of the model"
	StatusManifest  = "pulling manifest" // connecting, reading the response headers
	StatusRehash    = "checking the partial download"
	StatusRetrying  = "retrying"
	StatusVerifying = "verifying sha256 digest"
	StatusChecking  = "checking the gguf header"
	StatusSuccess   = "success"
)

// PullOptions tunes Pull.
type PullOptions struct {
	Name     string // stored name; default: the file's name without .gguf
	SHA256   string // expected SHA-256 (hex); default: the one the server vouches for, if any
	HF       HF     // Hugging Face endpoint and token
	Retries  int    // network failures retried, resuming where they stopped, before giving up
	Wait     bool   // wait for another pull of the same model instead of failing with ErrBusy
	Progress func(Progress)
	Client   *http.Client // nil: one that honours HTTPS_PROXY
	// UserAgent is sent with every request ("geist" when empty).
	UserAgent string
	// RefusePrivate refuses loopback, link-local, private and other
	// non-public destinations, checked on the addresses a name resolves
	// to, on every redirect and on every connection (geist serve's
	// /api/pull, unless --pull-allow-private: a client must not make
	// geist fetch from the machine's or the LAN's own servers).
	RefusePrivate bool
	// private classifies an address for RefusePrivate (tests: nil is
	// notPublic).
	private func(netip.Addr) bool
	// MaxSize caps the file (--max-model-size); 0: the free space less
	// KeepFree, whatever the server announces or sends.
	MaxSize int64
}

// PullResult is what a pull stored.
type PullResult struct {
	Model    Model
	UpToDate bool   // the stored file already had the remote's content: nothing was downloaded
	Resumed  int64  // bytes of an earlier, interrupted download that were kept
	Verified string // what the SHA-256 was checked against ("--sha256", "the server's digest"); "" when nothing vouched for it
}

var (
	// ErrChecksum: the download's SHA-256 is not the expected one.
	ErrChecksum = errors.New("sha256 mismatch")
	// ErrNoSpace: the file system has too little room for the download.
	ErrNoSpace = errors.New("not enough free disk space")
	// ErrNotModel: the downloaded file is not a GGUF model geist can open.
	ErrNotModel = errors.New("not a usable GGUF file")
)

// HTTPError is a response that ends a pull: the status, and the error in
// words (naming the URL, and HF_TOKEN where a token would help).
type HTTPError struct {
	Status int
	URL    string
	Msg    string
}

func (e *HTTPError) Error() string { return e.Msg }

// KeepFree is the space a pull leaves free on the file system, for the
// sessions, the prompt cache and the system's logs.
const KeepFree = 64 << 20

const (
	idleTimeout = 60 * time.Second // a transfer that stalls this long is retried
	maxBackoff  = 30 * time.Second
)

var hexRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// normalDigest accepts "HEX" or "sha256:HEX", any case.
func normalDigest(s string) (string, error) {
	d := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(s), "sha256:"))
	if !hexRE.MatchString(d) {
		return "", fmt.Errorf("sha256 %q is not 64 hexadecimal digits", s)
	}
	return d, nil
}

// Pull downloads src (see ParseSource) into the store. A download that
// breaks off is kept as NAME.gguf.partial with its validator and resumed
// with an HTTP range request, by the next attempt (o.Retries) or the next
// pull; a remote file that changed in between starts over. The free space
// is checked before the body is read. The file is accepted only if its
// SHA-256 matches (o.SHA256, or what the server vouches for: Hugging Face's
// X-Linked-Etag) and engine/gguf can open it; then it is renamed into place
// atomically. A model whose stored digest is the remote's is up to date and
// not downloaded again.
func (s *Store) Pull(ctx context.Context, src string, o PullOptions) (PullResult, error) {
	source, cat, err := ResolveSource(src, o.HF)
	if err != nil {
		return PullResult{}, err
	}
	name := o.Name
	switch {
	case name != "":
		if name, err = CheckName(name); err != nil {
			return PullResult{}, err
		}
	case cat.Name != "":
		name = cat.Name
	default:
		if name, err = source.DefaultName(); err != nil {
			return PullResult{}, err
		}
	}
	if o.SHA256 == "" {
		o.SHA256 = cat.SHA256
	}
	p := &puller{s: s, src: source, name: name, o: o, final: s.file(name)}
	if o.SHA256 != "" {
		if p.want, err = normalDigest(o.SHA256); err != nil {
			return PullResult{}, err
		}
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return PullResult{}, err
	}
	var l *fileLock
	if o.Wait {
		l, err = waitLock(ctx, p.final+lockExt, func() {
			p.report(Progress{Status: StatusWaiting, Detail: "another pull of " + name + " is running; waiting for it"})
		})
	} else {
		l, err = tryLock(p.final + lockExt)
	}
	if err != nil {
		if errors.Is(err, ErrBusy) {
			return PullResult{}, fmt.Errorf("%w: %s", ErrBusy, name)
		}
		return PullResult{}, err
	}
	defer l.unlock()
	return p.run(ctx)
}

// puller is one pull, run under the model's lock.
type puller struct {
	s     *Store
	src   Source
	name  string
	o     PullOptions
	final string // DIR/NAME.gguf
	want  string // expected SHA-256 from the caller

	have    record // the stored file's record, when there is one
	hasFile bool

	val     partialRecord // the partial download's validator
	limit   int64         // the partial file may not grow past this (free space, MaxSize)
	offset  int64         // bytes in the partial file
	h       hash.Hash     // SHA-256 of the partial file's first hashed bytes
	hashed  int64
	resumed int64
	digest  string // the SHA-256 the file should have (want, or the server's)
	last    time.Time

	hdr      []byte // the file's first bytes, until the header check has its verdict
	hdrNext  int    // len(hdr) at which the header is parsed again
	hdrDone  bool   // the header was checked (or looked for long enough)
	probeEnd int64  // >0: this request asks for bytes up to here only (the header)
	probed   bool   // the last transfer was a header probe: the next one continues it
	noRange  bool   // the server answered a range request with the whole file
	// upToDate: the stored file is the remote's; nothing is downloaded.
	upToDate bool
	// manifested: StatusManifest was reported.
	manifested bool
}

// partialRecord is NAME.gguf.partial.json: what the partial file is a
// prefix of.
type partialRecord struct {
	URL          string `json:"url"`
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`
	SHA256       string `json:"sha256,omitempty"`
	Size         int64  `json:"size"`
}

// remote is what the responses of one request said about the file.
type remote struct {
	sha256       string // from X-Linked-Etag, or an ETag of 64 hex digits (a Hugging Face LFS file)
	size         int64  // X-Linked-Size; -1 when absent
	etag         string // the final response's ETag
	lastModified string
}

func (p *puller) report(pr Progress) {
	if p.o.Progress != nil {
		p.o.Progress(pr)
	}
}

func (p *puller) partial() string { return p.final + partialExt }

func (p *puller) run(ctx context.Context) (PullResult, error) {
	if _, err := os.Lstat(p.final); errors.Is(err, fs.ErrNotExist) {
		p.linkTwin()
	}
	if st, err := os.Stat(p.final); err == nil && st.Mode().IsRegular() {
		p.hasFile = true
		if r, ok := readRecord(p.final + recordExt); ok && r.Size == st.Size() {
			p.have = r
		}
		// Asked for a digest the stored file has: nothing to fetch.
		if p.want != "" && p.have.SHA256 == p.want {
			return p.keep()
		}
	}
	p.loadPartial()
	if err := p.headerOfPartial(); err != nil {
		p.discardPartial()
		return PullResult{}, err
	}
	tries, restarts := 0, 0
	for {
		err := p.attempt(ctx)
		if err == nil {
			break
		}
		if errors.Is(err, errProbed) {
			continue // the header came and passed: fetch the rest
		}
		var re retryable
		if !errors.As(err, &re) {
			if ctx.Err() == nil {
				// A failure the same pull would meet again (no space, not
				// a model, a refusal): nothing is worth keeping.
				p.discardPartial()
			}
			return PullResult{}, p.failed(err)
		}
		if re.restart && restarts < 3 {
			restarts++ // the remote changed under a partial download: start over at once
			continue
		}
		if tries >= p.o.Retries || ctx.Err() != nil || re.final {
			if p.offset == 0 {
				p.discardPartial() // nothing to resume
			}
			return PullResult{}, p.failed(re.err)
		}
		if re.progressed {
			tries = 0
		}
		tries++
		wait := p.s.retryDelay << min(tries-1, 5)
		wait = min(wait, maxBackoff)
		p.report(Progress{Status: StatusRetrying, Total: p.val.Size, Completed: p.offset,
			Detail: fmt.Sprintf("%v; retrying in %v (%d of %d)", re.err, wait, tries, p.o.Retries)})
		select {
		case <-ctx.Done():
			return PullResult{}, p.failed(ctx.Err())
		case <-time.After(wait):
		}
	}
	if p.upToDate {
		return p.keep()
	}
	return p.finish()
}

// linkTwin shares the file of a stored model that is the one pulled: the
// same catalog model under another of its names (llama3.2 and
// llama3.2:1b), or a file with the digest the pull expects (the catalog's
// or --sha256), under the new name (a hard link: one copy on disk, as
// Ollama's blobs are shared by digest), its record with it. A source
// pulled under a name of one's own (--name) is downloaded again unless
// its digest is given.
// The pull then goes on as for a stored file: up to date unless the
// remote changed (a new download replaces only this name's link).
func (p *puller) linkTwin() {
	ents, err := os.ReadDir(p.s.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), Ext)
		if !ok || !e.Type().IsRegular() || name == p.name {
			continue
		}
		path := filepath.Join(p.s.dir, e.Name())
		r, ok := readRecord(path + recordExt)
		st, err := os.Stat(path)
		if !ok || err != nil || r.Size != st.Size() || r.SHA256 == "" {
			continue
		}
		sameModel := r.Source == p.src.URL && slices.Contains(catalogAliases(p.name), name)
		if !sameModel && (p.want == "" || r.SHA256 != p.want) {
			continue
		}
		if os.Link(path, p.final) != nil {
			return // no hard links here (or a race): download as usual
		}
		if writeRecord(p.final+recordExt, r) != nil {
			os.Remove(p.final)
		}
		return
	}
}

// failed words an error that ends a pull with a partial file kept.
func (p *puller) failed(err error) error {
	if p.offset > 0 {
		of := ""
		if p.val.Size > 0 {
			of = fmt.Sprintf(" of %s (%d%%)", ByteSize(p.val.Size), p.offset*100/p.val.Size)
		}
		if errors.Is(err, context.Canceled) {
			err = errors.New("interrupted")
		}
		return fmt.Errorf("%w after %s%s; the same pull resumes it", err, ByteSize(p.offset), of)
	}
	return err
}

// loadPartial takes up an earlier partial download of the same URL, or
// clears it.
func (p *puller) loadPartial() {
	p.h, p.hashed = sha256.New(), 0
	st, err := os.Stat(p.partial())
	r, ok := readPartialRecord(p.partial() + recordExt)
	if err != nil || !ok || r.URL != p.src.URL || (r.Size > 0 && st.Size() > r.Size) {
		p.discardPartial()
		return
	}
	p.val, p.offset = r, st.Size()
}

func readPartialRecord(path string) (partialRecord, bool) {
	var r partialRecord
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 64<<10 {
		return r, false
	}
	return r, json.Unmarshal(b, &r) == nil
}

func (p *puller) discardPartial() {
	os.Remove(p.partial())
	os.Remove(p.partial() + recordExt)
	p.val, p.offset, p.resumed = partialRecord{}, 0, 0
	p.h, p.hashed = sha256.New(), 0
}

// retryable marks a failure worth another attempt (the network, a server
// error); progressed says the attempt got bytes before it failed, restart
// that the partial download was dropped and the next attempt starts over.
type retryable struct {
	err        error
	progressed bool
	restart    bool
	final      bool // not worth the retries after all (a name that does not resolve: offline)
}

// errProbed ends a transfer that fetched the header only, which passed.
var errProbed = errors.New("header probed")

func (r retryable) Error() string { return r.err.Error() }

// attempt makes one request and writes what it gets to the partial file.
// It sets upToDate when the stored file is the remote's.
func (p *puller) attempt(ctx context.Context) error {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !p.manifested {
		// Once a pull, as Ollama's: the header probe's continuation and
		// retries are not new manifests (retries say so themselves).
		p.manifested = true
		p.report(Progress{Status: StatusManifest})
	}
	p.probeEnd = 0
	if !p.hdrDone && !p.noRange && p.offset < maxHeader {
		p.probeEnd = min(max(firstProbe, 4*p.offset), maxHeader)
	}
	continued := p.probed
	p.probed = false
	resp, rem, err := p.get(actx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrPrivate) {
			return privateOnly(err)
		}
		return netError(p.src.URL, err)
	}
	defer resp.Body.Close()
	if p.want != "" && rem.sha256 != "" && rem.sha256 != p.want {
		return fmt.Errorf("%w: the server says %s has sha256 %s, not the %s given; nothing was downloaded", ErrChecksum, p.src.URL, rem.sha256, p.want)
	}
	if p.isUpToDate(rem) {
		p.upToDate = true
		return nil
	}
	var total int64 = -1
	switch code := resp.StatusCode; {
	case code == http.StatusNotModified && p.hasFile && p.have.SHA256 != "":
		p.upToDate = true // If-None-Match / If-Modified-Since: the stored file is the remote's
		return nil
	case code == http.StatusOK:
		changed := p.val.ETag != "" && rem.etag != "" && p.val.ETag != rem.etag ||
			p.val.SHA256 != "" && rem.sha256 != "" && p.val.SHA256 != rem.sha256
		switch {
		case p.offset > 0 && changed:
			p.report(Progress{Status: StatusRetrying, Detail: fmt.Sprintf("the file changed on the server since the partial download of %s; starting over", ByteSize(p.offset))})
		case p.offset > 0:
			p.report(Progress{Status: StatusRetrying, Detail: fmt.Sprintf("%s ignores range requests: the %s downloaded before are fetched again (a broken transfer starts over)", resp.Request.URL.Host, ByteSize(p.offset))})
		case p.probeEnd > 0 && !p.noRange:
			p.report(Progress{Status: StatusManifest, Detail: fmt.Sprintf("%s ignores range requests: the header is checked as the file arrives, and a broken transfer starts over", resp.Request.URL.Host)})
		}
		if p.offset > 0 {
			p.discardPartial()
		}
		p.noRange, p.probeEnd = true, 0
		total = resp.ContentLength
		if total < 0 {
			total = rem.size
		}
	case code == http.StatusPartialContent:
		start, end, tot, ok := contentRange(resp.Header.Get("Content-Range"))
		changed := (p.val.SHA256 != "" && rem.sha256 != "" && p.val.SHA256 != rem.sha256) ||
			(p.val.ETag != "" && rem.etag != "" && p.val.ETag != rem.etag) ||
			(p.val.Size > 0 && tot > 0 && p.val.Size != tot)
		wantEnd := p.probeEnd - 1
		if !ok || start != p.offset || end < start || p.probeEnd > 0 && end > wantEnd || p.probeEnd == 0 && tot >= 0 && end != tot-1 {
			p.discardPartial()
			p.report(Progress{Status: StatusRetrying, Detail: fmt.Sprintf("%s answered the range request from byte %d with %q; starting over from the beginning", resp.Request.URL.Host, p.offset, resp.Header.Get("Content-Range"))})
			p.noRange = true
			return retryable{err: errors.New("the server's Content-Range is not the range asked for"), restart: true}
		}
		if changed {
			p.discardPartial()
			return retryable{err: errors.New("the remote file changed since the partial download; starting over"), restart: true}
		}
		total = tot
		if total < 0 {
			total = p.val.Size
		}
		if p.resumed == 0 && p.offset > 0 && !continued {
			p.resumed = p.offset
		}
		if p.probeEnd > 0 && tot >= 0 && end == tot-1 {
			p.probeEnd = 0 // the range reaches the end: the whole rest comes
		}
	case code == http.StatusRequestedRangeNotSatisfiable && p.val.Size > 0 && p.offset == p.val.Size:
		return nil // the partial file is complete
	case code == http.StatusRequestedRangeNotSatisfiable:
		p.discardPartial()
		return retryable{err: errors.New("the server refused to resume; starting over"), restart: true}
	case code == http.StatusTooManyRequests || code >= 500:
		return retryable{err: fmt.Errorf("HTTP %s from %s", resp.Status, resp.Request.URL.Host)}
	default:
		return p.httpError(resp)
	}
	if rem.sha256 == "" {
		rem.sha256 = p.val.SHA256
	}
	p.digest = p.want
	if p.digest == "" {
		p.digest = rem.sha256
	}
	free, ferr := p.s.freeSpace(p.s.dir)
	p.limit = -1
	if ferr == nil {
		// Less free than the reserve is a limit of 0, not "unknown" (-1).
		p.limit = max(p.offset+free-KeepFree, 0)
	}
	if p.o.MaxSize > 0 && (p.limit < 0 || p.o.MaxSize < p.limit) {
		p.limit = p.o.MaxSize
	}
	if total >= 0 && p.limit >= 0 && total > p.limit {
		if p.o.MaxSize > 0 && total > p.o.MaxSize {
			return fmt.Errorf("%w: %s is %s, more than the %s --max-model-size allows", ErrNoSpace, p.name, ByteSize(total), ByteSize(p.o.MaxSize))
		}
		return fmt.Errorf("%w in %s for %s: the download needs %s more and %s stay free, the file system has %s",
			ErrNoSpace, p.s.dir, p.name, ByteSize(total-p.offset), ByteSize(KeepFree), ByteSize(free))
	}
	p.val = partialRecord{URL: p.src.URL, ETag: rem.etag, LastModified: rem.lastModified, SHA256: rem.sha256, Size: max(total, 0)}
	if err := writeRecord(p.partial()+recordExt, p.val); err != nil {
		return err
	}
	return p.receive(ctx, actx, cancel, resp.Body, total)
}

// isUpToDate says whether the stored file is the remote one.
func (p *puller) isUpToDate(rem remote) bool {
	if !p.hasFile || p.have.SHA256 == "" {
		return false
	}
	if rem.sha256 != "" {
		return rem.sha256 == p.have.SHA256
	}
	if rem.size >= 0 && rem.size != p.have.Size {
		return false
	}
	if p.have.ETag != "" {
		return rem.etag == p.have.ETag
	}
	return p.have.LastModified != "" && rem.etag == "" && rem.lastModified == p.have.LastModified
}

// receive appends the body to the partial file, hashing as it goes.
func (p *puller) receive(ctx, actx context.Context, cancel context.CancelFunc, body io.Reader, total int64) error {
	f, err := os.OpenFile(p.partial(), os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(p.offset); err != nil {
		return err
	}
	if _, err := f.Seek(p.offset, io.SeekStart); err != nil {
		return err
	}
	if err := p.rehash(total); err != nil {
		return err
	}
	// A transfer that stalls is cut and retried.
	idle := time.AfterFunc(idleTimeout, cancel)
	defer idle.Stop()
	start := p.offset
	label := "pulling " + p.name
	if p.digest != "" {
		label = "pulling " + p.digest[:12]
	}
	digest := ""
	if p.digest != "" {
		digest = "sha256:" + p.digest
	}
	detail := ""
	if p.resumed > 0 && p.offset == p.resumed {
		detail = "resuming at " + ByteSize(p.offset)
	}
	p.report(Progress{Status: label, Digest: digest, Total: max(total, 0), Completed: p.offset, Start: start, Detail: detail})
	buf := make([]byte, 256<<10)
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			idle.Reset(idleTimeout)
			if total >= 0 && p.offset+int64(n) > total {
				p.discardPartial()
				return errors.New("the server sent more bytes than it announced")
			}
			if err := p.room(int64(n)); err != nil {
				return err
			}
			if err := p.write(f, buf[:n]); err != nil {
				return err
			}
			if err := p.header(buf[:n], false); err != nil {
				return err
			}
			if now := time.Now(); now.Sub(p.last) >= 100*time.Millisecond || p.offset == total {
				p.last = now
				p.report(Progress{Status: label, Digest: digest, Total: max(total, 0), Completed: p.offset, Start: start})
			}
		}
		if rerr == io.EOF {
			if err := p.header(nil, true); err != nil {
				return err
			}
			break
		}
		if rerr != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if actx.Err() != nil {
				rerr = fmt.Errorf("no data for %v", idleTimeout)
			}
			return retryable{err: fmt.Errorf("download broke off: %w", rerr), progressed: p.offset > start}
		}
	}
	if p.probeEnd > 0 && p.offset == p.probeEnd && (total < 0 || p.offset < total) {
		if err := f.Sync(); err != nil {
			return err
		}
		p.probed = true
		return errProbed
	}
	if total >= 0 && p.offset < total {
		return retryable{err: fmt.Errorf("download broke off: %w", io.ErrUnexpectedEOF), progressed: p.offset > start}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	p.val.Size = p.offset
	return f.Close()
}

// room checks that n more bytes fit: under the limit set at the start
// (the free space less KeepFree, MaxSize) and, every 64 MiB, under what
// the file system has free now (others write too).
func (p *puller) room(n int64) error {
	end := p.offset + n
	if p.limit >= 0 && end > p.limit {
		if p.o.MaxSize > 0 && p.limit == p.o.MaxSize {
			return fmt.Errorf("%w: %s stopped at %s, the --max-model-size (the server sent no length, or more than it announced)", ErrNoSpace, p.name, ByteSize(p.offset))
		}
		return fmt.Errorf("%w in %s: %s stopped at %s, where only %s would stay free", ErrNoSpace, p.s.dir, p.name, ByteSize(p.offset), ByteSize(KeepFree))
	}
	if end>>26 != p.offset>>26 {
		if free, err := p.s.freeSpace(p.s.dir); err == nil && free-n < KeepFree {
			return fmt.Errorf("%w in %s: %s stopped at %s, the file system has %s free", ErrNoSpace, p.s.dir, p.name, ByteSize(p.offset), ByteSize(free))
		}
	}
	return nil
}

func (p *puller) write(f *os.File, b []byte) error {
	if _, err := f.Write(b); err != nil {
		return fmt.Errorf("writing %s: %w", p.partial(), err)
	}
	p.h.Write(b)
	p.offset += int64(len(b))
	p.hashed = p.offset
	return nil
}

// rehash feeds the hash the partial file's bytes it has not seen (those of
// an earlier pull).
func (p *puller) rehash(total int64) error {
	if p.hashed == p.offset {
		return nil
	}
	f, err := os.Open(p.partial())
	if err != nil {
		return err
	}
	defer f.Close()
	p.report(Progress{Status: StatusRehash, Total: max(total, 0), Completed: p.offset})
	if _, err := f.Seek(p.hashed, io.SeekStart); err != nil {
		return err
	}
	if _, err := io.CopyN(p.h, f, p.offset-p.hashed); err != nil {
		return fmt.Errorf("reading %s: %w", p.partial(), err)
	}
	p.hashed = p.offset
	return nil
}

// finish verifies the complete partial file and moves it into place.
func (p *puller) finish() (PullResult, error) {
	if err := p.rehash(p.val.Size); err != nil {
		return PullResult{}, err
	}
	p.report(Progress{Status: StatusVerifying, Total: p.offset, Completed: p.offset})
	got := hex.EncodeToString(p.h.Sum(nil))
	want, from := p.want, "--sha256"
	if want == "" {
		want, from = p.val.SHA256, "the server's digest"
	}
	if want != "" && got != want {
		p.discardPartial()
		return PullResult{}, fmt.Errorf("%w for %s: the download has %s, %s says %s; it was discarded and nothing was stored", ErrChecksum, p.name, got, from, want)
	}
	p.report(Progress{Status: StatusChecking})
	if err := checkGGUF(p.partial()); err != nil {
		p.discardPartial()
		return PullResult{}, fmt.Errorf("%w: %s from %s: %v; it was discarded", ErrNotModel, p.name, p.src.URL, err)
	}
	if err := os.Rename(p.partial(), p.final); err != nil {
		return PullResult{}, err
	}
	rec := record{Source: p.src.URL, SHA256: got, Size: p.offset, ETag: p.val.ETag, LastModified: p.val.LastModified, Pulled: time.Now().UTC()}
	if err := writeRecord(p.final+recordExt, rec); err != nil {
		return PullResult{}, err
	}
	os.Remove(p.partial() + recordExt)
	if err := syncDir(p.s.dir); err != nil {
		return PullResult{}, err
	}
	r, err := p.result(false)
	if want != "" {
		r.Verified = from
	}
	return r, err
}

// keep ends a pull whose stored file is already the remote's.
func (p *puller) keep() (PullResult, error) {
	p.discardPartial()
	return p.result(true)
}

func (p *puller) result(upToDate bool) (PullResult, error) {
	st, err := os.Stat(p.final)
	if err != nil {
		return PullResult{}, err
	}
	m := p.s.describe(p.name, p.final, st)
	p.report(Progress{Status: StatusSuccess, Digest: digestOf(m.Digest), Total: m.Size, Completed: m.Size})
	return PullResult{Model: m, UpToDate: upToDate, Resumed: p.resumed}, nil
}

func digestOf(hexDigest string) string {
	if hexDigest == "" {
		return ""
	}
	return "sha256:" + hexDigest
}

// checkGGUF opens the file as engine/gguf does when it loads a model:
// magic, version, metadata, tensor table and that the tensor data lies in
// the file.
func checkGGUF(path string) error {
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if n, ok := f.Int("split.count"); ok && n > 1 {
		return fmt.Errorf("it is part of a model split into %d files; geist loads one file (join them with llama-gguf-split --merge)", n)
	}
	return nil
}

// contentRange parses "bytes START-END/TOTAL" (TOTAL may be "*": -1).
func contentRange(s string) (start, end, total int64, ok bool) {
	rest, found := strings.CutPrefix(s, "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	rng, tot, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, 0, false
	}
	a, b, found := strings.Cut(rng, "-")
	if !found {
		return 0, 0, 0, false
	}
	start, err := strconv.ParseInt(a, 10, 64)
	if err != nil || start < 0 {
		return 0, 0, 0, false
	}
	if end, err = strconv.ParseInt(b, 10, 64); err != nil || end < start {
		return 0, 0, 0, false
	}
	total = -1
	if tot != "*" {
		if total, err = strconv.ParseInt(tot, 10, 64); err != nil || end >= total {
			return 0, 0, 0, false
		}
	}
	return start, end, total, true
}

// ByteSize formats n bytes for people: "353.01 MiB".
func ByteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// privateOnly is the refusal of a private destination, without the
// wrapping of the request and the dial.
func privateOnly(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if strings.HasPrefix(e.Error(), ErrPrivate.Error()) {
			return e
		}
	}
	return err
}

// header feeds the header check the bytes just written (eof: the body
// ended) and fails the pull as soon as the header shows a model geist
// cannot run.
func (p *puller) header(b []byte, eof bool) error {
	if p.hdrDone {
		return nil
	}
	p.hdr = append(p.hdr, b[:min(len(b), maxHeader-len(p.hdr))]...)
	if len(p.hdr) < p.hdrNext && len(p.hdr) < maxHeader && !eof {
		return nil
	}
	p.hdrNext = max(2*len(p.hdr), 64<<10) // parse again when it has doubled: linear in all
	done, err := checkHeader(p.hdr)
	if !done && len(p.hdr) < maxHeader && (!eof || p.probeEnd > 0) {
		return nil
	}
	p.hdrDone, p.hdr = true, nil
	if err != nil {
		got := p.offset
		p.discardPartial()
		return fmt.Errorf("%s: %w; stopped after the first %s, nothing was stored", p.src.URL, err, ByteSize(got))
	}
	return nil
}

// headerOfPartial checks the header of an earlier partial download.
func (p *puller) headerOfPartial() error {
	if p.offset == 0 {
		return nil
	}
	f, err := os.Open(p.partial())
	if err != nil {
		return nil
	}
	defer f.Close()
	b := make([]byte, min(p.offset, maxHeader))
	if _, err := io.ReadFull(f, b); err != nil {
		return nil
	}
	return p.header(b, true)
}

// netError words a request that got no response, for a retry: a name
// that does not resolve is final (offline, or a typo: retrying only
// waits), a connection refused is retried.
func netError(u string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // without the method and URL: the message names the URL once
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return retryable{err: fmt.Errorf("cannot resolve %s (is this machine online? is the name right?): %s", dns.Name, u), final: true}
	}
	return retryable{err: fmt.Errorf("fetching %s: %w", u, err)}
}
