package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/cmd/internal/models"
)

// /api/show of a stored file with a hostile header (a tensor count of
// 2^62) names what is wrong; it answered 200 with empty details, as if it
// were a model (found re-running issue 22's hostile GGUF headers).
func TestStoredInvalidModelShown(t *testing.T) {
	dir := t.TempDir()
	b := []byte("GGUF")
	b = binary.LittleEndian.AppendUint32(b, 3)
	b = binary.LittleEndian.AppendUint64(b, 1<<62) // tensors
	b = binary.LittleEndian.AppendUint64(b, 0)     // metadata
	b = append(b, make([]byte, 64)...)
	if err := os.WriteFile(filepath.Join(dir, "bad.gguf"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	a := modelStoreAdapter{s: models.New(dir)}
	_, ok, err := a.Get("bad")
	if err == nil || ok || !strings.Contains(err.Error(), "tensor count") {
		t.Errorf("a stored file with a hostile header: ok %v, err %v", ok, err)
	}
	if _, ok, err := a.Get("missing"); ok || err != nil {
		t.Errorf("a missing model: ok %v, err %v", ok, err)
	}
}
