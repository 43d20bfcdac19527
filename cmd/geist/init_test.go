package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/geisten/geist/cmd/internal/daemon"
	"github.com/geisten/geist/scripts"
)

func TestInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etc")
	code, out, errs := geist(t, "", "init", "--dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	sample := sampleConfig(daemon.HasGPIOChip())
	for _, f := range []struct{ name, want string }{{"geist.toml", sample}, {"geist.service", scripts.Unit}} {
		b, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil || string(b) != f.want || len(b) < 100 {
			t.Errorf("%s: %v (%d bytes)", f.name, err, len(b))
		}
	}
	if st, _ := os.Stat(filepath.Join(dir, "geist.toml")); st == nil || st.Mode().Perm() != 0o640 {
		t.Errorf("geist.toml mode %v", st)
	}
	for _, want := range []string{"Next steps", "geist pull", "systemctl enable --now geist", filepath.Join(dir, "geist.toml")} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var conf map[string]any
	if _, err := toml.DecodeFile(filepath.Join(dir, "geist.toml"), &conf); err != nil || conf["model"] == nil {
		t.Errorf("the embedded geist.toml is not a configuration: %v", err)
	}

	// Existing files stay unless --force.
	os.WriteFile(filepath.Join(dir, "geist.toml"), []byte("mine"), 0o600)
	code, _, errs = geist(t, "", "init", "--dir", dir)
	if b, _ := os.ReadFile(filepath.Join(dir, "geist.toml")); code != 1 || string(b) != "mine" || !strings.Contains(errs, "--force") {
		t.Errorf("without --force: exit %d %q, file %q", code, errs, b)
	}
	if code, _, errs := geist(t, "", "init", "--dir", dir, "--force"); code != 0 {
		t.Errorf("--force: exit %d %s", code, errs)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "geist.toml")); string(b) != sample {
		t.Error("--force did not overwrite")
	}
	// Without a GPIO chip the [gpio] sections are comments; the rest is
	// the same configuration.
	var with, without daemon.Config
	with, without = daemon.DefaultConfig(), daemon.DefaultConfig()
	if _, err := toml.Decode(sampleConfig(true), &with); err != nil {
		t.Fatal(err)
	}
	if _, err := toml.Decode(sampleConfig(false), &without); err != nil {
		t.Fatal(err)
	}
	if !daemon.GPIOConfigured(with.GPIO) || daemon.GPIOConfigured(without.GPIO) || with.Model != without.Model || without.Voice.Speech != nil && with.Voice.Speech == nil {
		t.Errorf("sample without GPIO: gpio %+v, model %q/%q", without.GPIO, with.Model, without.Model)
	}
	if !strings.Contains(sampleConfig(false), "no GPIO chip") {
		t.Error("the sample without GPIO does not say why its [gpio] is commented out")
	}
}
