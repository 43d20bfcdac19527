package daemon

import (
	"testing"

	"github.com/geisten/geist/cmd/internal/daemon/daemontest"
)

// TestMain keeps the tests off the user's data directory.
func TestMain(m *testing.M) { daemontest.Main(m) }

// serveModel is the zoo's smallest model, which the pool tests load.
const serveModel = "stories260K-Q4_0.gguf"
