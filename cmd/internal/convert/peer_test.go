package convert

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/tokenizer"
)

// peerPrompts are longer (62-70 tokens of the synthetic vocabulary) than
// testGemma4's window of 8, so that its local layers drop keys, and with
// the generated tokens they run past many windows.
var peerPrompts = []string{
	"Once upon a time, there was a little girl named Lily. She liked to play outside in the sun with her dog.",
	"The quick brown fox jumps over the lazy dog, and then it runs back into the forest before the farmer wakes up.",
	"In 1969, two astronauts walked on the moon: \"That's one small step for man\", said the first of them, slowly.",
}

const peerGenerate, peerTop = 24, 8

// TestGemma4PerLayerMatchesLlamaCpp is the differential test of Gemma 4's
// E2B/E4B features against llama.cpp: per-layer embeddings (llama.cpp's
// project_per_layer_inputs and each layer's inp_gate/proj/post_norm) and
// shared-KV layers (the last SharedKV layers reading the keys and values of
// the last layer of their kind that stores its own). For each synthetic
// shape, llama-server (llama.cpp 0.7.0 from ../shared/peer/setup.sh, in a
// chroot at PEER_ROOT, default /opt/llamacpp-root) decodes 24 tokens
// greedily after each prompt with its top-8 log-probs at every generated
// position; geist scores the prompt and llama.cpp's tokens teacher-forced,
// and the log-probs it gives llama.cpp's top-8 tokens must agree.
//
// The shapes localize a failure: testGemma4 with both features, each
// feature alone, neither, and testLFM2 (no Gemma 4 code at all). Every
// file is F32, so the weights are the same bits in both engines and only
// the arithmetic differs: both keep an F16 KV cache, llama.cpp rounds the
// queries to F16 for their products with it, and the sums run in
// different orders. The norm weights are drawn around 1 (NormStd 0.1):
// with ones, a norm's weight, and even which norm's weight is used, would
// not show.
//
// The tolerance is the zoo's rule (../shared/zoo/README.md): twice
// llama.cpp's disagreement with itself when only its attention kernel
// changes, measured here on each file and the same tokens (a second
// llama-server with flash attention off, teacher-forced along the first
// one's tokens), for the mean over the top-8 log-probs of every generated
// position; three times it for the worst, one token at one position, whose
// tail is long (geist's worst came to 3x llama.cpp's on a file with unit
// norms, its mean to 1.0-1.4x). Gemma 4's attention has no 1/sqrt(d)
// scale behind its RMS-normed queries and keys, so an F16 rounding moves a
// score by up to ~0.01 and its envelope is 10-60 times LFM2's: llama.cpp's
// own disagreement is max 0.04-0.09, mean 0.003-0.013 nats on the Gemma 4
// files, 0.001 and 0.0002 on LFM2's. A feature left out or wired to the
// wrong tensor lands far outside, on the files with it only: skipping
// the per-layer model projection, the per-layer gate's GELU or
// per_layer_proj_norm's weight, letting the shared layers keep keys and
// values of their own, or reading the local ones' from layer 2 instead of
// 3 moves the log-probs by 0.19-0.77 nats on average (0.8-2 at worst).
func TestGemma4PerLayerMatchesLlamaCpp(t *testing.T) {
	root := os.Getenv("PEER_ROOT")
	if root == "" {
		root = "/opt/llamacpp-root"
	}
	if _, err := os.Stat(filepath.Join(root, "usr/bin/llama-server")); err != nil || os.Geteuid() != 0 {
		t.Skipf("llama.cpp's llama-server in %s (../shared/peer/setup.sh) and root to chroot into it are needed", root)
	}
	if testing.Short() {
		t.Skip("-short: runs llama.cpp's server")
	}
	work, err := os.MkdirTemp(filepath.Join(root, "tmp"), "geist-gemma4-")
	if err != nil {
		t.Skip(err)
	}
	defer os.RemoveAll(work)
	inside := "/" + strings.TrimPrefix(work, root+"/")

	pleOnly, sharedOnly, plain := testGemma4, testGemma4, testGemma4
	pleOnly.Name, pleOnly.SharedKV, pleOnly.FFNShared = "test-gemma4-ple", 0, 0
	sharedOnly.Name, sharedOnly.PerLayer = "test-gemma4-shared", 0
	plain.Name, plain.PerLayer, plain.SharedKV, plain.FFNShared = "test-gemma4-plain", 0, 0, 0
	for _, s := range []Shape{testGemma4, pleOnly, sharedOnly, plain, testLFM2} {
		t.Run(s.Name, func(t *testing.T) {
			start := time.Now()
			name := s.Name + "-F32.gguf"
			path := filepath.Join(work, name)
			if _, err := Synth(context.Background(), s, AllF32, path, SynthOptions{Seed: 7, Threads: 2, NormStd: 0.1}); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(path)
			e, err := engine.Load(path, engine.Options{Threads: 2, Ctx: 256, SelfSpec: engine.SelfSpecOff})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			tok := e.Tokenizer()
			ref := startLlamaServer(t, root, inside+"/"+name, tok, "-fa", "on")
			alt := startLlamaServer(t, root, inside+"/"+name, tok, "-fa", "off")
			var geist, self peerDiff
			positions := 0
			for i, text := range peerPrompts {
				prompt := tok.Encode(text, true, false)
				gen := ref.complete(t, prompt, peerGenerate, peerTop)
				// geist, teacher-forced on llama.cpp's tokens.
				lps, err := e.Score(context.Background(), append(slices.Clone(prompt), gen.ids...), s.Vocab)
				if err != nil {
					t.Fatal(err)
				}
				// llama.cpp without flash attention, along the same tokens.
				alts := alt.forced(t, prompt, gen.ids, 4*peerTop)
				var g, a peerDiff
				for k, want := range gen.top {
					if want == nil {
						continue
					}
					positions++
					got := make(map[int32]float64, s.Vocab)
					for _, lp := range lps[len(prompt)-1+k] {
						got[lp.ID] = lp.Logprob
					}
					g.add(want, got)
					if alts[k] == nil {
						continue
					}
					clear(got)
					for _, lp := range alts[k] {
						got[lp.ID] = lp.Logprob
					}
					a.add(want, got)
				}
				t.Logf("prompt %d (%d tokens, %d generated): geist max |Δlogprob| %.5f, mean %.6f; llama.cpp flash attention off: max %.5f, mean %.6f",
					i, len(prompt), len(gen.ids), g.max, g.mean(), a.max, a.mean())
				geist.merge(g)
				self.merge(a)
			}
			// Floors keep a file on which llama.cpp agrees with itself bit
			// for bit from asking geist for that.
			maxTol, meanTol := max(3*self.max, 0.005), max(2*self.mean(), 0.0005)
			t.Logf("%s: %d positions x top-%d: geist max |Δlogprob| %.5f, mean %.6f (tolerance %.4f, %.5f); llama.cpp with flash attention off: max %.5f, mean %.6f (%d tokens it lacked in its top-%d); %.1fs",
				s.Name, positions, peerTop, geist.max, geist.mean(), maxTol, meanTol, self.max, self.mean(), self.missing, 4*peerTop, time.Since(start).Seconds())
			if self.n < positions*peerTop/2 {
				t.Fatalf("%s: llama.cpp's two servers have only %d log-probs in common", s.Name, self.n)
			}
			if geist.max > maxTol || geist.mean() > meanTol {
				t.Errorf("%s: geist's log-probs differ from llama.cpp's by max %.5f, mean %.6f nats (tolerance %.4f, %.5f)", s.Name, geist.max, geist.mean(), maxTol, meanTol)
			}
		})
	}
}

