package main

import (
	"path/filepath"
	"testing"

	"github.com/geisten/geist/engine/chat"
	"github.com/geisten/geist/storage"
)

// TestDBSessions: the durable session store keeps a conversation across a
// restart (reopen), trims to max_history and forgets on request.
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
		if err := s.Append("kitchen", chat.Message{Role: "user", Content: "q"}, chat.Message{Role: "assistant", Content: "a"}); err != nil {
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
	if err := s.Forget("kitchen"); err != nil {
		t.Fatal(err)
	}
	if h, _ := s.Load("kitchen"); h != nil {
		t.Errorf("after Forget: %v", h)
	}
}
