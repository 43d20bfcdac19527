// Package wyomingtest runs the reference Wyoming client against a server
// in tests: peer/wyoming-ask.py, built on the rhasspy wyoming package that
// Home Assistant's Wyoming integration uses.
package wyomingtest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/zoo"
)

// Ask runs wyoming-ask.py ADDR args... (describe, or ask TEXT
// [CONVERSATION]) and returns the event it printed. It skips the test,
// saying why, without the script (GEIST_PEER) or python3.
func Ask(t testing.TB, addr string, args ...string) (typ string, data map[string]any) {
	t.Helper()
	script := zoo.Peer(t, "wyoming-ask.py")
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: the reference Wyoming client needs it")
	}
	cmd := exec.Command(py, append([]string{script, addr}, args...)...)
	cmd.Env = append(os.Environ(), "WYOMING_TIMEOUT=60")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("wyoming-ask.py %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	var ev struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(out, &ev); err != nil {
		t.Fatalf("wyoming-ask.py printed %q: %v", out, err)
	}
	return ev.Type, ev.Data
}