// peerDiff sums the absolute differences of log-probs.
type peerDiff struct {
	max, sum   float64
	n, missing int
}

// add compares the log-probs of want's tokens with got's (a token got
// lacks is counted as missing).
func (d *peerDiff) add(want []peerLogprob, got map[int32]float64) {
	for _, w := range want {
		g, ok := got[w.ID]
		if !ok {
			d.missing++
			continue
		}
		x := math.Abs(g - w.Logprob)
		d.max = max(d.max, x)
		d.sum += x
		d.n++
	}
}

func (d *peerDiff) merge(o peerDiff) {
	d.max = max(d.max, o.max)
	d.sum += o.sum
	d.n += o.n
	d.missing += o.missing
}

func (d *peerDiff) mean() float64 { return d.sum / float64(max(d.n, 1)) }

// llamaServer is a llama-server started for one model.
type llamaServer struct {
	url   string
	piece func(id int32, special bool) []byte // the model's token texts
}

// startLlamaServer starts llama-server in the chroot root on a free
// loopback port for the model at inside (a path in the chroot), whose
// tokens tok renders, with the extra arguments args, and stops it when
// the test ends.
func startLlamaServer(t *testing.T, root, inside string, tok *tokenizer.Tokenizer, args ...string) *llamaServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logPath := filepath.Join(t.TempDir(), "llama-server.log")
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	showLog := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	// --load-mode none: llama.cpp's mmap loading is very slow on some
	// VMs, and this build refuses --no-mmap. -t 1: ggml's threads spin
	// while they wait, which on shared cores made a file take 50s, not 2.
	cmd := exec.Command("chroot", append([]string{root, "/usr/bin/llama-server", "-m", inside, "--load-mode", "none",
		"-t", "1", "-c", "256", "-np", "1", "--host", "127.0.0.1", "--port", fmt.Sprint(port)}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	s := &llamaServer{url: fmt.Sprintf("http://127.0.0.1:%d", port), piece: tok.TokenToPiece}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("llama-server exited: %v\n%s", err, showLog())
		case <-time.After(200 * time.Millisecond):
		}
		if r, err := http.Get(s.url + "/health"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("llama-server not ready after 2 minutes\n%s", showLog())
		}
	}
}

