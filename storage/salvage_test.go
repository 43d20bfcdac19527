package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// salvageFixture writes a sessions file of 40 small conversations (their
// turns inline in the conversations bucket's leaves) and 6 large ones
// (turns over several pages under a branch page), and returns their turns.
func salvageFixture(t *testing.T, path string) map[string][]Turn {
	t.Helper()
	s, err := OpenSessions(path, &Options{Now: clock()})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]Turn{}
	for i := range 300 {
		id := fmt.Sprintf("conv-%03d", i)
		if _, err := s.Create(Conversation{ID: id, Model: "m", System: "s"}); err != nil {
			t.Fatal(err)
		}
		n, size := 2, 40
		if i%50 == 3 {
			n, size = 60, 300
		}
		var batch []Turn
		for j := range n {
			batch = append(batch, Turn{Role: "user", Text: fmt.Sprintf("%s turn %d %s", id, j, strings.Repeat("t", size)), Tokens: []int32{int32(i), int32(j)}})
		}
		if _, err := s.Append(id, batch...); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetSetting("dashboard", "7"); err != nil {
		t.Fatal(err)
	}
	for id := range want {
		delete(want, id)
	}
	list, _ := s.List()
	for _, c := range list {
		_, turns, _ := s.Get(c.ID)
		want[c.ID] = turns
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return want
}

// layout maps the file's pages: the conversations bucket's root, and for
// each conversation the pages its data lies on (its element's leaf and the
// pages of its own subtree).
type layout struct {
	pageSize  int
	convRoot  uint64
	pages     map[string][]uint64
	turnLeafs map[string][]uint64 // leaf pages of non-inline turns buckets
}

func mapLayout(t *testing.T, b []byte) layout {
	t.Helper()
	root, ps, _, ok := metaOf(b)
	if !ok {
		t.Fatal("fixture has no valid meta page")
	}
	l := layout{pageSize: ps, pages: map[string][]uint64{}, turnLeafs: map[string][]uint64{}}
	p := &pager{b: b, pageSize: ps, free: map[uint64]bool{}, seen: map[uint64]bool{}, rep: &SalvageReport{}}
	p.bucket(root, "root", 0, func(flags uint32, key, val []byte) {
		if string(key) != string(bktConvs) {
			return
		}
		l.convRoot = ne.Uint64(val)
		p.bucket(val, "conversations", 1, func(flags uint32, id, cv []byte) {
			owned := []uint64{p.leaf}
			p.visit = func(pg uint64) { owned = append(owned, pg) }
			p.conversationOf(cv)
			p.visit = nil
			l.pages[string(id)] = owned
			for _, pg := range owned[1:] {
				if pg != ne.Uint64(cv) && ne.Uint16(b[pg*uint64(ps)+8:]) == pageLeaf {
					l.turnLeafs[string(id)] = append(l.turnLeafs[string(id)], pg)
				}
			}
		})
	})
	if len(l.pages) == 0 || ne.Uint16(b[l.convRoot*uint64(ps)+8:]) != pageBranch {
		t.Fatalf("fixture: conversations bucket root %d is not a branch page", l.convRoot)
	}
	return l
}

func TestSalvage(t *testing.T) {
	dir := memDir(t)
	orig := filepath.Join(dir, "orig.db")
	want := salvageFixture(t, orig)
	raw, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	l := mapLayout(t, raw)
	var big string
	for id, leafs := range l.turnLeafs {
		if len(leafs) > 2 {
			big = id
			break
		}
	}
	if big == "" {
		t.Fatal("fixture: no conversation with turns on pages of their own")
	}
	flip := func(b []byte, page uint64, at int) {
		off := int(page)*l.pageSize + at
		for i := range 8 {
			b[off+i] ^= 0xA5
		}
	}
	firstLeaf := l.pages["conv-000"][0]
	for _, c := range []struct {
		name    string
		damage  func(b []byte) []byte
		lost    func(id string) bool // conversations allowed to lose data
		partial string               // a conversation that keeps only some turns
	}{
		{
			name:   "branch page of the conversations bucket",
			damage: func(b []byte) []byte { flip(b, l.convRoot, 16); return b },
			lost:   func(string) bool { return false },
		},
		{
			name:   "leaf page of the conversations bucket",
			damage: func(b []byte) []byte { flip(b, firstLeaf, 20); return b },
			lost: func(id string) bool {
				return l.pages[id][0] == firstLeaf
			},
		},
		{
			name:    "leaf page of a conversation's turns",
			damage:  func(b []byte) []byte { flip(b, l.turnLeafs[big][1], 0); return b },
			lost:    func(string) bool { return false },
			partial: big,
		},
		{
			name: "garbled turn value",
			damage: func(b []byte) []byte {
				pg := l.turnLeafs[big][0]
				p := &pager{b: b, pageSize: l.pageSize, rep: &SalvageReport{}}
				p.elements(b[int(pg)*l.pageSize:int(pg+1)*l.pageSize], "", func(_ uint32, _, v []byte, _ uint64) {
					v[0] = 0xFF // the format byte of every turn on the page
				})
				return b
			},
			lost:    func(string) bool { return false },
			partial: big,
		},
		{
			name:   "truncated file",
			damage: func(b []byte) []byte { return b[:len(b)/2/l.pageSize*l.pageSize] },
			lost: func(id string) bool {
				for _, pg := range l.pages[id] {
					if int(pg+1)*l.pageSize > len(raw)/2/l.pageSize*l.pageSize {
						return true
					}
				}
				return false
			},
		},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sessions.db")
			if err := os.WriteFile(path, c.damage(append([]byte(nil), raw...)), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := CheckSessions(path); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("CheckSessions on the damaged file: %v", err)
			}
			rep, err := SalvageSessions(path, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("kept %d conversations, %d turns, %d settings; %d problems, first: %v", rep.Conversations, rep.Turns, rep.Settings, len(rep.Problems), rep.Problems[:min(2, len(rep.Problems))])
			if _, err := os.Stat(rep.Aside); err != nil {
				t.Errorf("no copy aside: %v", err)
			}
			if err := CheckSessions(path); err != nil {
				t.Fatalf("the salvaged file: %v", err)
			}
			s, err := OpenSessions(path, &Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			kept := 0
			for id, turns := range want {
				_, got, err := s.Get(id)
				switch {
				case c.lost(id):
					if err == nil && !reflect.DeepEqual(got, turns) {
						t.Errorf("%s: a lost conversation came back altered", id)
					}
				case id == c.partial:
					if err != nil || len(got) == 0 || len(got) >= len(turns) {
						t.Errorf("%s: %d of %d turns (%v); want some, not all", id, len(got), len(turns), err)
					}
					for _, g := range got {
						if !reflect.DeepEqual(g, turns[g.Seq-1]) {
							t.Errorf("%s: turn %d altered", id, g.Seq)
						}
					}
				default:
					if err != nil || !reflect.DeepEqual(got, turns) {
						t.Errorf("%s: intact conversation not salvaged whole: %d of %d turns, %v", id, len(got), len(turns), err)
					}
					kept++
				}
			}
			if v, ok, _ := s.Setting("dashboard"); c.name != "truncated file" && (!ok || v != "7") {
				t.Errorf("setting: %q %v", v, ok)
			}
			if kept == 0 {
				t.Error("no conversation counted as intact")
			}
		})
	}
}

func TestReadOnlyNeverCreates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nothing-here")
	path := filepath.Join(dir, "sessions.db")
	if _, err := OpenSessions(path, &Options{ReadOnly: true}); !errors.Is(err, ErrNoDatabase) {
		t.Errorf("OpenSessions read-only: %v", err)
	}
	if err := CheckSessions(path); !errors.Is(err, ErrNoDatabase) {
		t.Errorf("CheckSessions: %v", err)
	}
	if _, err := SalvageSessions(path, nil); !errors.Is(err, ErrNoDatabase) {
		t.Errorf("SalvageSessions: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the directory was created: %v", err)
	}
}

// TestSalvageAfterFailedOpen: the process whose OpenSessions found the
// file damaged (bbolt panicked inside Open, leaving its descriptor, lock
// and memory map behind) salvages it at once and opens the result.
func TestSalvageAfterFailedOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessions.db")
	s, err := OpenSessions(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		id := fmt.Sprintf("c%03d", i)
		s.Create(Conversation{ID: id})
		s.Append(id, Turn{Role: "user", Text: "q"})
	}
	s.Close()
	st, _ := os.Stat(path)
	os.Truncate(path, st.Size()/2)
	if _, err := OpenSessions(path, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open of the truncated file: %v", err)
	}
	rep, err := SalvageSessions(path, nil)
	if err != nil {
		t.Fatalf("salvage in the same process: %v", err)
	}
	s, err = OpenSessions(path, nil)
	if err != nil {
		t.Fatalf("open after salvage: %v", err)
	}
	defer s.Close()
	if n, _ := s.Usage(); n != rep.Conversations || n == 0 {
		t.Errorf("%d conversations open, %d salvaged", n, rep.Conversations)
	}
}
