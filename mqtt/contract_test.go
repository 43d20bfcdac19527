package mqtt

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/sentence"
)

var testLimits = Limits{MaxPayload: 64 << 10, MaxTokens: 100, DefaultTTL: time.Minute, MaxTTL: time.Hour, ReplyPrefixes: []string{"geist/d/reply/"}}

func TestParseValid(t *testing.T) {
	now := time.Unix(1000, 0)
	r, e := Parse([]byte(`{"id":"a1","text":"hi","session":"s","system":"be brief","max_tokens":500,"temperature":0.5,"stream":true,"reply_to":"geist/d/reply/my","ttl_s":2.5}`), testLimits, now)
	if e != nil {
		t.Fatal(e)
	}
	if r.ID != "a1" || r.Generated || r.Text != "hi" || r.Session != "s" || r.System != "be brief" ||
		r.MaxTokens != 100 || r.Temperature == nil || *r.Temperature != 0.5 || !r.Stream ||
		r.ReplyTo != "geist/d/reply/my" || r.TTL != 2500*time.Millisecond || r.Plain || !r.Received.Equal(now) {
		t.Errorf("parsed %+v", r)
	}
	if r, e = Parse([]byte(`{"text":"hi","model":"tiny-llama:latest"}`), testLimits, now); e != nil || r.Model != "tiny-llama:latest" || r.core().Model != r.Model {
		t.Errorf("model: %+v %v", r, e)
	}
	r, e = Parse([]byte("  Tell me a story.\n"), testLimits, now)
	if e != nil || !r.Plain || r.Text != "Tell me a story." || !r.Generated || r.ID == "" || r.MaxTokens != 100 || r.TTL != time.Minute {
		t.Errorf("plain: %+v %v", r, e)
	}
	r, e = Parse([]byte(`{"text":"weather?","format":{"type":"object","properties":{"rain":{"type":"boolean"}},"required":["rain"]}}`), testLimits, now)
	if e != nil || !strings.Contains(source(t, r), `"\"rain\""`) || r.core().Constraint != r.Constraint {
		t.Errorf("format: %+v %v", r, e)
	}
	if r, e = Parse([]byte(`{"text":"x","format":"json"}`), testLimits, now); e != nil || !strings.HasPrefix(source(t, r), "root ::= object | array") {
		t.Errorf("format json: %+v %v", r, e)
	}
	r, e = Parse([]byte(`{"messages":[{"role":"system","content":"x"},{"role":"user","content":"y"}],"max_tokens":7}`), testLimits, now)
	if e != nil || len(r.Messages) != 2 || !r.Generated || r.MaxTokens != 7 {
		t.Errorf("messages: %+v %v", r, e)
	}
}

