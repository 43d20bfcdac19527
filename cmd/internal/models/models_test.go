package models

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/geisten/geist/cmd/internal/models/hftest"
	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/quant"
)

// testModel returns a small GGUF file: llama metadata, a chat template and
// one 256 KiB tensor of random data (seeded by seed).
func testModel(t *testing.T, seed uint64) []byte {
	t.Helper()
	b := gguf.NewBuilder()
	b.Set("general.architecture", "llama")
	b.Set("general.name", "test")
	b.Set("general.file_type", uint32(2))
	b.Set("llama.block_count", uint32(1))
	b.Set("llama.embedding_length", uint32(64))
	b.Set("llama.feed_forward_length", uint32(128))
	b.Set("llama.attention.head_count", uint32(4))
	b.Set("tokenizer.chat_template", "{{ messages }}")
	data := make([]byte, 256<<10)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	if err := b.AddTensor("blk.0.ffn_up.weight", quant.F32, []int64{1024, 64}, data); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func newStore(t *testing.T) *Store {
	s := New(filepath.Join(t.TempDir(), "models"))
	s.retryDelay = 10 * time.Millisecond
	return s
}

// progressLog collects reported progress.
type progressLog struct {
	mu sync.Mutex
	ps []Progress
}

func (l *progressLog) add(p Progress) { l.mu.Lock(); l.ps = append(l.ps, p); l.mu.Unlock() }

func (l *progressLog) has(status string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.ps {
		if p.Status == status {
			return true
		}
	}
	return false
}

// storeFiles lists the store directory's entries.
func storeFiles(t *testing.T, s *Store) []string {
	t.Helper()
	es, err := os.ReadDir(s.Dir())
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func checkStored(t *testing.T, s *Store, name string, data []byte) Model {
	t.Helper()
	m, err := s.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(m.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("stored file differs from the served one (%d vs %d bytes)", len(got), len(data))
	}
	if m.Digest != digest(data) {
		t.Errorf("digest %q, want %q", m.Digest, digest(data))
	}
	want := []string{name + ".gguf", name + ".gguf.json"}
	if files := storeFiles(t, s); strings.Join(files, " ") != strings.Join(want, " ") {
		t.Errorf("store holds %v, want %v", files, want)
	}
	return m
}

const key = "acme/tiny-GGUF/main/tiny-Q4_0.gguf"
const src = "hf:acme/tiny-GGUF/tiny-Q4_0.gguf"

// cutServer serves a test model whose next download is cut off at 40%.
func cutServer(t *testing.T, seed uint64) (srv *hftest.Server, data []byte, cut int64) {
	srv = hftest.New(t)
	data = testModel(t, seed)
	srv.Put(key, hftest.File{Data: data})
	cut = int64(len(data)) * 4 / 10
	srv.CutNext(cut)
	return srv, data, cut
}

func TestPullResumesAfterACutConnection(t *testing.T) {
	srv, data, cut := cutServer(t, 1)
	s := newStore(t)
	var log progressLog
	res, err := s.Pull(context.Background(), src, PullOptions{HF: HF{Endpoint: srv.Endpoint()}, Retries: 2, Progress: log.add})
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed != cut || res.UpToDate || res.Verified == "" {
		t.Errorf("result %+v: want %d bytes resumed, verified", res, cut)
	}
	m := checkStored(t, s, "tiny-Q4_0", data)
	if m.Type != "chat" || m.Architecture != "llama" || m.Quantization != "Q4_0" || m.Source == "" {
		t.Errorf("model %+v", m)
	}
	cdn := srv.CDNRequests()
	if len(cdn) != 2 || cdn[0].Range != "bytes=0-1048575" || cdn[0].Status != http.StatusPartialContent || cdn[1].Range != "bytes="+strconv.FormatInt(cut, 10)+"-" || cdn[1].IfRange == "" || cdn[1].Status != http.StatusPartialContent {
		t.Errorf("CDN requests %+v: want the first MiB (the header probe: the whole file), then a range from %d with If-Range answered 206", cdn, cut)
	}
	if !log.has(StatusRetrying) || !log.has(StatusVerifying) || !log.has(StatusSuccess) {
		t.Errorf("progress lacks retrying/verifying/success: %+v", log.ps)
	}
}

func TestPullResumesInTheNextPull(t *testing.T) {
	srv, data, cut := cutServer(t, 2)
	s := newStore(t)
	opt := PullOptions{HF: HF{Endpoint: srv.Endpoint()}}
	_, err := s.Pull(context.Background(), src, opt)
	if err == nil || !strings.Contains(err.Error(), "the same pull resumes it") {
		t.Fatalf("cut pull without retries: %v", err)
	}
	if st, err := os.Stat(filepath.Join(s.Dir(), "tiny-Q4_0.gguf.partial")); err != nil || st.Size() != cut {
		t.Fatalf("partial file: %v (want %d bytes)", err, cut)
	}
	if _, err := s.Get("tiny-Q4_0"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a partial download is not a model: %v", err)
	}
	res, err := s.Pull(context.Background(), src, opt)
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed != cut {
		t.Errorf("resumed %d bytes, want %d", res.Resumed, cut)
	}
	checkStored(t, s, "tiny-Q4_0", data)
}

func TestPullStartsOverWhenTheRemoteFileChanged(t *testing.T) {
	srv := hftest.New(t)
	old, changed := testModel(t, 3), testModel(t, 4)
	srv.Put(key, hftest.File{Data: old})
	srv.CutNext(int64(len(old)) / 2)
	s := newStore(t)
	opt := PullOptions{HF: HF{Endpoint: srv.Endpoint()}}
	if _, err := s.Pull(context.Background(), src, opt); err == nil {
		t.Fatal("cut pull succeeded")
	}
	srv.Put(key, hftest.File{Data: changed})
	res, err := s.Pull(context.Background(), src, opt)
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed != 0 {
		t.Errorf("resumed %d bytes of the old file", res.Resumed)
	}
	checkStored(t, s, "tiny-Q4_0", changed)
}

func TestPullRejectsAWrongChecksum(t *testing.T) {
	srv := hftest.New(t)
	data := testModel(t, 5)
	// The server vouches for a digest the bytes do not have.
	srv.Put(key, hftest.File{Data: data, Digest: strings.Repeat("ab", 32)})
	s := newStore(t)
	var log progressLog
	_, err := s.Pull(context.Background(), src, PullOptions{HF: HF{Endpoint: srv.Endpoint()}, Progress: log.add})
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "nothing was stored") {
		t.Fatalf("err %v, want a checksum mismatch", err)
	}
	if files := storeFiles(t, s); len(files) != 0 {
		t.Errorf("store holds %v after a bad download", files)
	}
	if !log.has(StatusVerifying) {
		t.Error("no verification reported")
	}

	// A digest given that is not the server's fails before downloading.
	srv.Put(key, hftest.File{Data: data})
	n := len(srv.CDNRequests())
	_, err = s.Pull(context.Background(), src, PullOptions{HF: HF{Endpoint: srv.Endpoint()}, SHA256: strings.Repeat("cd", 32)})
	if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "nothing was downloaded") {
		t.Fatalf("err %v, want a digest mismatch before the download", err)
	}
	if len(srv.CDNRequests()) != n {
		t.Error("the CDN was asked for the file anyway")
	}
	// The right one passes, and an uppercase "sha256:" form is accepted.
	res, err := s.Pull(context.Background(), src, PullOptions{HF: HF{Endpoint: srv.Endpoint()}, SHA256: "sha256:" + strings.ToUpper(digest(data))})
	if err != nil || res.Verified != "--sha256" {
		t.Fatalf("%+v %v", res, err)
	}
	checkStored(t, s, "tiny-Q4_0", data)
}

