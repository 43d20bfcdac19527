package sentence

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

var cases = []struct {
	text string
	want []string
}{
	{"Once upon a time there was a cat. It was happy! Was it? Yes.",
		[]string{"Once upon a time there was a cat.", "It was happy!", "Was it?", "Yes."}},
	{"Dr. Smith met Mr. Jones at 3.30 p.m. on St. Patrick's day. They talked.",
		[]string{"Dr. Smith met Mr. Jones at 3.30 p.m. on St. Patrick's day.", "They talked."}},
	{"Pi is about 3.14159. The answer is 42. Done.",
		[]string{"Pi is about 3.14159.", "The answer is 42.", "Done."}},
	{"Use e.g. a hammer, i.e. a tool. Then stop.",
		[]string{"Use e.g. a hammer, i.e. a tool.", "Then stop."}},
	{"J. R. R. Tolkien wrote it. Really?! Wow...",
		[]string{"J. R. R. Tolkien wrote it.", "Really?!", "Wow..."}},
	{"She said \"Stop.\" Then she left.",
		[]string{"She said \"Stop.\"", "Then she left."}},
	{"Steps:\n1. Open the box.\n2. Take the cake.\n",
		[]string{"Steps:", "1. Open the box.", "2. Take the cake."}},
	{"Das kostet ca. fünf Euro, z.B. am 3. Mai. Danach nicht mehr.",
		[]string{"Das kostet ca. fünf Euro, z.B. am 3. Mai.", "Danach nicht mehr."}},
	{"Version 1.2.3 is out. See file.txt for details", []string{"Version 1.2.3 is out.", "See file.txt for details"}},
	{"你好。今天天气很好！", []string{"你好。", "今天天气很好！"}},
	{"", nil},
	{"   \n\n  ", nil},
	{"No end here", []string{"No end here"}},
}

func TestSplit(t *testing.T) {
	for _, c := range cases {
		if got := Split(c.text); !slices.Equal(got, c.want) {
			t.Errorf("Split(%q)\n got %q\nwant %q", c.text, got, c.want)
		}
	}
}

// TestStreamingSameAsWhole feeds every case in pieces of every size (even
// splitting UTF-8 sequences) and wants the same sentences, each as soon as
// the text after it decides it.
func TestStreamingSameAsWhole(t *testing.T) {
	for _, c := range cases {
		for n := 1; n <= 7; n++ {
			var s Splitter
			var got []string
			for i := 0; i < len(c.text); i += n {
				got = append(got, s.Write(c.text[i:min(i+n, len(c.text))])...)
			}
			if r := s.Flush(); r != "" {
				got = append(got, r)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("pieces of %d bytes of %q\n got %q\nwant %q", n, c.text, got, c.want)
			}
		}
	}
}

func TestEarlyRelease(t *testing.T) {
	var s Splitter
	if got := s.Write("Hello there. "); got != nil {
		t.Errorf("decided before the next word: %q", got)
	}
	if got := s.Write("Next"); !slices.Equal(got, []string{"Hello there."}) {
		t.Errorf("got %q", got)
	}
	if got := s.Write(" one!\n"); !slices.Equal(got, []string{"Next one!"}) {
		t.Errorf("newline should end the sentence at once, got %q", got)
	}
}

func TestMaxLen(t *testing.T) {
	s := Splitter{MaxLen: 40}
	text := strings.Repeat("word, ", 30)
	var got []string
	for _, r := range text {
		got = append(got, s.Write(string(r))...)
	}
	if r := s.Flush(); r != "" {
		got = append(got, r)
	}
	if len(got) < 4 {
		t.Fatalf("overlong text not cut: %q", got)
	}
	for _, g := range got {
		if utf8.RuneCountInString(g) > 40 {
			t.Errorf("piece longer than MaxLen: %q", g)
		}
	}
	if j := strings.Join(got, " "); j != strings.TrimSpace(text) {
		t.Errorf("text lost in cutting: %q", j)
	}
}

func FuzzSplitter(f *testing.F) {
	for _, c := range cases {
		f.Add(c.text, 3)
	}
	f.Fuzz(func(t *testing.T, text string, n int) {
		if n <= 0 || n > 64 {
			n = 1
		}
		var s Splitter
		var got []string
		for i := 0; i < len(text); i += n {
			got = append(got, s.Write(text[i:min(i+n, len(text))])...)
		}
		got = append(got, s.Flush())
		// No text other than whitespace is lost or invented.
		want := strings.Join(strings.Fields(strings.ToValidUTF8(text, "")), "")
		if j := strings.Join(strings.Fields(strings.Join(got, "")), ""); j != want {
			t.Errorf("text changed: %q -> %q", text, j)
		}
	})
}

func TestWholeRunes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"", 0}, {"abc", 3}, {"a\xe2\x98", 1}, {"a\xe2\x98\x83", 4}, {"\xf0\x9f\x95", 0}, {"x\xff", 2}, {"é", 2}, {"\xc3", 0},
	} {
		if got := WholeRunes([]byte(c.in)); got != c.want {
			t.Errorf("WholeRunes(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}
