package models

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/quant"
)

// bigModel is a GGUF file of the architecture arch with an 8 MiB tensor.
func bigModel(t *testing.T, arch string) []byte {
	t.Helper()
	b := gguf.NewBuilder()
	b.Set("general.architecture", arch)
	b.Set(arch+".block_count", uint32(1))
	b.Set(arch+".embedding_length", uint32(64))
	b.Set(arch+".attention.head_count", uint32(4))
	b.Set(arch+".feed_forward_length", uint32(128))
	data := make([]byte, 8<<20)
	r := rand.New(rand.NewPCG(7, 1))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	if err := b.AddTensor("blk.0.ffn_up.weight", quant.F32, []int64{1024, 2048}, data); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// countingServer serves data at /m.gguf with ranges (http.ServeContent)
// and an ETag, counting the body bytes it sends; ignoreRange answers every
// request with the whole file; cutFirst cuts the first response off after
// that many bytes.
type countingServer struct {
	*httptest.Server
	sent, requests atomic.Int64
	ignoreRange    bool
	badRange       atomic.Bool // answer a range with the wrong Content-Range
	cutFirst       int64
	lastMod        bool // Last-Modified only, no ETag
}

type countWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w countWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n.Add(int64(n))
	return n, err
}

func newCountingServer(t *testing.T, data []byte, cs *countingServer) *countingServer {
	mod := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := cs.requests.Add(1)
		if !cs.lastMod {
			w.Header().Set("ETag", `"v1"`)
		}
		cw := countWriter{w, &cs.sent}
		if cs.badRange.Load() && r.Header.Get("Range") != "" {
			w.Header().Set("Content-Range", "bytes 0-99/"+itoa(len(data)))
			w.WriteHeader(http.StatusPartialContent)
			cw.Write(data[:100])
			return
		}
		if cs.ignoreRange || cs.cutFirst > 0 && k == 1 {
			w.Header().Set("Content-Length", itoa(len(data)))
			if cs.lastMod {
				w.Header().Set("Last-Modified", mod.Format(http.TimeFormat))
			}
			if cs.cutFirst > 0 && k == 1 {
				cw.Write(data[:cs.cutFirst])
				panic(http.ErrAbortHandler)
			}
			cw.Write(data)
			return
		}
		http.ServeContent(cw, r, "m.gguf", mod, bytes.NewReader(data))
	}))
	t.Cleanup(cs.Close)
	return cs
}

func itoa(n int) string { return strconv.Itoa(n) }

// A model geist cannot run is refused after its header: the bytes sent
// are the first probe's, not the file's.
func TestPullRefusesAfterTheHeader(t *testing.T) {
	data := bigModel(t, "mamba")
	srv := newCountingServer(t, data, &countingServer{})
	s := newStore(t)
	_, err := s.Pull(context.Background(), srv.URL+"/m.gguf", PullOptions{Retries: 2})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `"mamba"`) || !strings.Contains(err.Error(), "nothing was stored") {
		t.Fatalf("err %v, want the architecture refused", err)
	}
	sent := srv.sent.Load()
	t.Logf("refused after %d of %d bytes", sent, len(data))
	if sent > firstProbe {
		t.Errorf("sent %d bytes of %d, want at most the first probe (%d)", sent, len(data), firstProbe)
	}
	for _, f := range storeFiles(t, s) {
		if !strings.HasSuffix(f, lockExt) {
			t.Errorf("store holds %s", f)
		}
	}
	// From a server without ranges it stops as soon as the header is in.
	srv2 := newCountingServer(t, data, &countingServer{ignoreRange: true})
	var log progressLog
	_, err = s.Pull(context.Background(), srv2.URL+"/m.gguf", PullOptions{Retries: 2, Progress: log.add})
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("err %v", err)
	}
	if !hasDetail(&log, "ignores range requests") {
		t.Errorf("no notice that the server ignores ranges: %+v", log.ps)
	}
}

func hasDetail(l *progressLog, s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.ps {
		if strings.Contains(p.Detail, s) {
			return true
		}
	}
	return false
}