func TestPullChecksFreeSpaceFirst(t *testing.T) {
	srv := hftest.New(t)
	data := testModel(t, 6)
	srv.Put(key, hftest.File{Data: data})
	s := newStore(t)
	var asked string
	s.freeSpace = func(dir string) (int64, error) { asked = dir; return KeepFree + int64(len(data)) - 1, nil }
	_, err := s.Pull(context.Background(), src, PullOptions{HF: HF{Endpoint: srv.Endpoint()}})
	if !errors.Is(err, ErrNoSpace) || asked != s.Dir() {
		t.Fatalf("err %v (statfs of %q), want no space", err, asked)
	}
	if files := storeFiles(t, s); len(files) != 0 {
		t.Errorf("store holds %v", files)
	}
	s.freeSpace = func(string) (int64, error) { return KeepFree + int64(len(data)), nil }
	if _, err := s.Pull(context.Background(), src, PullOptions{HF: HF{Endpoint: srv.Endpoint()}}); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentPullsOfOneModel(t *testing.T) {
	srv := hftest.New(t)
	data := testModel(t, 7)
	srv.Put(key, hftest.File{Data: data})
	held, release := srv.HoldNext(int64(len(data)) / 2)
	defer release()
	s := newStore(t)
	var wg sync.WaitGroup
	var errs [2]error
	var res [2]PullResult
	var logs [2]progressLog
	pull := func(i int) {
		defer wg.Done()
		// Each pull has a store of its own, as two processes would.
		res[i], errs[i] = New(s.Dir()).Pull(context.Background(), src, PullOptions{HF: HF{Endpoint: srv.Endpoint()}, Wait: true, Progress: logs[i].add})
	}
	wg.Add(1)
	go pull(0)
	<-held // the first pull is halfway
	wg.Add(1)
	go pull(1)
	for deadline := time.Now().Add(10 * time.Second); !logs[1].has(StatusWaiting); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second pull did not wait for the first")
		}
	}
	// A third that must not wait fails at once.
	if _, err := New(s.Dir()).Pull(context.Background(), src, PullOptions{HF: HF{Endpoint: srv.Endpoint()}}); !errors.Is(err, ErrBusy) {
		t.Errorf("pull without waiting: %v, want ErrBusy", err)
	}
	release()
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if res[0].UpToDate || !res[1].UpToDate {
		t.Errorf("first up to date %v, second %v: want the second to find the first's file", res[0].UpToDate, res[1].UpToDate)
	}
	if n := len(srv.CDNRequests()); n != 1 {
		t.Errorf("the CDN served %d requests, want 1", n)
	}
	checkStored(t, s, "tiny-Q4_0", data)
}

