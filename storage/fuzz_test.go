package storage

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// fuzzSeedFile is a small sessions file: two conversations, a setting, on
// 512-byte pages (the fuzzer minimizes every input it finds interesting,
// byte by byte: a file of 4 KiB pages takes it minutes).
func fuzzSeedFile(f *testing.F) []byte {
	path := filepath.Join(f.TempDir(), "seed.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{PageSize: 512})
	if err != nil {
		f.Fatal(err)
	}
	s := &Sessions{db: db, log: discardLogger, now: time.Now, lim: DefaultSessionLimits, idx: map[string]convStat{}}
	if err := s.upgrade(path, migrations, sessionsSchema); err != nil {
		f.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := s.Create(Conversation{ID: id, Model: "m"}); err != nil {
			f.Fatal(err)
		}
		if _, err := s.Append(id, Turn{Role: "user", Text: "hi " + id, Tokens: []int32{1, 2}}, Turn{Role: "assistant", Text: "hello"}); err != nil {
			f.Fatal(err)
		}
	}
	if err := s.SetSetting("dashboard", "3"); err != nil {
		f.Fatal(err)
	}
	if err := s.Close(); err != nil {
		f.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	// bbolt grows its file in steps; keep the pages in use (and the 4 KiB
	// bbolt reads first).
	if _, ps, _, ok := metaOf(b); ok {
		var hw uint64
		for i := range 2 {
			hw = max(hw, ne.Uint64(b[i*ps+56:]))
		}
		b = b[:max(4096, int(hw)*ps)]
	}
	f.Logf("seed file: %d bytes", len(b))
	return b
}

// FuzzSalvage: whatever the bytes of sessions.db, opening and checking it
// returns (no crash), salvaging it yields a file that checks sound and
// opens, and the page walker never trips over its own bounds.
func FuzzSalvage(f *testing.F) {
	seed := fuzzSeedFile(f)
	f.Add(seed)
	half := append([]byte(nil), seed[:len(seed)/2]...)
	f.Add(half)
	flipped := append([]byte(nil), seed...)
	for i := 2 * 512; i < len(flipped); i += 97 {
		flipped[i] ^= 0x41
	}
	f.Add(flipped)
	f.Add([]byte{})
	dir := memDir(&testing.T{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<20 {
			return
		}

		var rep SalvageReport
		readAll(b, &rep)

		for _, p := range rep.Problems {
			if strings.HasPrefix(p, "walker stopped") {
				t.Fatalf("walker: %s", p)
			}
		}
		d, err := os.MkdirTemp(dir, "f")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(d)
		path := filepath.Join(d, "sessions.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := CheckSessions(path); err == nil {
			return
		}
		if s, err := OpenSessions(path, &Options{ReadOnly: true}); err == nil {
			s.Close()
		}
		if _, err := SalvageSessions(path, nil); err != nil {
			t.Fatalf("salvage: %v", err)
		}
		if err := CheckSessions(path); err != nil {
			t.Fatalf("the salvaged file: %v", err)
		}
	})
}

// FuzzDecodeTurn: a turn record decodes or fails, and what decodes encodes
// back to the same bytes.
func FuzzDecodeTurn(f *testing.F) {
	f.Add(encodeTurn(Turn{Role: "user", Text: "hello", Tokens: []int32{1, -2, 300000}}))
	f.Add([]byte{turnFormat})
	f.Fuzz(func(t *testing.T, v []byte) {
		tn, err := decodeTurn(seqKey(1), v)
		if err != nil {
			if !errors.Is(err, errBadTurn) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if got := encodeTurn(tn); !bytes.Equal(got, v) && len(tn.Tokens) > 0 {
			// Varints have one shortest form; a longer one decodes too.
			if _, err := decodeTurn(seqKey(1), got); err != nil {
				t.Fatalf("re-encoded turn does not decode: %v", err)
			}
		}
	})
}