type peerLogprob struct {
	ID      int32   `json:"id"`
	Logprob float64 `json:"logprob"`
}

// peerGen is what llama-server generated: the tokens, and the top
// log-probs before each (nil where it held them back).
type peerGen struct {
	ids []int32
	top [][]peerLogprob
}

// complete asks for n greedy tokens after prompt (token ids, taken as
// they are: no BOS added) with the top log-probs of each. llama-server
// leaves out the log-probs of a token after which its text ends inside
// a UTF-8 character (its validate_utf8): the text of the pieces, as
// piece renders them, tells which those are.
func (s *llamaServer) complete(t *testing.T, prompt []int32, n, top int) peerGen {
	t.Helper()
	req, _ := json.Marshal(map[string]any{
		"prompt": prompt, "n_predict": n, "temperature": 0, "n_probs": top,
		"cache_prompt": false, "ignore_eos": true, "return_tokens": true,
	})
	r, err := http.Post(s.url+"/completion", "application/json", bytes.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var res struct {
		Evaluated int     `json:"tokens_evaluated"`
		Tokens    []int32 `json:"tokens"`
		Probs     []struct {
			ID  int32         `json:"id"`
			Top []peerLogprob `json:"top_logprobs"`
		} `json:"completion_probabilities"`
	}
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &res); err != nil || r.StatusCode != http.StatusOK {
		t.Fatalf("llama-server /completion: status %d, %v\n%s", r.StatusCode, err, body)
	}
	if res.Evaluated != len(prompt) || len(res.Tokens) != n {
		t.Fatalf("llama-server evaluated %d of %d prompt tokens and generated %d of %d", res.Evaluated, len(prompt), len(res.Tokens), n)
	}
	g := peerGen{ids: res.Tokens, top: make([][]peerLogprob, n)}
	var text []byte
	j := 0
	for i, id := range res.Tokens {
		text = append(text, s.piece(id, false)...)
		if incompleteUTF8(text) {
			continue
		}
		if j == len(res.Probs) || res.Probs[j].ID != id {
			t.Fatalf("llama-server's log-probs are not those of its tokens after the held-back ones: token %d is %d (tokens %v)\n%s", i, id, res.Tokens, body)
		}
		p := res.Probs[j].Top
		if len(p) != top {
			t.Fatalf("llama-server: token %d with top log-probs %+v (want %d)", id, p, top)
		}
		g.top[i] = p
		j++
	}
	if j != len(res.Probs) {
		t.Fatalf("llama-server returned %d log-probs, %d expected (tokens %v)\n%s", len(res.Probs), j, res.Tokens, body)
	}
	return g
}

// incompleteUTF8 reports whether text ends inside a UTF-8 character, as
// llama-server's validate_utf8 finds it.
func incompleteUTF8(text []byte) bool {
	for i := 1; i <= 4 && i <= len(text); i++ {
		c := text[len(text)-i]
		switch {
		case c&0xe0 == 0xc0:
			return i < 2
		case c&0xf0 == 0xe0:
			return i < 3
		case c&0xf8 == 0xf0:
			return i < 4
		}
	}
	return false
}

// forced returns the top log-probs before each of want's tokens after
// prompt, teacher-forced (nil where llama-server held them back): where
// the server's greedy choice parts from want, it is asked again with
// want's tokens up to there in the prompt.
func (s *llamaServer) forced(t *testing.T, prompt, want []int32, top int) [][]peerLogprob {
	t.Helper()
	var out [][]peerLogprob
	for len(out) < len(want) {
		k := len(out)
		gen := s.complete(t, append(slices.Clone(prompt), want[:k]...), len(want)-k, top)
		for j, id := range gen.ids {
			out = append(out, gen.top[j])
			if id != want[k+j] {
				break
			}
		}
	}
	return out
}