func TestPullSendsTheTokenToHuggingFaceOnly(t *testing.T) {
	srv := hftest.New(t)
	data := testModel(t, 8)
	srv.Put(key, hftest.File{Data: data, Token: "hf_secret"})
	s := newStore(t)
	_, err := s.Pull(context.Background(), src, PullOptions{HF: HF{Endpoint: srv.Endpoint()}})
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 401 || !strings.Contains(err.Error(), "set HF_TOKEN") {
		t.Fatalf("gated without a token: %v", err)
	}
	_, err = s.Pull(context.Background(), src, PullOptions{HF: HF{Endpoint: srv.Endpoint(), Token: "wrong"}})
	if !errors.As(err, &he) || he.Status != 403 || !strings.Contains(err.Error(), "HF_TOKEN") || !strings.Contains(err.Error(), "acme/tiny-GGUF") {
		t.Fatalf("gated with a wrong token: %v", err)
	}
	if _, err := s.Pull(context.Background(), src, PullOptions{HF: HF{Endpoint: srv.Endpoint(), Token: "hf_secret"}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range srv.Requests() {
		if r.Server == "cdn" && r.Authorization != "" {
			t.Errorf("the CDN got the token: %+v", r)
		}
	}
	if rs := srv.Requests(); rs[len(rs)-2].Server != "hf" || rs[len(rs)-2].Authorization != "Bearer hf_secret" {
		t.Errorf("the resolver did not get the token: %+v", rs[len(rs)-2])
	}
	checkStored(t, s, "tiny-Q4_0", data)
}

func TestPullErrors(t *testing.T) {
	srv := hftest.New(t)
	srv.Put("acme/tiny-GGUF/main/page.gguf", hftest.File{Data: []byte("<!DOCTYPE html><html>sign in</html>")})
	s := newStore(t)
	hf := HF{Endpoint: srv.Endpoint()}
	_, err := s.Pull(context.Background(), "hf:acme/tiny-GGUF/missing.gguf", PullOptions{HF: hf})
	if err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), srv.Endpoint()+"/acme/tiny-GGUF/resolve/main/missing.gguf") {
		t.Errorf("missing file: %v", err)
	}
	_, err = s.Pull(context.Background(), "hf:acme/tiny-GGUF/page.gguf", PullOptions{HF: hf})
	if !errors.Is(err, ErrNotModel) || strings.Contains(err.Error(), "<!DO") { // the remote body is not echoed (issue 22)
		t.Errorf("not a GGUF: %v", err)
	}
	_, err = s.Pull(context.Background(), srv.CDN.URL+"/blobs/nothing.gguf", PullOptions{HF: hf})
	if err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("plain URL refused: %v", err)
	}
	if files := storeFiles(t, s); len(files) != 0 {
		t.Errorf("store holds %v", files)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Pull(ctx, "hf:acme/tiny-GGUF/page.gguf", PullOptions{HF: hf, Wait: true}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled pull: %v", err)
	}
	// A connection refused is retried, then reported.
	dead := hftest.New(t)
	dead.HF.Close()
	_, err = s.Pull(context.Background(), src, PullOptions{HF: HF{Endpoint: dead.Endpoint()}, Retries: 1})
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("server down: %v", err)
	}
}

