package main

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/geisten/geist/cmd/internal/daemon/daemontest"
)

// emulatedSkip are the tests left out under qemu (the A72 run of make
// test): the command's end-to-end paths that are the same Go on every CPU
// and heavy under emulation (the sessions' salvage, a tool round's prompt,
// chat over stdin, one conversation through every path, the context
// overflow of a session, bench's JSON: 68 of the 164 s cmd/geist took
// under A72 with a cold build cache). The serve, Wyoming, button and
// model-pool tests still run there, as a check that the daemon works on
// arm64; natively everything runs.
const emulatedSkip = `^(TestSessionsCheckSalvage|TestServeToolRoundPrompt|TestChatStdin|TestOneConversationPath|TestSessionContextOverflow|TestBenchJSON)$`

// TestMain keeps the tests off the user's data directory.
func TestMain(m *testing.M) {
	flag.Parse()
	if daemontest.Emulated() && os.Getenv("GEIST_TEST_EMULATED") != "full" {
		skip := emulatedSkip
		if s := flag.Lookup("test.skip").Value.String(); s != "" {
			skip += "|" + s
		}
		flag.Set("test.skip", skip)
		fmt.Fprintf(os.Stderr, "cmd/geist: under emulation skips %s (tested natively; GEIST_TEST_EMULATED=full runs them)\n", emulatedSkip)
	}
	daemontest.Main(m)
}
