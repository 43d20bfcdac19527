package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/engine/zoo"
)

// leak finds a Go package prefix or a Go list in a message.
var leak = regexp.MustCompile(`(: |^)(models|httpapi|engine|storage|gguf|model|sample|quant|tokenizer|chat|firmware|appliance): |\[[a-z0-9]+ [a-z0-9]+[^\]]*\]`)

var updateErrors = flag.Bool("update-errors", false, "rewrite testdata/first-hour-errors.golden")

// TestFirstHourErrors is the wording of every error the README's first
// hour can meet (install, pull, run, serve --check, serve): one line each,
// the user's words, naming what fixes it. A change of wording shows here;
// go test -run TestFirstHourErrors -update-errors rewrites the table after
// a deliberate one.
func TestFirstHourErrors(t *testing.T) {
	dir := t.TempDir()
	mdir := filepath.Join(dir, "models")
	os.MkdirAll(mdir, 0o755)
	notGGUF := filepath.Join(dir, "notes.gguf")
	os.WriteFile(notGGUF, []byte("these are not the weights you are looking for"), 0o644)
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o644)
	model := zoo.Path(t, "models", serveModel)
	mamba := writeMamba(t, model, dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().String()
	long := strings.Repeat("Once upon a time there was a girl who liked to play. ", 4)
	cases := [][]string{
		{"frobnicate"},
		{"serv"},
		{"--model", "x"},
		{"pull"},
		{"pull", "--models-dir", mdir, "qwen2.5:7b"},
		{"pull", "--models-dir", mdir, "lama3.2"},
		{"pull", "--models-dir", mdir, "hf:bartowski/Qwen2.5-0.5B-Instruct-GGUF"},
		{"pull", "--models-dir", mdir, "--name", "a/b", "qwen2.5:0.5b"},
		{"models", "lst"},
		{"rm", "--models-dir", mdir, "qwen2.5:0.5b"},
		{"run", "hi"},
		{"run", "--models-dir", mdir, "-m", "qwen2.5:0.5b", "hi"},
		{"run", "--models-dir", mdir, "-m", "qwen2.5:05b", "hi"},
		{"run", "-m", filepath.Join(dir, "missing.gguf"), "hi"},
		{"run", "-m", notGGUF, "hi"},
		{"run", "-m", mamba, "hi"},
		{"run", "-m", model, "--ctx", "16", "--temp", "0", long},
		{"run", "-m", model, "--temp", "-1", "hi"},
		{"chat", "-m", model, "--bogus"},
		{"serve", "--models-dir", mdir, "-m", "qwen3", "--http", "127.0.0.1:0"},
		{"serve", "-m", model, "--broker", "homeassistant.local:1883"},
		{"serve", "-m", model, "--data-dir", filepath.Join(file, "sub"), "--http", "127.0.0.1:0"},
		{"serve", "-m", model, "--data-dir", filepath.Join(dir, "d1"), "--http", taken},
		{"serve", "-m", model, "--data-dir", filepath.Join(dir, "d2"), "--http", "127.0.0.1:0", "--wyoming", taken},
		{"serve", "-m", model, "--ctx", "many"},
	}
	var got strings.Builder
	norm := strings.NewReplacer(taken, "$PORT", dir, "$DIR", filepath.Dir(model), "$ZOO", cli.DefaultDataDir(), "$DATA")
	for _, args := range cases {
		code, _, errs := geist(t, "", args...)
		if code == 0 {
			t.Errorf("geist %v: exit 0", args)
		}
		if n := strings.Count(errs, "\n"); n != 1 {
			t.Errorf("geist %v: %d lines on stderr, want one:\n%s", args, n, errs)
		}
		var line string
		for _, l := range strings.Split(strings.TrimSpace(errs), "\n") {
			if strings.HasPrefix(l, "geist") {
				line = l
			}
		}
		if m := leak.FindString(line); m != "" {
			t.Errorf("geist %v: %q leaks %q", args, line, m)
		}
		fmt.Fprintf(&got, "$ geist %s\n%s\n\n", norm.Replace(strings.Join(args, " ")), norm.Replace(line))
	}
	path := filepath.Join("testdata", "first-hour-errors.golden")
	if *updateErrors {
		if err := os.WriteFile(path, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestFirstHourErrors -update-errors writes it)", err)
	}
	if got.String() != string(want) {
		t.Errorf("the wording changed (rerun with -update-errors if on purpose):\n%s", lineDiff(string(want), got.String()))
	}
}

// lineDiff lists the lines of want and got that differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := range max(len(w), len(g)) {
		var a, c string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			c = g[i]
		}
		if a != c {
			fmt.Fprintf(&b, "- %s\n+ %s\n", a, c)
		}
	}
	return b.String()
}
