package main

import (
	"os"
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
