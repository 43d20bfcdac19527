// Package zoo locates the conformance zoo (reference models and llama.cpp's
// reference outputs) for tests.
package zoo

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir returns the zoo directory: $GEIST_ZOO, or ../shared/zoo beside the
// repository root. It skips the test, naming the variable, when absent.
func Dir(t testing.TB) string {
	t.Helper()
	d := os.Getenv("GEIST_ZOO")
	if d == "" {
		root, err := repoRoot()
		if err != nil {
			t.Skipf("GEIST_ZOO unset and repository root not found: %v", err)
		}
		d = filepath.Join(root, "..", "shared", "zoo")
	}
	if st, err := os.Stat(filepath.Join(d, "README.md")); err != nil || st.IsDir() {
		t.Skipf("GEIST_ZOO: zoo not found at %s (set GEIST_ZOO to the conformance zoo)", d)
	}
	return d
}

// Path joins elem to the zoo directory (skipping the test when absent).
func Path(t testing.TB, elem ...string) string {
	return filepath.Join(append([]string{Dir(t)}, elem...)...)
}

func repoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		p := filepath.Dir(d)
		if p == d {
			return "", os.ErrNotExist
		}
		d = p
	}
}

// Peer returns the path of a program of the peers folder (the real
// clients and servers protocols are tested against): $GEIST_PEER, or
// "peer" beside the zoo (../shared/peer). It skips the test, naming the
// variable, when the program is absent.
func Peer(t testing.TB, name string) string {
	t.Helper()
	d := os.Getenv("GEIST_PEER")
	if d == "" {
		z := os.Getenv("GEIST_ZOO")
		if z == "" {
			root, err := repoRoot()
			if err != nil {
				t.Skipf("GEIST_PEER unset and repository root not found: %v", err)
			}
			z = filepath.Join(root, "..", "shared", "zoo")
		}
		d = filepath.Join(z, "..", "peer")
	}
	p := filepath.Join(d, name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("GEIST_PEER: %s not found in %s (set GEIST_PEER to the peers folder)", name, d)
	}
	return p
}