func TestPullUpToDate(t *testing.T) {
	srv := hftest.New(t)
	data := testModel(t, 9)
	srv.Put(key, hftest.File{Data: data})
	s := newStore(t)
	opt := PullOptions{HF: HF{Endpoint: srv.Endpoint()}, Name: "tiny"}
	if _, err := s.Pull(context.Background(), src, opt); err != nil {
		t.Fatal(err)
	}
	res, err := s.Pull(context.Background(), src, opt)
	if err != nil || !res.UpToDate {
		t.Fatalf("%+v %v", res, err)
	}
	if n := len(srv.CDNRequests()); n != 1 {
		t.Errorf("CDN requests %d, want 1", n)
	}
	// Offline, a digest given that the stored file has needs no request.
	n := len(srv.Requests())
	res, err = s.Pull(context.Background(), src, PullOptions{Name: "tiny", SHA256: digest(data), HF: HF{Endpoint: "http://127.0.0.1:1"}})
	if err != nil || !res.UpToDate || len(srv.Requests()) != n {
		t.Fatalf("%+v %v", res, err)
	}
	// A new version replaces the stored one.
	newer := testModel(t, 10)
	srv.Put(key, hftest.File{Data: newer})
	if res, err := s.Pull(context.Background(), src, opt); err != nil || res.UpToDate {
		t.Fatalf("%+v %v", res, err)
	}
	checkStored(t, s, "tiny", newer)
}

