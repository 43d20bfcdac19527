package storage_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/geisten/geist/storage"
)

func Example() {
	dir, _ := os.MkdirTemp("", "geist-example-")
	defer os.RemoveAll(dir)

	// Conversations: every method that returns nil has reached the disk.
	s, err := storage.OpenSessions(filepath.Join(dir, "sessions.db"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	s.Create(storage.Conversation{ID: "kitchen", Model: "stories260K", System: "You tell short stories."})
	s.Append("kitchen",
		storage.Turn{Role: "user", Text: "Tell me a story.", Tokens: []int32{1, 15043}},
		storage.Turn{Role: "assistant", Text: "Once upon a time...", Tokens: []int32{9038, 2501}})
	c, turns, _ := s.Get("kitchen")
	fmt.Println(c.ID, c.Turns, turns[1].Text)

	// The prompt cache: store the KV state after a prefix, find the longest
	// stored prefix of a later request (leaving it one token to evaluate).
	cache, err := storage.OpenCache(filepath.Join(dir, "cache.db"), &storage.CacheOptions{MaxBytes: 64 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cache.Close()
	model := []byte("hash of the GGUF header, tensor table and KV cache type")
	system := []int32{1, 450, 3304, 10541, 29889}
	cache.Put(model, system, []byte("kv state after the system prompt"))

	request := append(append([]int32{}, system...), 15043, 29991)
	if n, blob, ok := cache.Lookup(model, request[:len(request)-1]); ok {
		fmt.Printf("reuse %d tokens: %s\n", n, blob)
	}
	// Output:
	// kitchen 2 Once upon a time...
	// reuse 5 tokens: kv state after the system prompt
}
