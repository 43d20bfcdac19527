// Package daemontest holds what the tests of the daemon
// (cmd/internal/daemon) and of the command that runs it (cmd/geist)
// share: a TestMain that keeps them off the user's data directory, a log
// buffer safe across goroutines, and whether the test binary runs under
// qemu-user.
package daemontest

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Main runs m's tests with the default data directory (sessions.db,
// cache.db) pointed at a temporary one, so tests never touch the
// user's, and exits with their status. Call it from TestMain.
func Main(m *testing.M) {
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

// Emulated reports whether the test binary runs under qemu-user, where
// timing-bound tests are meaningless.
func Emulated() bool {
	if runtime.GOARCH != "arm64" {
		return false
	}
	b, _ := os.ReadFile("/proc/cpuinfo")
	s := string(b)
	return strings.Contains(s, "GenuineIntel") || strings.Contains(s, "AuthenticAMD")
}

// SyncBuffer is a bytes.Buffer safe for the logger and the test.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
