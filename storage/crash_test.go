package storage

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// The crash test re-executes the test binary as a writer (selected by
// crashEnv) and kills it with SIGKILL at a random moment. The writer prints
// "turn <conversation> <seq> <crc>" after each Append returns, so every
// printed turn was committed; a half-printed last line is ignored.
const (
	crashEnv     = "GEIST_STORAGE_CRASH_CHILD"
	crashSeedEnv = "GEIST_STORAGE_CRASH_SEED"
	crashRounds  = 60
)

// Small sizes so that the writer evicts, writes multi-transaction blobs
// and compacts within the fraction of a second it lives.
var crashCacheOpts = CacheOptions{MaxBytes: 2 << 20, ChunkSize: 16 << 10, Timeout: 5 * time.Second}

// crashPrompt is one of a few shared "system prompts" the writer's cache
// keys start with, so prefixes overlap as they do in use.
func crashPrompt(i int) []int32 { return seq(1000*(i+1), 40+10*i) }

// crashTokens is the key of cache write j of a writer seeded with seed.
func crashTokens(r *rand.Rand) []int32 {
	p := crashPrompt(r.IntN(3))
	n := 1 + r.IntN(len(p))
	toks := append([]int32{}, p[:n]...)
	for range r.IntN(30) {
		toks = append(toks, int32(r.IntN(5)))
	}
	return toks
}

const crashBlobLo, crashBlobHi = 100, 200 << 10

// statsBlob is self-checking: a CRC-32C of the rest, then the rest.
func statsBlob(r *rand.Rand) []byte {
	body := []byte(strings.Repeat(fmt.Sprint(r.Uint64()), 1+r.IntN(200)))
	return append(binary.BigEndian.AppendUint32(nil, crc32.Checksum(body, castagnoli)), body...)
}

func turnSum(t Turn) uint32 {
	return crc32.Checksum(encodeTurn(Turn{Role: t.Role, Text: t.Text, Tokens: t.Tokens}), castagnoli)
}

func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("the writer process of TestCrashSafety")
	}
	seed, _ := strconv.ParseUint(os.Getenv(crashSeedEnv), 10, 64)
	if err := crashWriter(dir, seed); err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
}

