package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/appliance"
)

// A sound sessions.db on a read-only file system is reported as
// read-only, not as damaged beyond salvage (issue 22, item 8), and is
// left as it was. The file system is a tmpfs mounted for the test (root
// only; skipped, saying so, elsewhere).
func TestReadOnlySessionsNotDamaged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a read-only tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	s := OpenStorage(dir, StorageOptions{})
	if s.Problem != "" {
		t.Fatalf("fresh storage: %s", s.Problem)
	}
	if err := s.Sessions.Append("kept", appliance.Message{Role: "user", Content: "hello"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if out, err := exec.Command("mount", "-o", "remount,ro", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot remount read-only: %v %s", err, out)
	}
	s = OpenStorage(dir, StorageOptions{})
	s.Close()
	ro := s.Problem
	if !strings.Contains(s.Problem, "read-only") || strings.Contains(s.Problem, "damaged") {
		t.Errorf("read-only file system reported as %q", s.Problem)
	}
	if out, err := exec.Command("mount", "-o", "remount,rw", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount rw: %v %s", err, out)
	}
	s = OpenStorage(dir, StorageOptions{})
	defer s.Close()
	if list, err := s.Sessions.List(); err != nil || len(list) != 1 {
		msgs := list
		t.Errorf("the session after the read-only start: %v %v", msgs, err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "sessions.db.*")); len(m) != 0 {
		t.Errorf("files set aside: %v", m)
	}
	t.Logf("read-only: %s", ro)
}
