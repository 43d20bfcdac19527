package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/chat"
	"github.com/geisten/geist/storage"
)

// The tests of the storage-backed stores the daemon gives the core
// (moved with them from the core's package, which imports no storage).

// TestDBSessions: the durable session store keeps a conversation across a
// restart (reopen), trims to max_history, lists and forgets.
func TestDBSessions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	open := func() *dbSessions {
		db, err := storage.OpenSessions(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return &dbSessions{db: db, model: "m.gguf", maxHistory: 4}
	}
	s := open()
	if h, err := s.Load("kitchen"); err != nil || h != nil {
		t.Fatalf("unknown session: %v %v", h, err)
	}
	for i := 0; i < 3; i++ {
		if err := s.Append("kitchen", appliance.Message{Role: "user", Content: "q"}, appliance.Message{Role: "assistant", Content: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s = open() // the appliance was unplugged
	defer s.Close()
	h, err := s.Load("kitchen")
	if err != nil || len(h) != 4 || h[0].Role != "user" || h[3].Content != "a" {
		t.Fatalf("after reopen: %v %v", h, err)
	}
	if list, err := s.List(); err != nil || len(list) != 1 || list[0].ID != "kitchen" || list[0].Messages != 6 {
		t.Errorf("list: %+v %v", list, err)
	}
	if err := s.Forget("kitchen"); err != nil {
		t.Fatal(err)
	}
	if h, _ := s.Load("kitchen"); h != nil {
		t.Errorf("after Forget: %v", h)
	}
}

// TestOpenStorage: with a directory, sessions and the prompt cache are
// files; without one (or an unusable one), sessions live in memory and
// there is no prompt cache.
func TestOpenStorage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := OpenStorage(dir, StorageOptions{CacheSize: 64 << 20, MaxHistory: 20})
	if _, ok := s.Sessions.(*dbSessions); !ok || s.Cache == nil {
		t.Errorf("with a directory: %T, cache %v", s.Sessions, s.Cache)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	m := OpenStorage("", StorageOptions{CacheSize: 1 << 20})
	if _, ok := m.Sessions.(*appliance.MemorySessions); !ok || m.Cache != nil {
		t.Errorf("without a directory: %T, cache %v", m.Sessions, m.Cache)
	}
}

// TestOpenStorageSalvages: a damaged sessions.db is salvaged at start
// (copied aside, what is readable kept) and opened; the conversations
// before the damage are there.
func TestOpenStorageSalvages(t *testing.T) {
	dir := t.TempDir()
	s := OpenStorage(dir, StorageOptions{MaxHistory: 20})
	for i := range 200 {
		if err := s.Sessions.Append(fmt.Sprintf("s%03d", i), appliance.Message{Role: "user", Content: strings.Repeat("question ", 20)}, appliance.Message{Role: "assistant", Content: "answer"}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	path := filepath.Join(dir, "sessions.db")
	st, _ := os.Stat(path)
	if err := os.Truncate(path, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	s = OpenStorage(dir, StorageOptions{MaxHistory: 20})
	list, err := s.Sessions.List()
	if _, ok := s.Sessions.(*dbSessions); !ok || err != nil || s.Problem != "" {
		t.Fatalf("after salvage: %T, %v, problem %q", s.Sessions, err, s.Problem)
	}
	aside, _ := filepath.Glob(path + ".damaged-*")
	t.Logf("kept %d of 200 conversations; damaged copy %v", len(list), aside)
	if len(list) == 0 || len(aside) != 1 {
		t.Errorf("kept %d conversations, copies aside %v", len(list), aside)
	}
	whole := 0
	for _, c := range list {
		h, err := s.Sessions.Load(c.ID)
		if err != nil || len(h) != c.Messages {
			t.Errorf("%s: %d messages read, %d listed, %v", c.ID, len(h), c.Messages, err)
		}
		if len(h) == 2 {
			whole++
		}
	}
	if whole < 100 {
		t.Errorf("%d whole conversations kept", whole)
	}
	s.Close()
	if err := storage.CheckSessions(path); err != nil {
		t.Errorf("the salvaged file: %v", err)
	}
}

// TestOpenStorageLimits: the session limits reach sessions.db.
func TestOpenStorageLimits(t *testing.T) {
	s := OpenStorage(t.TempDir(), StorageOptions{MaxHistory: 20, SessionLimits: storage.SessionLimits{MaxConversations: 5, MaxTurns: 4}})
	defer s.Close()
	for i := range 20 {
		for range 3 {
			s.Sessions.Append(fmt.Sprintf("s%02d", i), appliance.Message{Role: "user", Content: "q"}, appliance.Message{Role: "assistant", Content: "a"})
		}
	}
	list, _ := s.Sessions.List()
	if len(list) != 5 || list[0].ID != "s19" || list[0].Messages != 4 {
		t.Errorf("kept %+v", list)
	}
}

// TestDashboardPersisted: the dashboard conversation's number survives a
// restart, so an old dashboard conversation does not come back.
func TestDashboardPersisted(t *testing.T) {
	dir := t.TempDir()
	for round, want := range []string{"dashboard-2", "dashboard-3"} {
		s := OpenStorage(dir, StorageOptions{MaxHistory: 20})
		c, err := appliance.New(appliance.Config{Engine: nopEngine{}, Sessions: s.Sessions})
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			c.NewConversation("")
		}
		c.NewConversation("")
		if got := c.DefaultSession(); got != want {
			t.Errorf("round %d: %s, want %s", round, got, want)
		}
		s.Close()
	}
}

type nopEngine struct{}

func (nopEngine) Generate(context.Context, engine.Request) (engine.Stats, error) {
	return engine.Stats{}, nil
}

func (nopEngine) ModelID() []byte                                    { return nil }
func (nopEngine) ConversationPrefix([]chat.Message) ([]int32, error) { return nil, nil }

// TestStoreErrorKinds: the errors of sessions.db reach the core marked
// with its kinds (so it says "disk is full" or "damaged" to a client),
// with storage's message unchanged and storage's errors still found.
func TestStoreErrorKinds(t *testing.T) {
	for _, c := range []struct {
		err, kind error
	}{
		{fmt.Errorf("storage: no space left to save: %w: write sessions.db: no space left on device", storage.ErrDiskFull), appliance.ErrStoreFull},
		{fmt.Errorf("storage: %w: sessions.db", storage.ErrWrite), appliance.ErrStoreWrite},
		{fmt.Errorf("storage: %w: page 7 of sessions.db", storage.ErrCorrupt), appliance.ErrStoreCorrupt},
	} {
		got := storeError(c.err)
		if !errors.Is(got, c.kind) || got.Error() != c.err.Error() || !errors.Is(got, errors.Unwrap(c.err)) {
			t.Errorf("%v: %v, is %v: %v", c.err, got, c.kind, errors.Is(got, c.kind))
		}
	}
	if other := errors.New("other"); storeError(other) != other || storeError(nil) != nil {
		t.Error("an error of no kind is changed")
	}
}

// TestPromptCacheAdapter: cache.db as the core's PromptCache keeps the
// optional abilities the engine asks *storage.Cache for, and its figures.
func TestPromptCacheAdapter(t *testing.T) {
	s := OpenStorage(t.TempDir(), StorageOptions{CacheSize: 64 << 20})
	defer s.Close()
	if s.Cache == nil {
		t.Fatal("no prompt cache")
	}
	var c engine.PromptCache = s.Cache
	_, inPlace := c.(engine.PromptCacheInPlace)
	_, dropper := c.(engine.PromptCacheDropper)
	_, paused := c.(engine.PromptCachePaused)
	_, stats := c.(engine.DraftStatsStore)
	_, recent := c.(engine.PromptCacheRecent)
	if !inPlace || !dropper || !paused || !stats || !recent {
		t.Errorf("the adapter hides abilities: in place %v, dropper %v, paused %v, draft stats %v, recent %v", inPlace, dropper, paused, stats, recent)
	}
	if err := c.Put([]byte("m"), []int32{1, 2, 3}, []byte("blob")); err != nil {
		t.Fatal(err)
	}
	if st, ok := s.Core().CacheStats(); !ok || st.Entries != 1 || st.Budget != 64<<20 {
		t.Errorf("stats %+v %v", st, ok)
	}
}
