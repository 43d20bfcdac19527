package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestEncodings assembles the ARM syntax in every WORD comment with llvm-mc
// and checks that it encodes to the emitted word.
func TestEncodings(t *testing.T) {
	mc, err := exec.LookPath("llvm-mc")
	if err != nil {
		t.Skip("llvm-mc not installed")
	}
	text := generate() + generateAttn()
	re := regexp.MustCompile(`WORD \$0x([0-9a-f]{8}) // (.*)`)
	seen := map[string]string{}
	var src bytes.Buffer
	var want []string
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		if _, ok := seen[m[2]]; ok {
			continue
		}
		seen[m[2]] = m[1]
		src.WriteString(m[2] + "\n")
		want = append(want, m[1])
	}
	lines := strings.Split(strings.TrimSpace(src.String()), "\n")
	cmd := exec.Command(mc, "-triple=aarch64", "-mattr=+neon,+dotprod,+fullfp16", "-show-encoding")
	cmd.Stdin = &src
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("llvm-mc: %v\n%s", err, out)
	}
	enc := regexp.MustCompile(`encoding: \[0x(..),0x(..),0x(..),0x(..)\]`)
	got := enc.FindAllStringSubmatch(string(out), -1)
	if len(got) != len(want) {
		t.Fatalf("llvm-mc encoded %d instructions, want %d:\n%s", len(got), len(want), out)
	}
	for i, g := range got {
		w := fmt.Sprintf("%s%s%s%s", g[4], g[3], g[2], g[1])
		if w != want[i] {
			t.Errorf("%s: emitted %s, llvm-mc %s", lines[i], want[i], w)
		}
	}
	t.Logf("%d distinct instructions checked", len(want))
}

// TestUpToDate checks that ../dot_arm64.s, ../attntile_arm64.s and the
// generated amd64 files are what the generator writes.
func TestUpToDate(t *testing.T) {
	have, err := os.ReadFile("../dot_arm64.s")
	if err != nil {
		t.Fatal(err)
	}
	if string(have) != generate() {
		t.Error("../dot_arm64.s is stale: run go generate")
	}
	have, err = os.ReadFile("../attntile_arm64.s")
	if err != nil {
		t.Fatal(err)
	}
	if string(have) != generateAttn() {
		t.Error("../attntile_arm64.s is stale: run go generate")
	}
	for _, f := range x86Files {
		have, err := os.ReadFile("../" + f.name)
		if err != nil {
			t.Fatal(err)
		}
		if string(have) != generateX86(f) {
			t.Errorf("../%s is stale: run go generate", f.name)
		}
	}
}
