package sample

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

type step struct {
	feed    string
	emit    string
	stopped bool
}

func runSteps(t *testing.T, stops []string, steps []step, flush string) {
	t.Helper()
	m := NewStopMatcher(stops)
	for i, s := range steps {
		emit, stopped := m.Feed([]byte(s.feed))
		if string(emit) != s.emit || stopped != s.stopped {
			t.Fatalf("stops %q, feed %d %q: got (%q, %v), want (%q, %v)", stops, i, s.feed, emit, stopped, s.emit, s.stopped)
		}
	}
	if got := m.Flush(); string(got) != flush {
		t.Fatalf("stops %q: Flush = %q, want %q", stops, got, flush)
	}
}

func TestStopMatcher(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		stops []string
		steps []step
		flush string
	}{
		{"no stops", nil, []step{{"hello", "hello", false}, {" world", " world", false}}, ""},
		{"empty stop ignored", []string{""}, []step{{"abc", "abc", false}}, ""},
		{"stop inside one feed", []string{"</s>"}, []step{{"Hello</s>tail", "Hello", true}}, ""},
		{"stop at the start", []string{"</s>"}, []step{{"</s>", "", true}}, ""},
		{"split across feeds", []string{"</s>"}, []step{
			{"Hello </", "Hello ", false},
			{"s", "", false},
			{"> more", "", true},
		}, ""},
		{"byte by byte", []string{"END"}, []step{
			{"x", "x", false}, {"E", "", false}, {"N", "", false}, {"D", "", true},
		}, ""},
		{"false alarm released", []string{"abc"}, []step{
			{"xab", "x", false},
			{"d", "abd", false},
		}, ""},
		{"held back until flush", []string{"abc"}, []step{{"zzab", "zz", false}}, "ab"},
		{"overlapping prefix", []string{"aab"}, []step{
			{"a", "", false}, {"a", "", false}, {"a", "a", false}, {"b", "", true},
		}, ""},
		{"self-overlap", []string{"abab"}, []step{
			{"xaba", "x", false}, {"cabab", "abac", true},
		}, ""},
		{"multiple stops, earliest wins", []string{"world", "lo w"}, []step{{"hello world", "hel", true}}, ""},
		{"multiple stops, longest hold", []string{"###", "#!"}, []step{
			{"a##", "a", false}, // "##" could start "###"
			{"!", "#", true},    // "##!" holds "#!" at 1
		}, ""},
		{"after stop", []string{"x"}, []step{{"ax", "a", true}, {"more", "", true}}, ""},
		{"stop equals text repeated", []string{"\n\n"}, []step{
			{"line\n", "line", false}, {"\n", "", true},
		}, ""},
		{"utf-8 split rune", nil, []step{
			{"caf\xc3", "caf", false}, {"\xa9!", "é!", false},
		}, ""},
		{"utf-8 four bytes", nil, []step{
			{"\xf0\x9f", "", false}, {"\x98", "", false}, {"\x80", "😀", false},
		}, ""},
		{"utf-8 stop split mid-rune", []string{"→"}, []step{
			{"a\xe2\x86", "a", false}, {"\x92b", "", true},
		}, ""},
		{"utf-8 incomplete flushed", nil, []step{{"ok\xe2\x82", "ok", false}}, "\xe2\x82"},
		{"invalid bytes pass through", nil, []step{{"a\xff\xfe", "a\xff\xfe", false}, {"\x80", "\x80", false}}, ""},
		{"utf-8 stop after multibyte text", []string{"ü"}, []step{{"grün", "gr", true}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runSteps(t, tc.stops, tc.steps, tc.flush)
		})
	}
}

func TestStopMatcherFlushAndReset(t *testing.T) {
	t.Parallel()
	m := NewStopMatcher([]string{"STOP"})
	if emit, _ := m.Feed([]byte("abcST")); string(emit) != "abc" {
		t.Fatalf("Feed = %q", emit)
	}
	if got := m.Flush(); string(got) != "ST" {
		t.Fatalf("Flush = %q", got)
	}
	if got := m.Flush(); len(got) != 0 {
		t.Fatalf("second Flush = %q", got)
	}
	if _, stopped := m.Feed([]byte("xSTOP")); !stopped {
		t.Fatal("stop not seen")
	}
	if got := m.Flush(); got != nil {
		t.Fatalf("Flush after stop = %q", got)
	}
	if emit, stopped := m.Feed([]byte("more")); emit != nil || !stopped {
		t.Fatalf("after a stop: (%q, %v)", emit, stopped)
	}
}

