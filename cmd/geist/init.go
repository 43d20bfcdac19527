package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/daemon"
	"github.com/geisten/geist/cmd/internal/models"
	"github.com/geisten/geist/scripts"
)

const initUsage = "init [--dir DIR] [--force]"

// cmdInit writes the sample configuration and the systemd unit the binary
// carries, and says what to do next.
func cmdInit(_ context.Context, e *cli.Env, args []string) error {
	fs := cli.NewFlags(e, "init", initUsage)
	dir := fs.String("dir", ".", "directory to write geist.toml and geist.service into")
	force := fs.Bool("force", false, "overwrite existing files")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	files := []struct {
		name, text string
		mode       os.FileMode
	}{
		{"geist.toml", sampleConfig(daemon.HasGPIOChip()), 0o640}, // may come to hold a broker password
		{"geist.service", scripts.Unit, 0o644},
	}
	if !*force {
		for _, f := range files {
			p := filepath.Join(*dir, f.name)
			if _, err := os.Lstat(p); err == nil {
				return fmt.Errorf("%s exists; not overwriting it (--force does)", p)
			} else if !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if err := writeFileAtomic(filepath.Join(*dir, f.name), []byte(f.text), f.mode); err != nil {
			return err
		}
	}
	conf, unit := filepath.Join(*dir, "geist.toml"), filepath.Join(*dir, "geist.service")
	if abs, err := filepath.Abs(conf); err == nil {
		conf, unit = abs, filepath.Join(filepath.Dir(abs), "geist.service")
	}
	fmt.Fprintf(e.Stdout, `wrote %s and %s

Next steps (scripts/INSTALL.md in the source tree explains each):
  1. A user for the service and its state directory:
       sudo useradd --system --home-dir /var/lib/geist --shell /usr/sbin/nologin geist
       sudo install -d -o geist -g geist -m 0750 /var/lib/geist /var/lib/geist/models
  2. A model (a 0.5-3B instruct model in Q4_0 suits a Pi 4 or 5):
       sudo -u geist geist pull %s
  3. The configuration: model (the name geist pull printed), device, and the
     [mqtt] broker and user:
       $EDITOR %s
       sudo install -D -m 0640 -g geist %s /etc/geist/geist.toml
  4. Check it, then try it in the foreground (Ctrl-C stops it):
       sudo -u geist geist serve --config /etc/geist/geist.toml --check
       sudo -u geist geist serve --config /etc/geist/geist.toml
  5. The service:
       sudo install -m 0644 %s /etc/systemd/system/geist.service
       sudo systemctl daemon-reload && sudo systemctl enable --now geist
       journalctl -u geist -f
`, conf, unit, models.Catalog()[0].Name, conf, conf, unit)
	return nil
}

// writeFileAtomic writes data to a temporary file beside path and renames
// it into place, so that a reader never sees half a file.
func writeFileAtomic(path string, data []byte, mode fs.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// sampleConfig is the sample configuration for this machine: without a
// GPIO chip its [gpio] sections are commented out (serve would ignore
// them anyway), with a line saying why.
func sampleConfig(gpio bool) string {
	if gpio {
		return scripts.Config
	}
	var b strings.Builder
	in := false
	for _, line := range strings.SplitAfter(scripts.Config, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "[") {
			was := in
			in = strings.HasPrefix(t, "[gpio") || strings.HasPrefix(t, "[[gpio")
			if in && !was {
				b.WriteString("# geist init found no GPIO chip on this machine (no /dev/gpiochip*): the\n# [gpio] sections are commented out. On a board with buttons and LEDs,\n# uncomment them ('geist gpio list' names the pins).\n")
			}
		}
		if in && t != "" && !strings.HasPrefix(t, "#") {
			line = "# " + line
		}
		b.WriteString(line)
	}
	return b.String()
}
