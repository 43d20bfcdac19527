package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/cmd/internal/daemon"
	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/sample"
	"github.com/geisten/geist/engine/zoo"
)

// rawShare sends a request to the control socket by hand: its head, then
// body (which may be shorter than the Content-Length it declares), and
// returns the answer's status, body and how long it took to come.
func rawShare(t *testing.T, sock, path string, head map[string]string, length int, body []byte) (int, string, time.Duration) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: geist\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n", path, length)
	for k, v := range head {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	start := time.Now()
	if _, err := c.Write(append([]byte(b.String()), body...)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s: no answer: %v", path, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(msg), time.Since(start)
}

func putHead(model []byte, toks int, blob []byte) map[string]string {
	return map[string]string{"Geist-Model": hex.EncodeToString(model), "Geist-Tokens": fmt.Sprint(toks),
		"Geist-Crc32c": fmt.Sprintf("%08x", crc32.Checksum(blob, crc32.MakeTable(crc32.Castagnoli)))}
}

// runText runs geist run greedily with --stats and returns its text and
// statistics.
func runText(t *testing.T, args ...string) (string, engine.Stats) {
	t.Helper()
	code, out, errs := geist(t, "", append([]string{"run", "--stats", "--temp", "0", "-n", "12"}, args...)...)
	var st engine.Stats
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	if code != 0 || json.Unmarshal([]byte(lines[len(lines)-1]), &st) != nil {
		t.Fatalf("run %v: exit %d, stderr %q", args, code, errs)
	}
	return out, st
}

// TestCacheShareGuards (issue 33): through geist serve's control socket,
// a put that declares 64 MiB and sends nothing holds the one put slot
// for about 2 s, not 30 (408; another put meanwhile is told 503); a
// lookup whose body never comes is dropped as soon; a forged snapshot
// (well formed, the right model and tokens, keys that are not finite or
// too large) is refused with 422 and the next run beside serve answers
// as the cold run does; the genuine snapshot of the same tokens is
// stored and restored, with the same answer.
func TestCacheShareGuards(t *testing.T) {
	if testing.Short() {
		t.Skip("no arm64 code: run natively")
	}
	model := zoo.Path(t, "models", serveModel)
	dir := t.TempDir()
	stop, logs := runServe(t, "-m", model, "--data-dir", dir)
	httpAddr(t, logs) // serving: the cache is shared
	sock := filepath.Join(dir, daemon.SocketName)
	sys := strings.TrimSpace(strings.Repeat("Once upon a time there was a little girl named Lily who loved to play in the park with her dog. ", 6))
	args := []string{"-m", model, "--chat", "--system", sys, "hi"}
	cold, _ := runText(t, append([]string{"--data-dir", t.TempDir(), "--cache-size", "0"}, args...)...)

	// The genuine snapshot of the prefix run looks up, computed here.
	e, err := engine.Load(model, engine.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	req := engine.Request{Prompt: "hi", Chat: true, System: sys, MaxTokens: 1, Sampling: sample.DefaultParams()}
	prompt, err := e.Tokens(&req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Generate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	toks := prompt[:len(prompt)-1]
	genuine, err := e.State().Snapshot(len(toks), nil)
	if err != nil {
		t.Fatal(err)
	}
	body := func(blob []byte) []byte { return append(daemon.PutTokens(nil, toks), blob...) }

	// A put that sends nothing, and one beside it.
	stalled := make(chan string, 1)
	go func() {
		code, msg, took := rawShare(t, sock, "/v1/cache/put", putHead(e.ModelID(), len(toks), genuine), 64<<20, nil)
		stalled <- fmt.Sprintf("%d %s after %v", code, strings.TrimSpace(msg), took.Round(time.Millisecond))
		if code != http.StatusRequestTimeout || took > 4*time.Second {
			t.Errorf("a put that sends nothing: %d %s after %v, want 408 within about 2 s", code, msg, took)
		}
	}()
	time.Sleep(300 * time.Millisecond)
	if code, msg, _ := rawShare(t, sock, "/v1/cache/put", putHead(e.ModelID(), len(toks), genuine), len(body(genuine)), body(genuine)); code != http.StatusServiceUnavailable {
		t.Errorf("a put beside the stalled one: %d %s, want 503", code, msg)
	}
	t.Logf("stalled put: %s", <-stalled)
	code, msg, took := rawShare(t, sock, "/v1/cache/lookup", map[string]string{"Geist-Model": hex.EncodeToString(e.ModelID()), "Geist-Max-Bytes": "1000000"}, 4*len(toks), nil)
	if code != http.StatusRequestTimeout || took > 4*time.Second {
		t.Errorf("a lookup that sends no tokens: %d %s after %v, want 408 within about 2 s", code, msg, took)
	}

	// Forged: keys that are not finite, or far beyond any model's.
	for name, v := range map[string][2]byte{"infinite": {0x00, 0x7c}, "huge": {0xff, 0x7b}} {
		forged := append([]byte(nil), genuine...)
		for i := 32 + 100; i+1 < len(forged); i += 97 * 2 {
			forged[i], forged[i+1] = v[0], v[1]
		}
		code, msg, _ := rawShare(t, sock, "/v1/cache/put", putHead(e.ModelID(), len(toks), forged), len(body(forged)), body(forged))
		if code != http.StatusUnprocessableEntity || !strings.Contains(msg, "the snapshot was refused") {
			t.Errorf("%s keys: %d %s, want 422", name, code, msg)
		}
	}
	got, st := runText(t, append([]string{"--data-dir", dir}, args...)...)
	if st.RestoredTokens != 0 || got != cold {
		t.Errorf("after the forged puts: restored %d, answer %q, want 0 and the cold %q", st.RestoredTokens, got, cold)
	}

	// The genuine one is stored, restored, and answers the same.
	// (503 while the daemon still stores the last run's own snapshot.)
	waitFor(t, 10*time.Second, "the genuine put accepted", func() bool {
		code, msg, _ := rawShare(t, sock, "/v1/cache/put", putHead(e.ModelID(), len(toks), genuine), len(body(genuine)), body(genuine))
		if code != http.StatusAccepted && code != http.StatusServiceUnavailable {
			t.Fatalf("the genuine put: %d %s", code, msg)
		}
		return code == http.StatusAccepted
	})
	waitFor(t, 10*time.Second, "the genuine snapshot restored", func() bool {
		got, st = runText(t, append([]string{"--data-dir", dir}, args...)...)
		return st.RestoredTokens == len(toks) // (the runs store the system prompt's prefix too)
	})
	if st.RestoredTokens != len(toks) || got != cold {
		t.Errorf("after the genuine put: restored %d of %d, answer %q, want the cold %q", st.RestoredTokens, len(toks), got, cold)
	}
	if code := stop(); code != 0 {
		t.Fatalf("serve: exit %d\n%s", code, logs.String())
	}
}
