package daemon

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/geisten/geist/cmd/internal/cli"
)

// TestServeCredentials: password files, systemd's credentials as their
// default, the Hermes broker's own password file and TLS files, and the
// warnings about passwords other users can read.
func TestServeCredentials(t *testing.T) {
	dir := t.TempDir()
	e := &cli.Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	// A configuration holding a password, readable by all: a warning.
	open := write("open.toml", "model = \"a.gguf\"\n[mqtt]\nbroker = \"tcp://b:1883\"\npassword = \"secret\"\n", 0o644)
	c, err := ParseConfig(e, []string{"--config", open})
	if err != nil {
		t.Fatal(err)
	}
	if c.MQTT.Password != "secret" || len(c.warnings) != 1 || !strings.Contains(c.warnings[0], "holds a password and every user") {
		t.Errorf("world-readable config: password %q, warnings %q", c.MQTT.Password, c.warnings)
	}
	// The same file readable by its owner only: none.
	os.Chmod(open, 0o600)
	if c, _ := ParseConfig(e, []string{"--config", open}); len(c.warnings) != 0 {
		t.Errorf("private config: warnings %q", c.warnings)
	}
	// A password on the command line: a warning.
	if c, _ := ParseConfig(e, []string{"-m", "a.gguf", "--mqtt-password", "x"}); len(c.warnings) != 1 || !strings.Contains(c.warnings[0], "(ps)") {
		t.Errorf("password flag: warnings %q", c.warnings)
	}
	// systemd's credentials directory: read when nothing else is set.
	creds := filepath.Join(dir, "creds")
	os.Mkdir(creds, 0o700)
	os.WriteFile(filepath.Join(creds, "mqtt-password"), []byte("from-systemd\n"), 0o400)
	os.WriteFile(filepath.Join(creds, "hermes-password"), []byte("hermes-secret\n"), 0o400)
	t.Setenv("CREDENTIALS_DIRECTORY", creds)
	c, err = ParseConfig(e, []string{"-m", "a.gguf", "--hermes-broker", "mqtts://rhasspy:8883"})
	if err != nil {
		t.Fatal(err)
	}
	if c.MQTT.Password != "from-systemd" || c.Hermes.Password != "hermes-secret" || len(c.warnings) != 0 {
		t.Errorf("credentials: mqtt %q, hermes %q, warnings %q", c.MQTT.Password, c.Hermes.Password, c.warnings)
	}
	// A configured password wins over the credential.
	if c, _ := ParseConfig(e, []string{"-m", "a.gguf", "--mqtt-password", "mine"}); c.MQTT.Password != "mine" {
		t.Errorf("configured password replaced by the credential: %q", c.MQTT.Password)
	}
	// The Hermes broker's own password file (readable by all: a warning)
	// and TLS files.
	hp := write("hermes-pw", "h2\n", 0o644)
	c, err = ParseConfig(e, []string{"-m", "a.gguf", "--hermes-broker", "ssl://rhasspy:8883", "--hermes-password-file", hp,
		"--hermes-ca", "/etc/ca.pem", "--hermes-cert", "/etc/c.pem", "--hermes-key", "/etc/c.key"})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Hermes
	if h.Password != "h2" || h.CAFile != "/etc/ca.pem" || h.CertFile != "/etc/c.pem" || h.KeyFile != "/etc/c.key" ||
		len(c.warnings) != 1 || !strings.Contains(c.warnings[0], "hermes password file") {
		t.Errorf("hermes: %+v, warnings %q", h, c.warnings)
	}
	if _, err := hermesOptions(&c, h, "", "id"); err == nil || !strings.Contains(err.Error(), "ca.pem") {
		t.Errorf("hermes TLS files missing: %v", err)
	}
	// Mistakes.
	for _, args := range [][]string{
		{"-m", "a.gguf", "--hermes-broker", "tcp://r:1883", "--hermes-cert", "/c.pem"},
		{"-m", "a.gguf", "--hermes-mode", "asr", "--hermes-password-file", hp},
	} {
		if _, err := ParseConfig(e, args); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

// A token file readable by others gets the warning password files get
// (issue 22, item 8).
func TestServeTokenFileWarning(t *testing.T) {
	dir := t.TempDir()
	e := &cli.Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}
	for _, c := range []struct {
		mode os.FileMode
		warn bool
	}{{0o644, true}, {0o600, false}} {
		p := filepath.Join(dir, fmt.Sprintf("token-%o", c.mode))
		os.WriteFile(p, []byte("s3cret\n"), c.mode)
		os.Chmod(p, c.mode)
		cfg, err := ParseConfig(e, []string{"-m", "a.gguf", "--http-token-file", p})
		if err != nil {
			t.Fatal(err)
		}
		warned := slices.ContainsFunc(cfg.warnings, func(w string) bool { return strings.Contains(w, "HTTP token file") })
		if warned != c.warn {
			t.Errorf("token file mode %o: warnings %q", c.mode, cfg.warnings)
		}
	}
}