func crashWriter(dir string, seed uint64) error {
	r := rand.New(rand.NewPCG(seed, 99))
	out := bufio.NewWriter(os.Stdout)
	s, err := OpenSessions(filepath.Join(dir, "sessions.db"), &Options{Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	c, err := OpenCache(filepath.Join(dir, "cache.db"), &crashCacheOpts)
	if err != nil {
		return err
	}
	c.txMax = 48 << 10 // blobs above three chunks take several transactions
	fmt.Fprintln(out, "ready")
	out.Flush()
	for _, id := range []string{"c0", "c1", "c2", "scratch"} {
		if _, err := s.Create(Conversation{ID: id, Model: "m", System: "sys"}); err != nil && !errors.Is(err, ErrExists) {
			return err
		}
	}
	for i := 0; ; i++ {
		switch op := r.IntN(20); {
		case op < 9:
			id := fmt.Sprintf("c%d", r.IntN(3))
			turn := Turn{Role: "user", Text: strings.Repeat(fmt.Sprintf("%d.%d ", seed, i), 1+r.IntN(2000)), Tokens: seq(r.IntN(1000), r.IntN(500))}
			seqs, err := s.Append(id, turn)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "turn %s %d %d\n", id, seqs[0], turnSum(turn))
			out.Flush()
		case op < 10:
			if _, err := s.Append("scratch", Turn{Role: "user", Text: strings.Repeat("x", r.IntN(5000))}); err != nil {
				return err
			}
			_, turns, err := s.Get("scratch")
			if err != nil {
				return err
			}
			if len(turns) > 5 {
				if err := s.ReplaceTurns("scratch", turns[len(turns)-5:]); err != nil {
					return err
				}
			}
		case op < 11:
			if err := s.SetSetting("k", strconv.Itoa(i)); err != nil {
				return err
			}
		case op < 17:
			toks := crashTokens(r)
			if err := c.Put(modelA, toks, blobFor(toks, crashBlobLo, crashBlobHi)); err != nil {
				return err
			}
		case op < 18:
			if err := c.PutDraftStats(modelA, statsBlob(r)); err != nil {
				return err
			}
		case op < 19:
			c.Lookup(modelA, crashTokens(r))
		default:
			if err := c.Compact(); err != nil {
				return err
			}
		}
	}
}

func TestCrashSafety(t *testing.T) {
	if runtime.GOARCH != "amd64" && os.Getenv("GEIST_STORAGE_CRASH") == "" {
		t.Skipf("crash test skipped on %s (slow under qemu emulation); set GEIST_STORAGE_CRASH=1 to run it", runtime.GOARCH)
	}
	if os.Getenv(crashEnv) != "" {
		t.Skip("inside the writer")
	}
	dir := t.TempDir()
	type turnID struct {
		conv string
		seq  uint64
	}
	committed := map[turnID]uint32{}
	r := rand.New(rand.NewPCG(2026, 5))
	var hits, misses, maxTurnLines, midBlob, midCompact int
	start := time.Now()
	for round := range crashRounds {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+dir, crashSeedEnv+"="+strconv.Itoa(round))
		var stdout, stderr bytes.Buffer
		cmd.Stderr = &stderr
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ready, eof := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(eof)
			sc := bufio.NewReader(pipe)
			for {
				line, err := sc.ReadString('\n')
				if line == "ready\n" {
					close(ready)
				}
				stdout.WriteString(line)
				if err != nil {
					return
				}
			}
		}()
		// Every fifth round while it opens and recovers, else while it
		// writes (slow machines and the race detector delay the start).
		if round%5 != 0 {
			select {
			case <-ready:
			case <-eof:
			case <-time.After(20 * time.Second):
			}
		}
		time.Sleep(time.Duration(r.IntN(250)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-eof
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("round %d: writer was not killed (%v): %s%s", round, err, stdout.String(), stderr.String())
		}
		lines := 0
		complete, _, _ := cutLast(stdout.String(), "\n") // a killed writer may leave half a line
		for _, line := range strings.Split(complete, "\n") {
			f := strings.Fields(line)
			if len(f) != 4 || f[0] != "turn" {
				continue
			}
			seq, err1 := strconv.ParseUint(f[2], 10, 64)
			sum, err2 := strconv.ParseUint(f[3], 10, 32)
			if err1 != nil || err2 != nil {
				continue
			}
			committed[turnID{f[1], seq}] = uint32(sum)
			lines++
		}
		maxTurnLines = max(maxTurnLines, lines)

		// Both databases open; every reported turn is there.
		s, err := OpenSessions(filepath.Join(dir, "sessions.db"), nil)
		if err != nil {
			t.Fatalf("round %d: sessions: %v", round, err)
		}
		found := map[turnID]uint32{}
		for _, id := range []string{"c0", "c1", "c2", "scratch"} {
			_, turns, err := s.Get(id)
			if err != nil && !errors.Is(err, ErrNotFound) {
				t.Fatalf("round %d: %v", round, err)
			}
			for _, tu := range turns {
				found[turnID{id, tu.Seq}] = turnSum(tu)
			}
		}
		for id, sum := range committed {
			if got, ok := found[id]; !ok || got != sum {
				t.Fatalf("round %d: committed turn %v lost or changed (present %v)", round, id, ok)
			}
		}
		s.Close()

		// What the kill interrupted: a multi-transaction blob, a compaction.
		cachePath := filepath.Join(dir, "cache.db")
		if _, err := os.Stat(cachePath + ".compact"); err == nil {
			midCompact++
		}
		if db, err := bolt.Open(cachePath, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second}); err == nil {
			_ = db.View(func(tx *bolt.Tx) error {
				if b := tx.Bucket(bktPending); b != nil && b.Stats().KeyN > 0 {
					midBlob++
				}
				return nil
			})
			db.Close()
		}

		log, lb := newLog(t)
		c, err := OpenCache(filepath.Join(dir, "cache.db"), &CacheOptions{Logger: log, MaxBytes: crashCacheOpts.MaxBytes, ChunkSize: crashCacheOpts.ChunkSize})
		if err != nil {
			t.Fatalf("round %d: cache: %v", round, err)
		}
		if st := c.Stats(); st.Resets != 0 {
			t.Fatalf("round %d: a killed writer left a damaged cache: %s", round, lb.String())
		}
		c.audit(t)
		for range 20 {
			q := crashTokens(r)
			if n, blob, ok := c.Lookup(modelA, q); ok {
				hits++
				if !bytes.Equal(blob, blobFor(q[:n], crashBlobLo, crashBlobHi)) {
					t.Fatalf("round %d: wrong blob for a %d-token prefix", round, n)
				}
			} else {
				misses++
			}
		}
		if st, ok := c.DraftStats(modelA); ok {
			if len(st) < 4 || crc32.Checksum(st[4:], castagnoli) != binary.BigEndian.Uint32(st) {
				t.Fatalf("round %d: wrong drafting statistics", round)
			}
		}
		if st := c.Stats(); st.Corrupt != 0 {
			t.Fatalf("round %d: damaged entries after a kill: %s", round, lb.String())
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
	t.Logf("%d rounds in %v: %d committed turns checked, up to %d per round; %d cache hits (all verified), %d misses; killed %d times inside a multi-transaction blob write, %d times inside a compaction",
		crashRounds, time.Since(start).Round(time.Millisecond), len(committed), maxTurnLines, hits, misses, midBlob, midCompact)
	if len(committed) < crashRounds || hits == 0 {
		t.Fatal("the writer did too little work for the test to mean anything")
	}
}

// cutLast splits s around the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return "", s, false
}