func TestParseSource(t *testing.T) {
	hf := HF{Endpoint: "https://hf.example/"}
	for _, c := range []struct{ in, url, file, repo, rev string }{
		{"hf:bartowski/Qwen2.5-0.5B-Instruct-GGUF/Qwen2.5-0.5B-Instruct-Q4_0.gguf",
			"https://hf.example/bartowski/Qwen2.5-0.5B-Instruct-GGUF/resolve/main/Qwen2.5-0.5B-Instruct-Q4_0.gguf",
			"Qwen2.5-0.5B-Instruct-Q4_0.gguf", "bartowski/Qwen2.5-0.5B-Instruct-GGUF", "main"},
		{"hf:o/r@v1.0/sub dir/m.gguf", "https://hf.example/o/r/resolve/v1.0/sub%20dir/m.gguf", "m.gguf", "o/r", "v1.0"},
		{"https://hf.example/o/r/blob/main/m.gguf", "https://hf.example/o/r/resolve/main/m.gguf", "m.gguf", "o/r", "main"},
		{"https://cdn.example/x/m.gguf?download=true", "https://cdn.example/x/m.gguf?download=true", "m.gguf", "", ""},
	} {
		s, err := ParseSource(c.in, hf)
		if err != nil || s.URL != c.url || s.File != c.file || s.Repo != c.repo || s.Revision != c.rev {
			t.Errorf("%q: %+v %v", c.in, s, err)
		}
	}
	for _, bad := range []string{"hf:o/r", "hf:o/r/", "hf:o/r/readme.md", "hf:o/r/../x.gguf", "hf:o$/r/m.gguf", "ftp://x/m.gguf", "m.gguf", "/tmp/m.gguf"} {
		if _, err := ParseSource(bad, hf); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := ParseSource("hf:o/r/m.gguf", HF{Endpoint: "huggingface.co"}); err == nil {
		t.Error("an endpoint without scheme accepted")
	}
}

func TestStore(t *testing.T) {
	s := newStore(t)
	if ms, err := s.List(); err != nil || len(ms) != 0 {
		t.Fatalf("empty store: %v %v", ms, err)
	}
	if _, err := os.Stat(s.Dir()); !os.IsNotExist(err) {
		t.Error("listing created the store")
	}
	os.MkdirAll(s.Dir(), 0o755)
	data := testModel(t, 11)
	os.WriteFile(filepath.Join(s.Dir(), "b-model.gguf"), data, 0o644)
	os.WriteFile(filepath.Join(s.Dir(), "a-broken.gguf"), []byte("GGUF\x03\x00\x00\x00"), 0o644)
	os.WriteFile(filepath.Join(s.Dir(), "c.gguf.partial"), data[:10], 0o644)
	os.WriteFile(filepath.Join(s.Dir(), "notes.txt"), nil, 0o644)
	ms, err := s.List()
	if err != nil || len(ms) != 2 || ms[0].Name != "a-broken" || ms[1].Name != "b-model" {
		t.Fatalf("%+v %v", ms, err)
	}
	if ms[0].Type != "invalid" || ms[0].Problem == "" || ms[1].Type != "chat" || ms[1].Digest != "" || ms[1].Parameters != 64*1024 || ms[1].ParameterSize != "66K" {
		t.Errorf("%+v", ms)
	}
	for ref, want := range map[string]string{
		"b-model": ms[1].Path, "b-model.gguf": ms[1].Path, "b-model:latest": ms[1].Path,
		ms[1].Path: ms[1].Path, "./nowhere.gguf": "./nowhere.gguf", "x/y": "x/y", "nowhere.gguf": "nowhere.gguf",
	} {
		if got, err := s.Resolve(ref); err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
	if _, err := s.Resolve("nowhere"); err == nil || !strings.Contains(err.Error(), s.Dir()) {
		t.Errorf("Resolve of an unknown name: %v", err)
	}
	for _, bad := range []string{"../b-model", "a/b", "", ".hidden", "x.partial", "x y"} {
		if _, err := s.Path(bad); !errors.Is(err, ErrBadName) {
			t.Errorf("Path(%q): %v", bad, err)
		}
	}
	if n, ok := s.NameOf(ms[1].Path); !ok || n != "b-model" {
		t.Errorf("NameOf(%q) = %q %v", ms[1].Path, n, ok)
	}
	if _, ok := s.NameOf("/etc/passwd"); ok {
		t.Error("NameOf outside the store")
	}
	l, err := tryLock(ms[1].Path + lockExt)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("b-model"); !errors.Is(err, ErrBusy) {
		t.Errorf("Remove while pulled: %v", err)
	}
	l.unlock()
	if err := s.Remove("b-model"); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("b-model"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Remove twice: %v", err)
	}
	if err := s.Remove("c"); err != nil {
		t.Errorf("Remove of a partial download: %v", err)
	}
	if files := storeFiles(t, s); strings.Join(files, " ") != "a-broken.gguf notes.txt" {
		t.Errorf("left %v", files)
	}
}

// A download without a length stops at the free space less KeepFree
// (issue 22, item 2): an endless body filled a tmpfs to 0 bytes, and the
// partial file stayed to keep it full. Now the pull fails as out of space
// and leaves nothing behind; --max-model-size caps it the same way.
func TestPullWithoutLengthStopsAtFreeSpace(t *testing.T) {
	data := testModel(t, 9)
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)      // chunked: no Content-Length
		w.Write(data[:len(data)-256<<10]) // the header (it passes the check), then endless tensor data
		chunk := make([]byte, 64<<10)
		for range 16 << 20 / len(chunk) { // 16 MiB at most
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	for _, c := range []struct {
		name    string
		free    int64
		maxSize int64
		want    string
	}{
		{"free space", KeepFree + 2<<20, 0, "would stay free"},
		{"max model size", 1 << 40, 3 << 20, "--max-model-size"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			s.freeSpace = func(string) (int64, error) { return c.free, nil }
			sent.Store(0)
			var written int64
			_, err := s.Pull(context.Background(), srv.URL+"/endless.gguf", PullOptions{MaxSize: c.maxSize, Retries: 2,
				Progress: func(p Progress) { written = max(written, p.Completed) }})
			if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want no space (%q)", err, c.want)
			}
			limit := min(c.free-KeepFree, max(c.maxSize, 0))
			if c.maxSize == 0 {
				limit = c.free - KeepFree
			}
			if written > limit {
				t.Errorf("wrote %d bytes past the limit of %d", written, limit)
			}
			if files := storeFiles(t, s); len(files) != 0 {
				t.Errorf("a pull that cannot finish left %v", files)
			}
			t.Logf("%s: stopped at %d bytes (limit %d): %v", c.name, written, limit, err)
		})
	}
}

