package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/appliance"
)

// fillDisk writes a file into dir until the file system has no room left.
func fillDisk(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "ballast"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	for n := 32 << 10; n > 0; n /= 2 { // the last pages
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
}

// A data directory on a full disk (issue 22's review left a 200 MiB tmpfs
// at 0 bytes) is reported as full, not as damaged beyond salvage, and
// nothing is moved aside: a sound sessions.db and cache.db survive, and
// once there is room again the conversation is there. The file system is
// a tmpfs mounted for the test (root only; skipped, saying so, elsewhere).
func TestFullDiskNotDamaged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	for _, c := range []struct {
		name  string
		fresh bool // nothing stored before the disk filled
	}{{"existing files", false}, {"fresh directory", true}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", dir).CombinedOutput(); err != nil {
				t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
			}
			t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
			o := StorageOptions{CacheSize: 1 << 20}
			if !c.fresh {
				s := OpenStorage(dir, o)
				if s.Problem != "" {
					t.Fatalf("fresh storage: %s", s.Problem)
				}
				if err := s.Sessions.Append("kept", appliance.Message{Role: "user", Content: "hello"}); err != nil {
					t.Fatal(err)
				}
				s.Close()
			}
			fillDisk(t, dir)
			s := OpenStorage(dir, o)
			full := s.Problem
			if c.fresh {
				// The files cannot be created: the problem names the disk.
				if !strings.Contains(full, "full") || strings.Contains(full, "damaged") {
					t.Errorf("a full disk reported as %q", full)
				}
			} else {
				// Sound files open (a full disk is /readyz's storage
				// check); a save that finds no room says so.
				if full != "" {
					t.Errorf("sound files on a full disk reported as %q", full)
				}
				err := s.Sessions.Append("kept", appliance.Message{Role: "user", Content: strings.Repeat("x", 256<<10)})
				if err == nil || strings.Contains(err.Error(), "damaged") || strings.Contains(err.Error(), "corrupt") {
					t.Errorf("a save on a full disk: %v", err)
				}
				full = fmt.Sprint(err)
			}
			s.Close()
			if m, _ := filepath.Glob(filepath.Join(dir, "*.db.*")); len(m) != 0 {
				t.Errorf("files set aside on a full disk: %v", m)
			}
			os.Remove(filepath.Join(dir, "ballast"))
			s = OpenStorage(dir, o)
			defer s.Close()
			if s.Problem != "" {
				t.Errorf("with room again: %s", s.Problem)
			}
			if list, err := s.Sessions.List(); err != nil || len(list) != map[bool]int{false: 1, true: 0}[c.fresh] {
				t.Errorf("the sessions after the full-disk start: %v %v", list, err)
			}
			t.Logf("%s: %q", c.name, full)
		})
	}
}
