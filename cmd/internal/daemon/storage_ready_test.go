package daemon

import (
	"context"
	"strings"
	"testing"

	"github.com/geisten/geist/cmd/internal/models"
)

// /readyz's storage check reports a full disk before a save fails
// (issue 22, item 2: it said "ok" on a disk a pull had filled).
func TestStorageCheckFreeSpace(t *testing.T) {
	dir := t.TempDir()
	check := storageCheck(dir)
	if err := check(context.Background()); err != nil {
		t.Fatalf("a writable directory with room: %v", err)
	}
	defer func(f func(string) (int64, error)) { freeSpace = f }(freeSpace)
	freeSpace = func(string) (int64, error) { return models.KeepFree - 1, nil }
	if err := check(context.Background()); err == nil || !strings.Contains(err.Error(), "disk is full") {
		t.Fatalf("a full disk: %v", err)
	}
}