// SSRF through /api/pull (issue 22, item 7): with RefusePrivate a pull
// reaches no loopback, link-local or private address: not by an IP
// literal, not by a name that resolves to one (checked after DNS), not by
// a redirect from a public server, and not by a connection the dialer
// makes (checked on the address dialled). "Private" is simulated on
// loopback: the classifier calls 127.0.0.2 private and 127.0.0.1 public.
func TestPullRefusesPrivateDestinations(t *testing.T) {
	data := testModel(t, 11)
	var privateHits atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	inner := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		privateHits.Add(1)
		w.Write(data)
	})}}
	inner.Start()
	defer inner.Close()
	public := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, inner.URL+"/m.gguf", http.StatusFound)
	}))
	defer public.Close()
	simulated := func(a netip.Addr) bool { return a == netip.MustParseAddr("127.0.0.2") }
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(public.URL, "http://"))
	for _, c := range []struct {
		name, url string
		private   func(netip.Addr) bool
	}{
		{"IP literal", inner.URL + "/m.gguf", simulated},
		{"redirect", public.URL + "/m.gguf", simulated},
		{"name resolving to loopback", "http://localhost:" + port + "/m.gguf", nil},
		// Rebinding: the name was public when checked, private when dialled.
		{"dialled address", public.URL + "/m.gguf", func() func(netip.Addr) bool {
			var calls atomic.Int64
			return func(a netip.Addr) bool { return calls.Add(1) > 1 }
		}()},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			_, err := s.Pull(context.Background(), c.url, PullOptions{RefusePrivate: true, private: c.private, Retries: 2})
			if !errors.Is(err, ErrPrivate) || !strings.Contains(err.Error(), "--pull-allow-private") {
				t.Fatalf("err %v, want a refusal of the private address", err)
			}
			if files := storeFiles(t, s); len(files) != 0 {
				t.Errorf("a refused pull left %v", files)
			}
			t.Logf("%v", err)
		})
	}
	if n := privateHits.Load(); n != 0 {
		t.Errorf("the private server got %d requests", n)
	}
	// Allowed (--pull-allow-private): the redirect is followed.
	s := newStore(t)
	if _, err := s.Pull(context.Background(), public.URL+"/m.gguf", PullOptions{Name: "m"}); err != nil || privateHits.Load() != 1 {
		t.Fatalf("allowed pull: %v (%d requests)", err, privateHits.Load())
	}
}
