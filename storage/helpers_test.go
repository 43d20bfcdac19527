package storage

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// logBuf collects log lines for assertions.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuf) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Reset()
}

// expect fails unless a logged line contains every part.
func (l *logBuf) expect(t *testing.T, parts ...string) {
	t.Helper()
	for _, line := range strings.Split(l.String(), "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return
		}
	}
	t.Errorf("no log line contains %q; log:\n%s", parts, l.String())
}

func newLog(t *testing.T) (*slog.Logger, *logBuf) {
	lb := &logBuf{}
	return slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

// checkFile opens a closed database file and runs bbolt's consistency
// check on it, as bbolt's own test helpers do on cleanup.
func checkFile(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: DefaultTimeout, ReadOnly: true})
	if err != nil {
		t.Errorf("reopen %s: %v", path, err)
		return
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("%s: %v", filepath.Base(path), err)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}

// testSessions opens a sessions database in a temporary directory and
// checks it when the test ends.
func testSessions(t *testing.T, opts *Options) (*Sessions, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sessions.db")
	s, err := OpenSessions(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		checkFile(t, path)
	})
	return s, path
}

// testCache opens a cache in a temporary directory and checks it when the
// test ends.
func testCache(t *testing.T, opts *CacheOptions) (*Cache, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cache.db")
	c, err := OpenCache(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		checkFile(t, path)
	})
	return c, path
}
