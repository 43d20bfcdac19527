package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/storage"
	bolt "go.etcd.io/bbolt"
)

// TestSessionsNeverCreate: the commands that only read fail with a clear
// message when there is no database, and create neither file nor folder.
func TestSessionsNeverCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	for _, args := range [][]string{{"list"}, {"show", "x"}, {"export", "x"}, {"delete", "x"}, {"check"}, {"salvage"}} {
		code, _, errs := geist(t, "", append([]string{"sessions", "--data-dir", dir}, args...)...)
		if code != 1 || !strings.Contains(errs, "no sessions database at") {
			t.Errorf("%v: exit %d, %q", args, code, errs)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the data directory was created: %v", err)
	}
}

// TestSessionsCheckSalvage damages a sessions.db (a branch page of the
// conversations, and the value of one turn): check says so with exit
// status 1, salvage keeps every intact conversation, and the reading
// commands show them.
func TestSessionsCheckSalvage(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sessions.db")
	db, err := storage.OpenSessions(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 250
	for i := range n {
		id := fmt.Sprintf("talk-%03d", i)
		if _, err := db.Create(storage.Conversation{ID: id}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Append(id, storage.Turn{Role: "user", Text: "question " + id}, storage.Turn{Role: "assistant", Text: "answer " + id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := geist(t, "", "sessions", "--data-dir", dir, "check"); code != 0 || !strings.Contains(out, "sound (250 conversations") {
		t.Fatalf("check of a sound file: exit %d, %q %q", code, out, errs)
	}
	// The page of the conversations bucket's root (a branch page), and the
	// text of one answer (turn records are stored as written).
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var root uint64
	_ = bdb.View(func(tx *bolt.Tx) error { root = uint64(tx.Bucket([]byte("conversations")).Root()); return nil })
	page := bdb.Info().PageSize
	bdb.Close()
	for i := range 16 {
		b[int(root)*page+16+i] ^= 0x5A
	}
	found := 0
	for at := 0; ; at++ {
		i := strings.Index(string(b[at:]), "answer talk-123")
		if i < 0 {
			break
		}
		at += i
		b[at-1] = 0xFF // the text's length (a uvarint: now unterminated)
		found++
	}
	if found == 0 {
		t.Fatal("answer not found in the file")
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	code, out, errs := geist(t, "", "sessions", "--data-dir", dir, "check")
	if code != 1 || !strings.Contains(out, "DAMAGED") || !strings.Contains(errs, "geist sessions salvage") {
		t.Fatalf("check of the damaged file: exit %d, %q %q", code, out, errs)
	}
	if code, _, errs := geist(t, "", "sessions", "--data-dir", dir, "list"); code != 1 || !strings.Contains(errs, "corrupt") {
		t.Errorf("list of the damaged file: exit %d, %q", code, errs)
	}
	code, out, errs = geist(t, "", "sessions", "--data-dir", dir, "salvage")
	if code != 0 || !strings.Contains(out, "copied the damaged file to") || !strings.Contains(out, "kept 250 conversations, 499 turns") {
		t.Fatalf("salvage: exit %d, %q %q", code, out, errs)
	}
	t.Logf("salvage said:\n%s", out)
	if code, out, errs := geist(t, "", "sessions", "--data-dir", dir, "check"); code != 0 {
		t.Fatalf("check after salvage: exit %d, %q %q", code, out, errs)
	}
	code, out, _ = geist(t, "", "sessions", "--data-dir", dir, "list")
	if code != 0 || strings.Count(out, "talk-") != n {
		t.Errorf("list after salvage: exit %d, %d conversations", code, strings.Count(out, "talk-"))
	}
	for i := range n {
		id := fmt.Sprintf("talk-%03d", i)
		code, out, errs := geist(t, "", "sessions", "--data-dir", dir, "show", id)
		if code != 0 || !strings.Contains(out, "question "+id) || (i != 123) != strings.Contains(out, "answer "+id) {
			t.Errorf("show %s: exit %d, %q %q", id, code, out, errs)
		}
	}
	aside, _ := filepath.Glob(path + ".damaged-*")
	if len(aside) != 1 {
		t.Errorf("copies aside: %v", aside)
	}
}
