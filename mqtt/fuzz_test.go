package mqtt

import (
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
)

// maxErrorMessage bounds what an error echoes of a payload: ids and
// topics are checked for length before they are quoted, long field names
// are not quoted at all.
const maxErrorMessage = 600

var fuzzLimits = Limits{MaxPayload: 8 << 10, MaxTokens: 100, DefaultTTL: time.Minute, MaxTTL: time.Hour,
	ReplyPrefixes: []string{"geist/d/reply/", "geist/pool/reply/"}}

var codes = []string{CodeBadRequest, CodeTooLong, CodeBusy, CodeCancelled, CodeTimeout, CodeInternal, CodeDuplicate}

// FuzzParse: any ask payload is a valid request or a refusal with a known
// code and a short message; a request's id, session and reply_to are
// usable (a reply_to always under the reply prefixes), and its text or
// messages pass the core's checks. The id probe of a refused payload
// never yields an unusable address.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"id":"a1","text":"hi","session":"s","system":"be brief","max_tokens":5,"temperature":0.5,"stream":true,"reply_to":"geist/d/reply/x","ttl_s":2.5}`,
		`{"messages":[{"role":"system","content":"x"},{"role":"user","content":"y"}]}`,
		"plain text question", `{"id":"x","text":`, `{"id":"x","` + strings.Repeat("n", 100) + `":1}`,
		`{"id":"x","text":"a","reply_to":"homeassistant/status"}`, "{\"id\":\"u\",\"text\":\"a\xff\"}", `{"ID":"y","Reply_To":"geist/d/reply/z","text":5}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		req, e := Parse(payload, fuzzLimits, time.Unix(0, 0))
		if e == nil {
			checkRequest(t, req)
			return
		}
		checkRefusal(t, e)
		checkAddress(t, req)
		// The same payload as the head of an oversized one.
		req, e = TooLong(payload, 1<<30, fuzzLimits)
		if e.Code != CodeTooLong {
			t.Fatalf("oversized: %+v", e)
		}
		checkRefusal(t, e)
		checkAddress(t, req)
	})
}

func checkRefusal(t *testing.T, e *Error) {
	t.Helper()
	if !slices.Contains(codes, e.Code) || len(e.Message) > maxErrorMessage || !utf8.ValidString(e.Message) {
		t.Fatalf("refusal %q (%d bytes): %.200q", e.Code, len(e.Message), e.Message)
	}
}

func checkAddress(t *testing.T, r Request) {
	t.Helper()
	if r.ID != "" && appliance.CheckID("id", r.ID) != nil {
		t.Fatalf("unusable id %q", r.ID)
	}
	if r.ReplyTo != "" && checkTopic(r.ReplyTo, fuzzLimits.ReplyPrefixes) != nil {
		t.Fatalf("reply_to %q outside the prefixes", r.ReplyTo)
	}
}

func checkRequest(t *testing.T, r Request) {
	t.Helper()
	checkAddress(t, r)
	if r.ID == "" {
		t.Fatal("a request without an id")
	}
	if r.Session != "" && appliance.CheckID("session", r.Session) != nil {
		t.Fatalf("unusable session %q", r.Session)
	}
	a := r.core()
	if r.Generated {
		a.ID = "" // the core assigns it
	}
	c, err := appliance.New(appliance.Config{Engine: &appliancetest.Engine{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Submit(t.Context(), a, nil); err != nil && !strings.Contains(err.Error(), "too_long") && !strings.Contains(err.Error(), "bad_request") {
		t.Fatalf("the core refused a parsed request: %v", err)
	}
}

// FuzzCancel: any cancel payload is a usable id or a short refusal.
func FuzzCancel(f *testing.F) {
	for _, s := range []string{`{"id":"a1"}`, "a1", `{"id":"a b"}`, `{"id":"x","` + strings.Repeat("n", 100) + `":1}`, `{"id":7}`, "  ", "{"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		id, e := ParseCancel(payload)
		if e != nil {
			checkRefusal(t, e)
			return
		}
		if appliance.CheckID("id", id) != nil {
			t.Fatalf("unusable id %q", id)
		}
	})
}
