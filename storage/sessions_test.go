package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// fakeClock returns times one second apart.
func fakeClock() func() time.Time {
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time {
		t = t.Add(time.Second)
		return t
	}
}

func TestSessionsLifecycle(t *testing.T) {
	s, _ := testSessions(t, &Options{Now: fakeClock()})
	c, err := s.Create(Conversation{ID: "kitchen", Model: "llama", System: "be brief"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Created.IsZero() || !c.Updated.Equal(c.Created) {
		t.Fatalf("created %v updated %v", c.Created, c.Updated)
	}
	if _, err := s.Create(Conversation{ID: "kitchen"}); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	for _, bad := range []string{"", strings.Repeat("x", 257), "\xff"} {
		if _, err := s.Create(Conversation{ID: bad}); err == nil {
			t.Errorf("create %q: no error", bad)
		}
	}
	seqs, err := s.Append("kitchen",
		Turn{Role: "user", Text: "hello", Tokens: []int32{1, 15043, -7}},
		Turn{Role: "assistant", Text: "hi", Tokens: []int32{2}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(seqs, []uint64{1, 2}) {
		t.Fatalf("seqs %v", seqs)
	}
	if _, err := s.Append("nowhere", Turn{Role: "user"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("append to missing: %v", err)
	}
	if _, err := s.Create(Conversation{ID: "garage"}); err != nil {
		t.Fatal(err)
	}

	got, turns, err := s.Get("kitchen")
	if err != nil {
		t.Fatal(err)
	}
	if got.Turns != 2 || got.Model != "llama" || got.System != "be brief" || !got.Updated.After(got.Created) {
		t.Fatalf("conversation %+v", got)
	}
	want := []Turn{
		{Seq: 1, Role: "user", Text: "hello", Tokens: []int32{1, 15043, -7}, Time: got.Updated},
		{Seq: 2, Role: "assistant", Text: "hi", Tokens: []int32{2}, Time: got.Updated},
	}
	if !reflect.DeepEqual(turns, want) {
		t.Fatalf("turns\n got %+v\nwant %+v", turns, want)
	}

	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != "garage" || list[1].ID != "kitchen" || list[1].Turns != 2 {
		t.Fatalf("list (newest first) %+v", list)
	}
	if err := s.SetMeta("kitchen", "qwen", "be verbose"); err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info("kitchen"); err != nil || info.Model != "qwen" || info.System != "be verbose" {
		t.Fatalf("info %+v %v", info, err)
	}
	if list, _ := s.List(); list[0].ID != "kitchen" {
		t.Fatalf("after update, list %+v", list)
	}

	if err := s.Delete("kitchen"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get("kitchen"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if err := s.Delete("kitchen"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
}

func TestSessionsReplaceTurns(t *testing.T) {
	s, _ := testSessions(t, nil)
	if _, err := s.Create(Conversation{ID: "c"}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := s.Append("c", Turn{Role: "user", Text: string(rune('a' + i))}); err != nil {
			t.Fatal(err)
		}
	}
	_, turns, _ := s.Get("c")
	// Drop the two oldest, add a summary without a sequence number.
	kept := append([]Turn{}, turns[2:]...)
	kept = append(kept, Turn{Role: "system", Text: "summary"})
	if err := s.ReplaceTurns("c", kept); err != nil {
		t.Fatal(err)
	}
	_, got, _ := s.Get("c")
	var seqs []uint64
	var texts []string
	for _, t := range got {
		seqs, texts = append(seqs, t.Seq), append(texts, t.Text)
	}
	if !reflect.DeepEqual(seqs, []uint64{3, 4, 5, 6}) || !reflect.DeepEqual(texts, []string{"c", "d", "e", "summary"}) {
		t.Fatalf("after replace: seqs %v texts %v", seqs, texts)
	}
	if seq, err := s.Append("c", Turn{Role: "user", Text: "f"}); err != nil || seq[0] != 7 {
		t.Fatalf("append after replace: %v %v", seq, err)
	}
	if err := s.ReplaceTurns("c", []Turn{{Seq: 5}, {Seq: 4}}); err == nil {
		t.Fatal("decreasing sequence numbers accepted")
	}
	if err := s.ReplaceTurns("c", nil); err != nil {
		t.Fatal(err)
	}
	if c, turns, _ := s.Get("c"); c.Turns != 0 || len(turns) != 0 {
		t.Fatalf("after clearing: %d turns", c.Turns)
	}
}

func TestSessionsExport(t *testing.T) {
	s, _ := testSessions(t, &Options{Now: fakeClock()})
	if _, err := s.Create(Conversation{ID: "x", Model: "m", System: "sys"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append("x", Turn{Role: "user", Text: "q \"quoted\"", Tokens: []int32{5, 6}}, Turn{Role: "assistant", Text: "a"}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.Export(&buf, "x"); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("export is not JSON: %v\n%s", err, buf.String())
	}
	if doc["id"] != "x" || doc["model"] != "m" || doc["system"] != "sys" || doc["created"] != "2026-01-02T03:04:06Z" {
		t.Fatalf("export header: %s", buf.String())
	}
	turns := doc["turns"].([]any)
	first := turns[0].(map[string]any)
	if len(turns) != 2 || first["text"] != "q \"quoted\"" || first["role"] != "user" || first["seq"] != 1.0 ||
		!reflect.DeepEqual(first["tokens"], []any{5.0, 6.0}) || first["time"] != "2026-01-02T03:04:07Z" {
		t.Fatalf("export turns: %s", buf.String())
	}
	if err := s.Export(&buf, "missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("export missing: %v", err)
	}
}

func TestSessionsSettingsAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	s, err := OpenSessions(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.Setting("model"); ok || err != nil {
		t.Fatalf("unset setting: %v %v", ok, err)
	}
	if err := s.SetSetting("model", "stories"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSetting("threads", "2"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSetting("threads"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSetting("", "x"); err == nil {
		t.Fatal("empty key accepted")
	}
	if _, err := s.Create(Conversation{ID: "c"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append("c", Turn{Role: "user", Text: "remember me"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(); !errors.Is(err, ErrClosed) {
		t.Fatalf("use after close: %v", err)
	}

	s, err = OpenSessions(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if all, err := s.Settings(); err != nil || !reflect.DeepEqual(all, map[string]string{"model": "stories"}) {
		t.Fatalf("settings after reopen: %v %v", all, err)
	}
	if _, turns, err := s.Get("c"); err != nil || len(turns) != 1 || turns[0].Text != "remember me" {
		t.Fatalf("turns after reopen: %+v %v", turns, err)
	}
}

// writeV1 builds a schema-1 sessions file the way that version laid it out.
func writeV1(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		meta, _ := tx.CreateBucket(bktMeta)
		if err := meta.Put(keySchema, binary.BigEndian.AppendUint32(nil, 1)); err != nil {
			return err
		}
		convs, _ := tx.CreateBucket(bktConvs)
		c, _ := convs.CreateBucket([]byte("old"))
		if err := c.Put(keyInfo, []byte(`{"model":"m","system":"s","created":"2025-05-01T00:00:00Z","updated":"2025-05-02T00:00:00Z"}`)); err != nil {
			return err
		}
		turns, _ := c.CreateBucket(bktTurns)
		for i, js := range []string{
			`{"role":"user","text":"hi","tokens":[1,2,3],"time":"2025-05-01T00:00:01Z"}`,
			`{"role":"assistant","text":"hello","tokens":null,"time":"2025-05-01T00:00:02Z"}`,
		} {
			seq, _ := turns.NextSequence()
			if seq != uint64(i+1) {
				t.Fatalf("seq %d", seq)
			}
			if err := turns.Put(seqKey(seq), []byte(js)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSessionsMigrateSchema1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	writeV1(t, path)
	log, lb := newLog(t)
	s, err := OpenSessions(path, &Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	c, turns, err := s.Get("old")
	if err != nil {
		t.Fatal(err)
	}
	want := []Turn{
		{Seq: 1, Role: "user", Text: "hi", Tokens: []int32{1, 2, 3}, Time: time.Date(2025, 5, 1, 0, 0, 1, 0, time.UTC)},
		{Seq: 2, Role: "assistant", Text: "hello", Time: time.Date(2025, 5, 1, 0, 0, 2, 0, time.UTC)},
	}
	if c.Model != "m" || c.System != "s" || !reflect.DeepEqual(turns, want) {
		t.Fatalf("migrated %+v\n%+v", c, turns)
	}
	if seq, err := s.Append("old", Turn{Role: "user", Text: "again"}); err != nil || seq[0] != 3 {
		t.Fatalf("append after migration: %v %v", seq, err)
	}
	if err := s.SetSetting("k", "v"); err != nil {
		t.Fatalf("settings bucket after migration: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	lb.expect(t, "migrating sessions database", "from=1", "to=3")
	if _, err := os.Stat(path + ".schema1.bak"); err != nil {
		t.Fatalf("no backup before migration: %v", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		if v := schemaOf(tx); v != sessionsSchema {
			t.Errorf("schema after migration %d", v)
		}
		return nil
	})
}

func TestSessionsMigrationMechanism(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sessions.db")
	s, err := OpenSessions(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(Conversation{ID: "keep"}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// A failing migration leaves the file as it was.
	failing := append(append([]migration{}, migrations...), migration{from: sessionsSchema, fn: func(tx *bolt.Tx) error {
		if err := tx.Bucket(bktConvs).DeleteBucket([]byte("keep")); err != nil {
			return err
		}
		return errors.New("boom")
	}})
	if _, err := openSessions(path, nil, failing, sessionsSchema+1); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("failing migration: %v", err)
	}
	// A working one runs once.
	runs := 0
	next := append(append([]migration{}, migrations...), migration{from: sessionsSchema, fn: func(tx *bolt.Tx) error {
		runs++
		return tx.Bucket(bktSettings).Put([]byte("migrated"), []byte("yes"))
	}})
	for range 2 {
		s, err := openSessions(path, nil, next, sessionsSchema+1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Info("keep"); err != nil {
			t.Fatalf("conversation lost: %v", err)
		}
		if v, _, _ := s.Setting("migrated"); v != "yes" {
			t.Fatal("migration did not run")
		}
		s.Close()
	}
	if runs != 1 {
		t.Fatalf("migration ran %d times", runs)
	}
	// This build refuses a file from the future.
	if _, err := OpenSessions(path, nil); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("newer schema: %v", err)
	}
}

func TestSessionsLocked(t *testing.T) {
	s, path := testSessions(t, nil)
	_ = s
	start := time.Now()
	_, err := OpenSessions(path, &Options{Timeout: 100 * time.Millisecond})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "database locked by another geist process") {
		t.Fatalf("second open: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("waited %v", d)
	}
}

func TestSessionsDamagedFile(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, bytes.Repeat([]byte("not a database "), 2000), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSessions(garbage, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("garbage: %v", err)
	}

	// A file cut short after many turns.
	path := filepath.Join(dir, "sessions.db")
	s, err := OpenSessions(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Create(Conversation{ID: "c"})
	for range 50 {
		if _, err := s.Append("c", Turn{Role: "user", Text: strings.Repeat("long turn ", 500)}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	st, _ := os.Stat(path)
	if err := os.Truncate(path, st.Size()/3); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSessions(path, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated: %v", err)
	}
}

func TestSessionsDamagedRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	s, err := OpenSessions(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"good", "bad"} {
		s.Create(Conversation{ID: id})
		if _, err := s.Append(id, Turn{Role: "user", Text: "hello"}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error {
		tb := tx.Bucket(bktConvs).Bucket([]byte("bad")).Bucket(bktTurns)
		v := bytes.Clone(tb.Get(seqKey(1)))
		v = v[:len(v)-1] // cut short
		return tb.Put(seqKey(1), v)
	})
	db.Close()
	s, err = OpenSessions(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Get("bad"); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `conversation "bad"`) {
		t.Fatalf("damaged turn: %v", err)
	}
	if _, turns, err := s.Get("good"); err != nil || len(turns) != 1 {
		t.Fatalf("intact conversation: %v", err)
	}
}

func TestTurnEncoding(t *testing.T) {
	turn := Turn{Seq: 9, Role: "assistant", Text: "héllo\x00", Tokens: []int32{0, -1, 1 << 30, -(1 << 31)}, Time: time.Unix(1700000000, 123).UTC()}
	v := encodeTurn(turn)
	got, err := decodeTurn(seqKey(9), v)
	if err != nil || !reflect.DeepEqual(got, turn) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for i := range v {
		if _, err := decodeTurn(seqKey(9), v[:i]); err == nil {
			t.Fatalf("truncated to %d bytes: no error", i)
		}
	}
	if _, err := decodeTurn(seqKey(9), append(v, 0)); err == nil {
		t.Fatal("trailing byte: no error")
	}
}

func TestSessionsConcurrent(t *testing.T) {
	s, _ := testSessions(t, nil)
	for _, id := range []string{"a", "b"} {
		if _, err := s.Create(Conversation{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	seqs := make(chan uint64, 100)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				got, err := s.Append("a", Turn{Role: "user", Text: fmt.Sprint(w, i)})
				if err != nil {
					t.Error(err)
					return
				}
				seqs <- got[0]
				if _, err := s.List(); err != nil {
					t.Error(err)
				}
				if err := s.SetSetting(fmt.Sprint("w", w), fmt.Sprint(i)); err != nil {
					t.Error(err)
				}
				var buf bytes.Buffer
				if err := s.Export(&buf, "a"); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	close(seqs)
	seen := map[uint64]bool{}
	for q := range seqs {
		if seen[q] {
			t.Fatalf("sequence number %d handed out twice", q)
		}
		seen[q] = true
	}
	if c, _ := s.Info("a"); c.Turns != 40 || len(seen) != 40 {
		t.Fatalf("%d turns stored, %d appended", c.Turns, len(seen))
	}
}
