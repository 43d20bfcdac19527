package daemon

import (
	"log/slog"
	"strings"
	"testing"
)

// TestLoadLog: serve logs a big file's load at each quarter of its
// repacking, once each, and nothing for a small one.
func TestLoadLog(t *testing.T) {
	var buf strings.Builder
	f := loadLog(slog.New(slog.NewTextHandler(&buf, nil)), "big.gguf")
	const total = 1 << 30
	for done := int64(0); done <= total; done += 32 << 20 {
		f(done, total)
	}
	if n := strings.Count(buf.String(), "loading the model"); n != 3 || !strings.Contains(buf.String(), "percent=25") || !strings.Contains(buf.String(), "percent=75") {
		t.Errorf("%d lines:\n%s", n, buf.String())
	}
	buf.Reset()
	small := loadLog(slog.New(slog.NewTextHandler(&buf, nil)), "small.gguf")
	small(1<<20, 2<<20)
	if buf.Len() != 0 {
		t.Errorf("a small file's load logged: %s", buf.String())
	}
}
