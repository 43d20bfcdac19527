package storage

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// memSessions opens a sessions database in memory (see memDir).
func memSessions(t *testing.T, opts *Options) (*Sessions, string) {
	t.Helper()
	return testSessionsIn(t, memDir(t), opts)
}

// clock is a fake clock advancing a second per reading.
func clock() func() time.Time {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time { now = now.Add(time.Second); return now }
}

func TestTurnLimit(t *testing.T) {
	s, _ := memSessions(t, &Options{Limits: SessionLimits{MaxTurns: 10}})
	if _, err := s.Create(Conversation{ID: "c"}); err != nil {
		t.Fatal(err)
	}
	for i := range 25 {
		if _, err := s.Append("c", Turn{Role: "user", Text: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	c, turns, err := s.Get("c")
	if err != nil {
		t.Fatal(err)
	}
	if c.Turns != 10 || len(turns) != 10 || turns[0].Seq != 16 || turns[9].Text != "24" {
		t.Fatalf("kept %d turns (info says %d), first seq %d", len(turns), c.Turns, turns[0].Seq)
	}
	// One Append larger than the limit keeps its newest turns.
	batch := make([]Turn, 15)
	for i := range batch {
		batch[i] = Turn{Role: "user", Text: "b" + fmt.Sprint(i)}
	}
	if _, err := s.Append("c", batch...); err != nil {
		t.Fatal(err)
	}
	if _, turns, _ = s.Get("c"); len(turns) != 10 || turns[0].Text != "b5" {
		t.Fatalf("after a batch: %d turns from %q", len(turns), turns[0].Text)
	}
}

func TestConversationLimit(t *testing.T) {
	var evicted []string
	s, _ := memSessions(t, &Options{Now: clock(), Limits: SessionLimits{MaxConversations: 5}, OnEvict: func(ids []string) { evicted = append(evicted, ids...) }})
	for i := range 8 {
		if _, err := s.Create(Conversation{ID: fmt.Sprintf("c%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	// c3 is written to last: it becomes the newest, c4 the oldest kept.
	if _, err := s.Append("c3", Turn{Role: "user", Text: "still here"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(Conversation{ID: "c8"}); err != nil {
		t.Fatal(err)
	}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range list {
		ids = append(ids, c.ID)
	}
	slices.Sort(ids)
	if want := []string{"c3", "c5", "c6", "c7", "c8"}; !slices.Equal(ids, want) {
		t.Fatalf("kept %v, want %v", ids, want)
	}
	if want := []string{"c0", "c1", "c2", "c4"}; !slices.Equal(evicted, want) {
		t.Fatalf("evicted %v, want %v", evicted, want)
	}
	if n, _ := s.Usage(); n != 5 {
		t.Fatalf("usage counts %d conversations", n)
	}
}

// TestByteLimit: 2000 conversation names (the review's attack) stay within
// the byte limit, the file within a small multiple of it, and the newest
// conversations survive; the index agrees with the file after a reopen.
func TestByteLimit(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 300
	}
	lim := SessionLimits{MaxBytes: 256 << 10}
	s, path := memSessions(t, &Options{Now: clock(), Limits: lim})
	text := strings.Repeat("x", 500)
	for i := range n {
		id := fmt.Sprintf("attack-%04d", i)
		if _, err := s.Create(Conversation{ID: id}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Append(id, Turn{Role: "user", Text: text}, Turn{Role: "assistant", Text: text}); err != nil {
			t.Fatal(err)
		}
		if _, bytes := s.Usage(); bytes > lim.MaxBytes {
			t.Fatalf("after %d conversations: %d bytes stored, limit %d", i+1, bytes, lim.MaxBytes)
		}
	}
	convs, bytes := s.Usage()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d conversations written: %d kept, %d bytes accounted, file %d bytes (limit %d)", n, convs, bytes, st.Size(), lim.MaxBytes)
	if st.Size() > 4*lim.MaxBytes+4<<20 { // bbolt grows its file in steps of up to 16 MiB from 32 KiB
		t.Errorf("file of %d bytes for a limit of %d", st.Size(), lim.MaxBytes)
	}
	if _, err := s.Info(fmt.Sprintf("attack-%04d", n-1)); err != nil {
		t.Errorf("the newest conversation: %v", err)
	}
	if _, err := s.Info("attack-0000"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the oldest conversation: %v", err)
	}
	// The index rebuilt from the file matches the one kept in memory.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := OpenSessions(path, &Options{Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if c2, b2 := s2.Usage(); c2 != convs || b2 != bytes {
		t.Errorf("reopened: %d conversations, %d bytes; before: %d, %d", c2, b2, convs, bytes)
	}
}

// TestOneConversationOverBytes: a conversation alone over the byte limit
// loses its oldest turns, never its newest.
func TestOneConversationOverBytes(t *testing.T) {
	s, _ := memSessions(t, &Options{Limits: SessionLimits{MaxBytes: 8 << 10}})
	if _, err := s.Create(Conversation{ID: "c"}); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := s.Append("c", Turn{Role: "user", Text: fmt.Sprintf("%d %s", i, strings.Repeat("y", 400))}); err != nil {
			t.Fatal(err)
		}
	}
	_, turns, err := s.Get("c")
	if err != nil {
		t.Fatal(err)
	}
	if _, b := s.Usage(); b > 8<<10 || len(turns) == 0 || !strings.HasPrefix(turns[len(turns)-1].Text, "39 ") {
		t.Fatalf("%d bytes, %d turns", b, len(turns))
	}
}

func TestRecent(t *testing.T) {
	s, _ := memSessions(t, nil)
	if _, err := s.Create(Conversation{ID: "c"}); err != nil {
		t.Fatal(err)
	}
	var batch []Turn
	for i := range 100 {
		batch = append(batch, Turn{Role: "user", Text: fmt.Sprintf("%03d", i)})
	}
	if _, err := s.Append("c", batch...); err != nil {
		t.Fatal(err)
	}
	texts := func(ts []Turn) string {
		var b strings.Builder
		for _, t := range ts {
			b.WriteString(t.Text + " ")
		}
		return b.String()
	}
	for _, c := range []struct {
		turns, bytes int
		want         string
	}{
		{3, 0, "097 098 099 "},
		{0, 7, "098 099 "},
		{0, 2, "099 "}, // the newest turn even when it alone is over
		{2, 100, "098 099 "},
	} {
		info, got, err := s.Recent("c", c.turns, c.bytes)
		if err != nil {
			t.Fatal(err)
		}
		if texts(got) != c.want || info.Turns != 100 {
			t.Errorf("Recent(%d, %d) = %q (info %d turns), want %q", c.turns, c.bytes, texts(got), info.Turns, c.want)
		}
	}
	if _, all, _ := s.Recent("c", 0, 0); len(all) != 100 || all[0].Text != "000" {
		t.Errorf("Recent without limits: %d turns", len(all))
	}
	if _, _, err := s.Recent("nope", 1, 0); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing conversation: %v", err)
	}
}

// BenchmarkLoadHistory compares reading a conversation's history for a
// request the old way (Get: every turn) with Recent (the newest 40 turns),
// on a conversation of 50,000 turns and one of 40.
func BenchmarkLoadHistory(b *testing.B) {
	for _, n := range []int{40, 50000} {
		path := filepath.Join(b.TempDir(), "sessions.db")
		s, err := OpenSessions(path, &Options{Limits: SessionLimits{MaxTurns: 100000}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Create(Conversation{ID: "c"}); err != nil {
			b.Fatal(err)
		}
		batch := make([]Turn, n)
		for i := range batch {
			batch[i] = Turn{Role: "user", Text: strings.Repeat("word ", 100), Tokens: make([]int32, 150)}
		}
		if _, err := s.Append("c", batch...); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("get/%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, _, err := s.Get("c"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("recent40/%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, _, err := s.Recent("c", 40, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
		s.Close()
	}
}

func TestIncrement(t *testing.T) {
	s, path := memSessions(t, nil)
	for want := int64(1); want <= 3; want++ {
		if n, err := s.Increment("dashboard"); err != nil || n != want {
			t.Fatalf("Increment = %d, %v; want %d", n, err, want)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := OpenSessions(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if n, err := s2.Increment("dashboard"); err != nil || n != 4 {
		t.Fatalf("after a reopen: %d, %v", n, err)
	}
	if err := s2.SetSetting("text", "abc"); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Increment("text"); err == nil {
		t.Error("incremented a setting that is not a number")
	}
}

// TestDiskFull fills a small filesystem: the failing Append reports
// ErrDiskFull, stores nothing, and the database stays readable and usable.
func TestDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	path := filepath.Join(dir, "sessions.db")
	s, err := OpenSessions(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(Conversation{ID: "c"}); err != nil {
		t.Fatal(err)
	}
	var full error
	saved := 0
	for i := 0; i < 1000 && full == nil; i++ {
		_, full = s.Append("c", Turn{Role: "user", Text: strings.Repeat("z", 4000)})
		if full == nil {
			saved++
		}
	}
	if !errors.Is(full, ErrDiskFull) {
		t.Fatalf("got %v, want ErrDiskFull", full)
	}
	t.Logf("saved %d turns, then: %v", saved, full)
	c, turns, err := s.Get("c")
	if err != nil || len(turns) != saved || c.Turns != saved {
		t.Fatalf("after the failed save: %d turns (info %d), %v; want %d", len(turns), c.Turns, err, saved)
	}
	// Room again: a save works.
	if err := s.ReplaceTurns("c", turns[len(turns)-2:]); err != nil && !errors.Is(err, ErrDiskFull) {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkFile(t, path)
}

// TestCacheDeletePrefix: the entries a conversation left (all its prompts
// start with its first turn) go; other conversations' entries and the
// shared system prompt's stay.
func TestCacheDeletePrefix(t *testing.T) {
	c, _ := testCacheIn(t, memDir(t), &CacheOptions{MaxBytes: 64 << 20})
	model := []byte("model")
	system := []int32{1, 2, 3}
	a := append(slices.Clone(system), 10, 11)
	b := append(slices.Clone(system), 20, 21)
	blob := make([]byte, 1000)
	for _, toks := range [][]int32{system, a, append(slices.Clone(a), 12, 13), append(slices.Clone(a), 12, 13, 14), b, append(slices.Clone(b), 22)} {
		if err := c.Put(model, toks, blob); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Put([]byte("other model"), a, blob); err != nil {
		t.Fatal(err)
	}
	n, err := c.DeletePrefix(model, a)
	if err != nil || n != 3 {
		t.Fatalf("DeletePrefix = %d, %v; want 3", n, err)
	}
	for _, q := range []struct {
		toks []int32
		want int
	}{
		{append(slices.Clone(a), 12, 13, 14, 15), len(system)}, // only the system prompt is left
		{append(slices.Clone(b), 22, 23), len(b) + 1},
	} {
		if got, _, ok := c.Lookup(model, q.toks); !ok || got != q.want {
			t.Errorf("Lookup(%v) = %d, %v; want %d", q.toks, got, ok, q.want)
		}
	}
	if got, _, ok := c.Lookup([]byte("other model"), a); !ok || got != len(a) {
		t.Errorf("another model's entry: %d %v", got, ok)
	}
	if n, err := c.DeletePrefix(nil, a); err != nil || n != 1 {
		t.Errorf("DeletePrefix over every model = %d, %v; want 1", n, err)
	}
	// Several prefixes at once (a conversation's turns): b's two entries
	// go, the system prompt's stays.
	if n, err := c.DeletePrefix(model, []int32{9, 9}, b, nil); err != nil || n != 2 {
		t.Errorf("DeletePrefix of two prefixes = %d, %v; want 2", n, err)
	}
	if got, _, ok := c.Lookup(model, append(slices.Clone(b), 22)); !ok || got != len(system) {
		t.Errorf("after deleting b: Lookup = %d, %v; want the system prompt's %d", got, ok, len(system))
	}
	c.audit(t)
}