// Random text in random chunks: the emitted text plus the flush is the text
// up to the first stop, never splits a character, and never contains a stop.
// No stop string here contains another, so where a stream stops does not
// depend on how it is chunked.
func TestStopMatcherRandomChunks(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(13, 14))
	alphabet := []string{"a", "b", "c", " ", "é", "→", "😀", "\n"}
	stopSets := [][]string{
		{"abc"},
		{"ab", "ba"},
		{"é→", "c c"},
		{"😀\n", "aaa", "b→b"},
		{"\n\n"},
		{},
	}
	for trial := range 2000 {
		stops := stopSets[trial%len(stopSets)]
		var sb strings.Builder
		for range rng.IntN(40) {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		text := sb.String()
		want := text
		for _, s := range stops {
			if i := strings.Index(text, s); i >= 0 && i < len(want) {
				want = text[:i]
			}
		}
		m := NewStopMatcher(stops)
		var got []byte
		rest := []byte(text)
		stopped := false
		for len(rest) > 0 && !stopped {
			k := 1 + rng.IntN(min(len(rest), 6))
			var emit []byte
			emit, stopped = m.Feed(rest[:k])
			rest = rest[k:]
			if !utf8.Valid(emit) {
				t.Fatalf("stops %q, text %q: emitted invalid UTF-8 %q", stops, text, emit)
			}
			got = append(got, emit...)
		}
		got = append(got, m.Flush()...)
		if string(got) != want {
			t.Fatalf("stops %q, text %q: got %q, want %q", stops, text, got, want)
		}
		for _, s := range stops {
			if bytes.Contains(got, []byte(s)) {
				t.Fatalf("stops %q, text %q: output %q contains a stop", stops, text, got)
			}
		}
	}
}

func TestStopMatcherAllocs(t *testing.T) {
	m := NewStopMatcher([]string{"<|im_end|>", "\n\nUser:"})
	chunk := []byte("some tokens <|im")
	m.Feed(chunk) // grow the buffer once
	m.Flush()
	if a := testing.AllocsPerRun(100, func() {
		m.Feed(chunk)
		m.Flush()
	}); a != 0 {
		t.Errorf("%v allocations per Feed", a)
	}
}

// Whatever the stops and chunking: the output is a prefix of the input
// without any stop string in it, the whole input when no stop occurs, and
// every emitted chunk is valid UTF-8 when the input and stops are.
func FuzzStopMatcher(f *testing.F) {
	f.Add("hello world", "wor", "ld", uint8(3))
	f.Add("a→b→c", "→c", "", uint8(1))
	f.Add("aaab", "aab", "b", uint8(2))
	f.Fuzz(func(t *testing.T, text, stop1, stop2 string, chunk uint8) {
		stops := []string{stop1, stop2}
		m := NewStopMatcher(stops)
		size := 1 + int(chunk%8)
		// Valid stops in valid text match on character boundaries.
		valid := utf8.ValidString(text) && utf8.ValidString(stop1) && utf8.ValidString(stop2)
		var out []byte
		stopped := false
		for rest := []byte(text); len(rest) > 0 && !stopped; {
			k := min(size, len(rest))
			var emit []byte
			emit, stopped = m.Feed(rest[:k])
			rest = rest[k:]
			if valid && !utf8.Valid(emit) {
				t.Fatalf("emitted invalid UTF-8 %q", emit)
			}
			out = append(out, emit...)
		}
		out = append(out, m.Flush()...)
		if !strings.HasPrefix(text, string(out)) {
			t.Fatalf("output %q is not a prefix of %q", out, text)
		}
		for _, s := range stops {
			if s != "" && strings.Contains(string(out), s) {
				t.Fatalf("output %q contains stop %q", out, s)
			}
		}
		if !stopped && string(out) != text {
			t.Fatalf("no stop, output %q != input %q", out, text)
		}
		if stopped && len(out) == len(text) {
			t.Fatalf("stopped but emitted all of %q", text)
		}
	})
}
