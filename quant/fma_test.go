package quant

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestNoFusedMultiplyAdd compiles this package for arm64, where Go fuses
// x*y+z into one instruction unless the product is explicitly converted,
// and fails on any fused multiply-add: ggml's reference arithmetic rounds
// every product, and the bit-exact tests run on amd64, which never fuses.
func TestNoFusedMultiplyAdd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("compiles the package for arm64")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found")
	}
	cmd := exec.Command(gobin, "build", "-gcflags=-S", "-o", os.DevNull, ".")
	cmd.Env = append(os.Environ(), "GOARCH=arm64", "GOOS=linux", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	fused := regexp.MustCompile(`\(([^()]*\.go:\d+)\)\tFN?M(ADD|SUB)[SD]\t`)
	for _, line := range strings.Split(string(out), "\n") {
		if m := fused.FindStringSubmatch(line); m != nil {
			t.Errorf("fused multiply-add at %s: wrap the product in float32()", m[1])
		}
	}
}
