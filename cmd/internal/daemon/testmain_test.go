package daemon

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// TestMain points the default data directory (sessions.db, cache.db) at a
// temporary one, so tests never touch the user's.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "geist-test-data-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_DATA_HOME", dir)
	os.Unsetenv("STATE_DIRECTORY")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// emulated reports whether the test binary runs under qemu-user, where
// timing-bound tests are meaningless.
func emulated() bool {
	if runtime.GOARCH != "arm64" {
		return false
	}
	b, _ := os.ReadFile("/proc/cpuinfo")
	s := string(b)
	return strings.Contains(s, "GenuineIntel") || strings.Contains(s, "AuthenticAMD")
}

// serveModel is the zoo's smallest model, which the pool tests load.
const serveModel = "stories260K-Q4_0.gguf"

// syncBuffer is a bytes.Buffer safe for the logger and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
