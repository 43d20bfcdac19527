package daemon

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/cmd/internal/httpapi"
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

// A pull from a private address, refused (no --pull-allow-private), is
// the client's doing: it matches httpapi.ErrRefusedSource (403), not a
// failure of the box (it answered 500, issue 33).
func TestPullPrivateRefused(t *testing.T) {
	a := modelStoreAdapter{s: models.New(t.TempDir()), maxSize: 1 << 30, refusePrivate: true}
	err := a.Pull(t.Context(), "https://127.0.0.1:9/model.gguf", func(httpapi.PullProgress) {})
	if !errors.Is(err, httpapi.ErrRefusedSource) || !errors.Is(err, models.ErrPrivate) || !strings.Contains(err.Error(), "not a public address") {
		t.Errorf("a pull from 127.0.0.1: %v", err)
	}
}
