package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/daemon"
	"github.com/geisten/geist/engine/zoo"
)

// TestOllamaHabits: the commands and names an Ollama user types.
func TestOllamaHabits(t *testing.T) {
	dir := t.TempDir()
	mdir := filepath.Join(dir, "models")
	os.MkdirAll(mdir, 0o755)
	src, err := os.ReadFile(zoo.Path(t, "models", "stories260K-Q4_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(mdir, "stories:260k.gguf"), src, 0o644)

	code, out, errs := geist(t, "", "list", "--models-dir", mdir)
	if code != 0 || !strings.Contains(out, "stories:260k") {
		t.Errorf("geist list: %d %q %q", code, out, errs)
	}
	code, out, errs = geist(t, "", "models", "catalog", "--models-dir", mdir)
	if code != 0 || !strings.Contains(out, "qwen2.5:0.5b") || !strings.Contains(out, "qwen3:1.7b-q8_0") {
		t.Errorf("geist models catalog: %d %q %q", code, out, errs)
	}
	code, out, errs = geist(t, "", "ps", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "no geist serve is running") {
		t.Errorf("geist ps: %d %q %q", code, out, errs)
	}
	// -m takes the tagged name.
	code, out, errs = geist(t, "", "run", "--models-dir", mdir, "-m", "stories:260k", "-n", "3", "--temp", "0", "Once")
	if code != 0 || out == "" {
		t.Errorf("run -m stories:260k: %d %q %q", code, out, errs)
	}
	code, _, errs = geist(t, "", "rm", "--models-dir", mdir, "stories:260k")
	if code != 0 {
		t.Errorf("geist rm: %d %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(mdir, "stories:260k.gguf")); !os.IsNotExist(err) {
		t.Errorf("rm left the file: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serv"}, `did you mean "serve"`},
		{[]string{"pul", "x"}, `did you mean "pull"`},
		{[]string{"models", "lst"}, `did you mean "list"`},
		{[]string{"run", "--models-dir", mdir, "-m", "qwen2.5:0.5b", "hi"}, "geist pull qwen2.5:0.5b fetches it"},
		{[]string{"run", "--models-dir", mdir, "-m", "qwen2.5:05b", "hi"}, `did you mean "qwen2.5:0.5b"`},
		{[]string{"pull", "--models-dir", mdir, "qwen2.5:7b"}, `is not in geist's catalog; did you mean`},
	} {
		code, _, errs := geist(t, "", tc.args...)
		if code == 0 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("geist %v: exit %d, stderr %q; want one line with %q", tc.args, code, errs, tc.want)
		}
	}
}

func TestOllamaHost(t *testing.T) {
	for in, want := range map[string]string{
		"0.0.0.0":                "0.0.0.0:11434",
		"0.0.0.0:8080":           "0.0.0.0:8080",
		":11435":                 "127.0.0.1:11435",
		"http://192.168.1.5:80/": "192.168.1.5:80",
		"[::1]:9":                "[::1]:9",
		"localhost":              "localhost:11434",
	} {
		if got, err := daemon.OllamaHost(in); err != nil || got != want {
			t.Errorf("daemon.OllamaHost(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"host:port", "a b:1", "x:70000"} {
		if got, err := daemon.OllamaHost(bad); err == nil {
			t.Errorf("daemon.OllamaHost(%q) = %q, want an error", bad, got)
		}
	}
	t.Setenv("OLLAMA_HOST", "0.0.0.0:11500")
	c, err := daemon.ParseConfig(&cli.Env{Stdout: os.Stdout, Stderr: os.Stderr}, []string{"-m", "x.gguf"})
	if err != nil || c.HTTP.Addr != "0.0.0.0:11500" {
		t.Errorf("OLLAMA_HOST: addr %q, %v", c.HTTP.Addr, err)
	}
	c, err = daemon.ParseConfig(&cli.Env{Stdout: os.Stdout, Stderr: os.Stderr}, []string{"-m", "x.gguf", "--http", "127.0.0.1:1"})
	if err != nil || c.HTTP.Addr != "127.0.0.1:1" {
		t.Errorf("--http over OLLAMA_HOST: addr %q, %v", c.HTTP.Addr, err)
	}
}
