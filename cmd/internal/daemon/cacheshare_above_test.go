package daemon

import (
	"bytes"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/geisten/geist/storage"
)

// TestCacheShareAbove: a lookup through the control socket that names
// the tokens its caller holds already (Geist-Above, as daemonCache's
// LookupFunc sends for a state that holds a prefix) is answered 204 when
// no longer entry is stored, without the stored one: the daemon neither
// reads nor sends it. Below it, the entry comes; a malformed count is 400.
func TestCacheShareAbove(t *testing.T) {
	c, err := storage.OpenCache(filepath.Join(t.TempDir(), "cache.db"), &storage.CacheOptions{MaxBytes: 16 << 20, ChunkSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	model := []byte("model-a")
	toks := make([]int32, 40)
	for i := range toks {
		toks[i] = int32(i + 1)
	}
	blob := bytes.Repeat([]byte("kv"), 5000)
	if err := c.Put(model, toks[:20], blob); err != nil {
		t.Fatal(err)
	}
	s := &controlServer{log: slog.New(slog.DiscardHandler)}
	s.shareCache(c, model, "model.gguf", 16<<20, nil)
	body := PutTokens(nil, toks)
	for _, tc := range []struct {
		above string
		code  int
	}{{"", 200}, {"19", 200}, {"20", 204}, {"39", 204}, {"40", 400}, {"-1", 400}, {"x", 400}} {
		r := httptest.NewRequest(http.MethodPost, "/v1/cache/lookup", bytes.NewReader(body))
		r.Header.Set("Geist-Model", hex.EncodeToString(model))
		r.Header.Set("Geist-Max-Bytes", strconv.Itoa(16<<20))
		if tc.above != "" {
			r.Header.Set("Geist-Above", tc.above)
		}
		w := httptest.NewRecorder()
		s.cacheLookup(w, r)
		if w.Code != tc.code || (tc.code == 200 && (!bytes.Equal(w.Body.Bytes(), blob) || w.Header().Get("Geist-Tokens") != "20")) {
			t.Errorf("Geist-Above %q: %d (%d bytes, tokens %q), want %d", tc.above, w.Code, w.Body.Len(), w.Header().Get("Geist-Tokens"), tc.code)
		}
	}
	hits := c.Stats().Hits
	if hits != 2 {
		t.Errorf("%d entries read, want 2 (the lookups below 20)", hits)
	}
}