// TestParseNoCap: without a configured cap (geist's default), a request
// without max_tokens, plain or JSON, asks for no limit (0: the answer ends
// at its end, the context or its TTL) and one with max_tokens gets it.
func TestParseNoCap(t *testing.T) {
	lim := testLimits
	lim.MaxTokens = 0
	now := time.Unix(1000, 0)
	for payload, want := range map[string]int{`{"text":"hi"}`: 0, "Tell me a story.": 0, `{"text":"hi","max_tokens":4000}`: 4000} {
		if r, e := Parse([]byte(payload), lim, now); e != nil || r.MaxTokens != want {
			t.Errorf("%s: max tokens %d (%v), want %d", payload, r.MaxTokens, e, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	big := `{"id":"big","text":"` + strings.Repeat("a", 1<<20) + `"}`
	cases := []struct {
		name, payload, code, msg, id string
	}{
		{"invalid JSON", `{"id":"x","text":`, CodeBadRequest, "unexpected end", "x"},
		{"invalid JSON syntax", `{"id":"x" "text":"a"}`, CodeBadRequest, "invalid JSON", "x"},
		{"invalid JSON, id after the break", `{"text":"a",, "id":"x"}`, CodeBadRequest, "invalid JSON", ""},
		{"id after 4 KiB", `{"text":"` + strings.Repeat("a", 5000) + `","id":"x",}`, CodeBadRequest, "invalid JSON", ""},
		{"trailing data", `{"id":"x","text":"a"} {}`, CodeBadRequest, "after the JSON", "x"},
		{"wrong type text", `{"id":"x","text":5}`, CodeBadRequest, "wrong type for text", "x"},
		{"wrong type max_tokens", `{"id":"x","text":"a","max_tokens":"many"}`, CodeBadRequest, "wrong type for max_tokens", "x"},
		{"wrong type stream", `{"id":"x","text":"a","stream":"yes"}`, CodeBadRequest, "wrong type for stream", "x"},
		{"wrong type id", `{"id":7,"text":"a"}`, CodeBadRequest, "wrong type for id", ""},
		{"unknown field", `{"id":"x","text":"a","prompt":"b"}`, CodeBadRequest, `unknown field "prompt"`, "x"},
		{"unknown nested field", `{"id":"x","messages":[{"role":"user","content":"a","name":"b"}]}`, CodeBadRequest, `unknown field "name"`, "x"},
		{"empty text", `{"id":"x","text":"  "}`, CodeBadRequest, "empty text", "x"},
		{"empty model", `{"id":"x","text":"a","model":""}`, CodeBadRequest, "model is empty", "x"},
		{"model with spaces", `{"id":"x","text":"a","model":"tiny llama"}`, CodeBadRequest, "spaces or control characters", "x"},
		{"model too long", `{"id":"x","text":"a","model":"` + strings.Repeat("m", 300) + `"}`, CodeBadRequest, "longer than 256 bytes", "x"},
		{"no text", `{"id":"x"}`, CodeBadRequest, "empty text", "x"},
		{"empty plain text", " \n\t", CodeBadRequest, "empty text", ""},
		{"empty payload", "", CodeBadRequest, "empty text", ""},
		{"text and messages", `{"id":"x","text":"a","messages":[{"role":"user","content":"a"}]}`, CodeBadRequest, "not both", "x"},
		{"bad role", `{"id":"x","messages":[{"role":"robot","content":"a"}]}`, CodeBadRequest, "role", "x"},
		{"last not user", `{"id":"x","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`, CodeBadRequest, "last message", "x"},
		{"1 MiB payload", big, CodeTooLong, "exceeds the limit", "big"},
		{"invalid UTF-8 JSON", "{\"id\":\"u\",\"text\":\"a\xff\"}", CodeBadRequest, "not valid UTF-8", "u"},
		{"invalid UTF-8 plain", "caf\xc3", CodeBadRequest, "not valid UTF-8", ""},
		{"max_tokens zero", `{"id":"x","text":"a","max_tokens":0}`, CodeBadRequest, "max_tokens", "x"},
		{"temperature", `{"id":"x","text":"a","temperature":9}`, CodeBadRequest, "temperature", "x"},
		{"ttl", `{"id":"x","text":"a","ttl_s":-1}`, CodeBadRequest, "ttl_s", "x"},
		{"format", `{"id":"x","text":"a","format":"yaml"}`, CodeBadRequest, `format "yaml"`, "x"},
		{"format keyword", `{"id":"x","text":"a","format":{"type":"object","not":{}}}`, CodeBadRequest, `keyword "not"`, "x"},
		// Issue 33: as an ask's format this ran the broker's client out
		// of memory; its compile is refused at a budget.
		{"format too large", `{"id":"x","text":"a","format":{"type":"string","pattern":"^((((a{0,10}){0,10}){0,10}){0,10}){0,10}$"}}`, CodeBadRequest, `too large to compile: rule "root" expands to more than`, "x"},
		{"ttl too long", `{"id":"x","text":"a","ttl_s":1e9}`, CodeBadRequest, "ttl_s", "x"},
		{"id with slash", `{"id":"a/b","text":"a"}`, CodeBadRequest, "id", ""},
		{"reply_to wildcard", `{"id":"x","text":"a","reply_to":"a/#"}`, CodeBadRequest, "wildcard", "x"},
		{"reply_to $", `{"id":"x","text":"a","reply_to":"$SYS/x"}`, CodeBadRequest, "starts with $", "x"},
		{"reply_to outside the prefix", `{"id":"x","text":"a","reply_to":"geist/d/ask"}`, CodeBadRequest, "not under geist/d/reply/", "x"},
		{"reply_to the prefix itself", `{"id":"x","text":"a","reply_to":"geist/d/reply/"}`, CodeBadRequest, "not under", "x"},
		{"unknown field, long name", `{"id":"x","text":"a","` + strings.Repeat("n", 100) + `":1}`, CodeBadRequest, "unknown field (a name of 100 bytes)", "x"},
		{"session with space", `{"id":"x","text":"a","session":"a b"}`, CodeBadRequest, "session", "x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, e := Parse([]byte(c.payload), testLimits, time.Now())
			if e == nil {
				t.Fatalf("accepted: %+v", r)
			}
			if e.Code != c.code || !strings.Contains(e.Message, c.msg) {
				t.Errorf("got %s %q, want %s containing %q", e.Code, e.Message, c.code, c.msg)
			}
			if r.ID != c.id {
				t.Errorf("id %q, want %q", r.ID, c.id)
			}
		})
	}
}

func TestChunker(t *testing.T) {
	now := time.Unix(0, 0)
	clock := func() time.Time { return now }
	var got []string
	var seqs []int
	c := newChunker(50*time.Millisecond, clock, func(c Chunk) { seqs = append(seqs, c.Seq); got = append(got, c.Delta) })
	c.add(appliance.Piece{Content: "Once"})
	c.add(appliance.Piece{Content: " upon"})
	if len(got) != 0 {
		t.Fatalf("emitted early: %q", got)
	}
	c.add(appliance.Piece{Content: " a time."})
	now = now.Add(10 * time.Millisecond)
	c.add(appliance.Piece{Content: " Lily"})
	now = now.Add(60 * time.Millisecond)
	c.add(appliance.Piece{Content: " \xe2\x98"}) // an incomplete ☺ is held back
	c.add(appliance.Piece{Content: "\xba!"})
	c.add(appliance.Piece{Content: " The"})
	c.flush()
	want := []string{"Once upon a time.", " Lily ", "\xe2\x98\xba!", " The"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("chunks %q, want %q", got, want)
	}
	for i, s := range seqs {
		if s != i {
			t.Errorf("seq %v", seqs)
		}
	}
	if n := sentence.WholeRunes([]byte("a\xe2\x98")); n != 1 {
		t.Errorf("WholeRunes = %d", n)
	}
	if !bytes.Equal([]byte(sentence.Cut("aé", 2)), []byte("a")) {
		t.Error("truncate split a rune")
	}
}

// source is the grammar an ask's format compiled to ("" for none).
func source(t *testing.T, r Request) string {
	t.Helper()
	c, err := r.Constraint.Compile(context.Background(), nil)
	if err != nil || c == nil {
		t.Errorf("compile: %v", err)
		return ""
	}
	return c.Source
}
