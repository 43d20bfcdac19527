package main

import (
	"testing"

	"github.com/geisten/geist/cmd/internal/daemon/daemontest"
)

// TestMain keeps the tests off the user's data directory.
func TestMain(m *testing.M) { daemontest.Main(m) }
