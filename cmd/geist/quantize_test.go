package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/zoo"
)

// TestQuantizeCommand: geist quantize of the zoo's F32 tiny-llama writes
// the same file llama-quantize wrote for each type (the type rules
// themselves are tested in cmd/internal/convert).
func TestQuantizeCommand(t *testing.T) {
	src := zoo.Path(t, "models", "tiny-llama-F32.gguf")
	dir := t.TempDir()
	types := []string{"Q4_0", "q8_0", "Q4_K_M"}
	if testing.Short() {
		types = types[:2] // Q4_K_M's reference quantizer is slow under emulation
	}
	for _, typ := range types {
		out := filepath.Join(dir, typ+".gguf")
		code, stdout, errs := geist(t, "", "quantize", "-t", "2", src, out, typ)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", typ, code, errs)
		}
		if !strings.Contains(stdout, "wrote "+out) {
			t.Errorf("output %q", stdout)
		}
		got, _ := os.ReadFile(out)
		want, err := os.ReadFile(zoo.Path(t, "models", "tiny-llama-"+strings.ToUpper(typ)+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: file differs from llama-quantize's", typ)
		}
	}
}

func TestQuantizeCommandErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "o.gguf")
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"quantize", "in.gguf", out}, 2, "want IN OUT TYPE"},
		{[]string{"quantize", "in.gguf", out, "Q2_K"}, 2, "unknown type"},
		{[]string{"quantize", out, out, "Q4_0"}, 2, "same file"},
		{[]string{"quantize", filepath.Join(dir, "missing.gguf"), out, "Q4_0"}, 1, "no such file"},
	} {
		code, _, errs := geist(t, "", c.args...)
		if code != c.code || !strings.Contains(errs, c.msg) {
			t.Errorf("%v: exit %d %q, want %d and %q", c.args, code, errs, c.code, c.msg)
		}
	}
	q8 := zoo.Path(t, "models", "stories260K-Q8_0.gguf")
	if code, _, errs := geist(t, "", "quantize", q8, out, "Q4_0"); code != 1 || !strings.Contains(errs, "only F32, F16 and BF16") {
		t.Errorf("requantize: exit %d %q", code, errs)
	}
}