// An accepted model costs no byte more than its size: the probe is the
// start of the file.
func TestPullProbeThenRest(t *testing.T) {
	data := bigModel(t, "llama")
	srv := newCountingServer(t, data, &countingServer{})
	s := newStore(t)
	res, err := s.Pull(context.Background(), srv.URL+"/m.gguf", PullOptions{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Resumed != 0 {
		t.Errorf("resumed %d: the probe is no resume", res.Resumed)
	}
	checkStored(t, s, "m", data)
	if sent := srv.sent.Load(); sent != int64(len(data)) || srv.requests.Load() != 2 {
		t.Errorf("sent %d bytes in %d requests, want %d in 2 (probe, rest)", sent, srv.requests.Load(), len(data))
	}
	// A plain URL whose ETag is unchanged is not fetched again (304).
	before := srv.sent.Load()
	res, err = s.Pull(context.Background(), srv.URL+"/m.gguf", PullOptions{Name: "m"})
	if err != nil || !res.UpToDate || srv.sent.Load() != before {
		t.Errorf("second pull: %+v %v, %d bytes sent", res, err, srv.sent.Load()-before)
	}
	// Nor one with Last-Modified only.
	srv3 := newCountingServer(t, data, &countingServer{lastMod: true})
	if _, err := s.Pull(context.Background(), srv3.URL+"/m.gguf", PullOptions{Name: "m3"}); err != nil {
		t.Fatal(err)
	}
	before = srv3.sent.Load()
	res, err = s.Pull(context.Background(), srv3.URL+"/m.gguf", PullOptions{Name: "m3"})
	if err != nil || !res.UpToDate || srv3.sent.Load() != before {
		t.Errorf("Last-Modified: %+v %v, %d bytes sent", res, err, srv3.sent.Load()-before)
	}
}

// A server that ignores ranges gets the download again from the start,
// said so; one whose Content-Range is not the range asked for too.
func TestPullRangeIgnored(t *testing.T) {
	data := bigModel(t, "llama")
	srv := newCountingServer(t, data, &countingServer{ignoreRange: true, cutFirst: 3 << 20})
	s := newStore(t)
	var log progressLog
	if _, err := s.Pull(context.Background(), srv.URL+"/m.gguf", PullOptions{Name: "m", Retries: 2, Progress: log.add}); err != nil {
		t.Fatal(err)
	}
	checkStored(t, s, "m", data)
	if !hasDetail(&log, "ignores range requests: the 3.00 MiB downloaded before are fetched again") {
		t.Errorf("no notice: %+v", log.ps)
	}
	srv2 := newCountingServer(t, data, &countingServer{cutFirst: 3 << 20})
	srv2.badRange.Store(true)
	var log2 progressLog
	_, err := s.Pull(context.Background(), srv2.URL+"/m.gguf", PullOptions{Name: "m2", Retries: 2, Progress: log2.add})
	if !hasDetail(&log2, "answered the range request from byte") {
		t.Errorf("no notice of the wrong Content-Range (err %v): %+v", err, log2.ps)
	}
}

// Offline, a name that does not resolve ends the pull at once, one line
// naming the URL once.
func TestPullOfflineFailsFast(t *testing.T) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: "huggingface.co", IsNotFound: true}}
	}
	s := newStore(t)
	s.retryDelay = time.Second
	var log progressLog
	t0 := time.Now()
	_, err := s.Pull(context.Background(), "hf:bartowski/Qwen2.5-0.5B-Instruct-GGUF/Qwen2.5-0.5B-Instruct-Q4_0.gguf",
		PullOptions{Retries: 5, Client: &http.Client{Transport: tr}, Progress: log.add})
	if err == nil || !strings.Contains(err.Error(), "cannot resolve huggingface.co") || strings.Count(err.Error(), "https://") != 1 {
		t.Fatalf("err %v", err)
	}
	if el := time.Since(t0); el > 900*time.Millisecond || log.has(StatusRetrying) {
		t.Errorf("took %v with retries (%v): want one attempt", el, log.ps)
	}
}

// TestCheckHeaderEmbedding: pulls take the embedding models geist runs
// (their architectures are not text generators').
func TestCheckHeaderEmbedding(t *testing.T) {
	for _, name := range zoo.EmbedModels {
		b, err := os.ReadFile(zoo.Path(t, "embed", "models", name+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		if done, err := checkHeader(b); !done || err != nil {
			t.Errorf("%s: done %v, %v", name, done, err)
		}
	}
}
