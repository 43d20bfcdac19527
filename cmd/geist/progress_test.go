package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/geisten/geist/engine/zoo"
)

// TestPromptLineTerminal: geist run and geist chat on a terminal show a
// long prompt's progress on stderr ("reading the prompt N/M (P%)",
// redrawn in place), erased before the answer's text; the answer follows
// on a clean line. (The helper shows the line from the first pass; geist
// itself waits 300 ms, so that short prompts show nothing.)
func TestPromptLineTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts geist in a pseudo-terminal; natively only")
	}
	model := zoo.Path(t, "models", serveModel)
	prompt := strings.Repeat("Once upon a time there was a little girl who liked to play. ", 20)
	for _, args := range [][]string{
		{"run", "-m", model, "--temp", "0", "-n", "8", "--ctx", "2048", prompt},
		{"chat", "-m", model, "--temp", "0", "-n", "8", "--ctx", "2048", "--data-dir", t.TempDir()},
	} {
		t.Run(args[0], func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperGeist$")
			cmd.Env = append(os.Environ(), "GEIST_HELPER_ARGS="+strings.Join(args, "\n"), "GEIST_HELPER_PROMPT_LINE=1",
				"GEIST_HELPER_RSS="+filepath.Join(t.TempDir(), "rss"), "TERM=xterm")
			f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 200})
			if err != nil {
				t.Skipf("no pseudo-terminal: %v", err)
			}
			defer f.Close()
			defer cmd.Process.Kill()
			out := &ptyOutput{}
			go func() {
				b := make([]byte, 4096)
				for {
					n, err := f.Read(b)
					out.mu.Lock()
					out.buf.Write(b[:n])
					out.mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
			waitOut := func(what string, cond func(string) bool) {
				t.Helper()
				for deadline := time.Now().Add(60 * time.Second); !cond(out.String()); time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("timed out waiting for %s; terminal:\n%q", what, out.String())
					}
				}
			}
			if args[0] == "chat" {
				waitOut("the prompt", func(o string) bool { return strings.Contains(o, ">>> ") })
				f.Write([]byte(prompt + "\r"))
				waitOut("the answer's end", func(o string) bool { return strings.Count(o, ">>> ") >= 2 })
				f.Write([]byte{4}) // Ctrl-D
			}
			cmd.Wait()
			o := out.String()
			i := strings.Index(o, "reading the prompt ")
			j := strings.LastIndex(o, "\r\x1b[K")
			if i < 0 || j < i {
				t.Fatalf("no prompt line, or not erased; terminal:\n%q", o)
			}
			line := o[i:]
			if k := strings.Index(line, "\r"); k > 0 {
				line = line[:k]
			}
			if !strings.Contains(line, "/") || !strings.HasSuffix(line, "%)") {
				t.Errorf("prompt line %q", line)
			}
			if strings.Count(o, "reading the prompt ") < 2 {
				t.Errorf("the line was not redrawn as the prompt was read: %q", o)
			}
			if rest := strings.TrimSpace(strings.ReplaceAll(o[j+4:], ">>> ", "")); rest == "" {
				t.Errorf("no answer after the erased line: %q", o)
			}
			t.Logf("%s: %q", args[0], line)
		})
	}
}
