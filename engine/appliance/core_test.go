package appliance_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
	"github.com/geisten/geist/engine/chat"
	"github.com/geisten/geist/engine/constraint"
)

func testLog() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// start runs a core over eng until the end of the test.
func start(t *testing.T, eng appliance.Engine, mod func(*appliance.Config)) *appliance.Core {
	t.Helper()
	cfg := appliance.Config{Engine: eng, Logger: testLog()}
	if mod != nil {
		mod(&cfg)
	}
	return appliancetest.Start(t, cfg).Core
}

func outcome(t *testing.T, tk *appliance.Ticket) appliance.Outcome {
	t.Helper()
	select {
	case <-tk.Done():
		return tk.Outcome()
	case <-time.After(10 * time.Second):
		t.Fatalf("no outcome for %s", tk.ID)
	}
	return appliance.Outcome{}
}

func code(o appliance.Outcome) string {
	if o.Err != nil {
		return string(o.Err.Code)
	}
	return "answered"
}

func submit(t *testing.T, c *appliance.Core, r appliance.Request) *appliance.Ticket {
	t.Helper()
	tk, err := c.Submit(context.Background(), r, nil)
	if err != nil {
		t.Fatalf("%+v: %v", r, err)
	}
	return tk
}

func errCode(err error) appliance.Code {
	var e *appliance.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func TestSubmitAnswers(t *testing.T) {
	eng := &appliancetest.Engine{Words: 4, Delay: time.Millisecond}
	c := start(t, eng, func(cfg *appliance.Config) { cfg.System = "be brief"; cfg.Limits.MaxTokens = 512 })
	var streamed strings.Builder
	tk, err := c.Submit(context.Background(), appliance.Request{Source: appliance.SourceHTTP, Text: "hello"}, func(p appliance.Piece) { streamed.WriteString(p.Content) })
	if err != nil {
		t.Fatal(err)
	}
	o := outcome(t, tk)
	if o.Err != nil || o.Text != " w0 w1 w2 w3." || streamed.String() != o.Text || o.ID != tk.ID || !strings.HasPrefix(tk.ID, "g") ||
		o.Source != appliance.SourceHTTP || o.Usage.GeneratedTokens != 4 || o.Usage.TokS != 100 {
		t.Fatalf("outcome %+v, streamed %q", o, streamed.String())
	}
	req := eng.Requests()[0]
	if len(req.Messages) != 2 || req.Messages[0].Role != "system" || req.Messages[0].Content != "be brief" || req.Messages[1].Content != "hello" || req.History != 0 {
		t.Errorf("engine request %+v", req)
	}
	// Raw: the text is the prompt, no template, no system message.
	o = outcome(t, submit(t, c, appliance.Request{Text: "Once upon", Raw: true}))
	if req := eng.Requests()[1]; o.Err != nil || req.Prompt != "Once upon" || len(req.Messages) != 0 {
		t.Errorf("raw: %+v %+v", o, req)
	}
	// Options reach the sampler; defaults and caps apply.
	temp, seed := 0.0, uint64(7)
	outcome(t, submit(t, c, appliance.Request{Text: "x", Options: appliance.Options{Temperature: &temp, Seed: &seed, MaxTokens: 1 << 20, Stop: []string{"END"}}}))
	if req := eng.Requests()[2]; req.Sampling.Temperature != 0 || req.Sampling.Seed != 7 || req.MaxTokens != 512 || !slices.Equal(req.Stop, []string{"END"}) {
		t.Errorf("options: %+v", req)
	}
	// Errors of the engine.
	for text, want := range map[string]string{"TOOLONG": "too_long", "PANIC": "internal", "FAIL": "internal"} {
		if o := outcome(t, submit(t, c, appliance.Request{Text: text})); code(o) != want {
			t.Errorf("%s: %+v, want %s", text, o, want)
		} else if text == "TOOLONG" && o.Err.Message != "prompt too long: 9999 tokens" {
			t.Errorf("too long: %q", o.Err.Message)
		}
	}
	st := c.Snapshot()
	if st.Served != 3 || st.Refused != 1 || st.Failed != 2 || st.Requests[appliance.SourceHTTP]["answered"] != 1 || st.State != "idle" {
		t.Errorf("state %+v", st)
	}
}

// TestMaxTokensDefaultUnbounded: without a configured cap, a request that
// names no max_tokens (or a large one) reaches the engine unbounded or as
// asked: the answer ends at its end, the context or its TTL, never at a
// silent server-wide default (issue 37: 512 tokens ended with "length").
func TestMaxTokensDefaultUnbounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := &appliancetest.Engine{Words: 4, Delay: time.Millisecond}
		c := start(t, eng, nil)
		if got := c.Limits().MaxTokens; got != 0 {
			t.Errorf("default Limits.MaxTokens %d, want 0 (no cap)", got)
		}
		outcome(t, submit(t, c, appliance.Request{Text: "x"}))
		outcome(t, submit(t, c, appliance.Request{Text: "x", Options: appliance.Options{MaxTokens: 4000}}))
		if o := outcome(t, submit(t, c, appliance.Request{Text: "long"})); o.Err != nil || !strings.HasSuffix(o.Text, " w999.") {
			t.Errorf("no max_tokens: error %v, %d bytes, want all 1000 words", o.Err, len(o.Text))
		}
		reqs := eng.Requests()
		if reqs[0].MaxTokens != 0 || reqs[1].MaxTokens != 4000 {
			t.Errorf("max tokens reaching the engine: %d and %d, want 0 (until the context) and 4000", reqs[0].MaxTokens, reqs[1].MaxTokens)
		}
		if o := outcome(t, submit(t, c, appliance.Request{Text: "long", Options: appliance.Options{MaxTokens: 600}})); o.Err != nil || !strings.HasSuffix(o.Text, " w599.") {
			t.Errorf("600 asked: error %v, %d bytes, want 600 words", o.Err, len(o.Text))
		}
	})
}

func TestSubmitRefusals(t *testing.T) {
	c := start(t, &appliancetest.Engine{}, nil)
	bad := 3.0
	for _, r := range []appliance.Request{
		{}, {Text: "  "}, {Text: "x", Session: "a b"}, {Text: "caf\xc3\x28"}, {ID: "a/b", Text: "x"},
		{Text: "x", Messages: []appliance.Message{{Role: "user", Content: "y"}}},
		{Messages: []appliance.Message{{Role: "robot", Content: "y"}}},
		{Text: "x", Options: appliance.Options{Temperature: &bad}},
		{Text: "x", TTL: 100 * time.Hour},
		{Text: "x", Options: appliance.Options{MaxTokens: -1}},
	} {
		if _, err := c.Submit(context.Background(), r, nil); errCode(err) != appliance.CodeBadRequest || !errors.Is(err, appliance.ErrBadRequest) {
			t.Errorf("%+v: %v", r, err)
		}
	}
	if _, err := c.Submit(context.Background(), appliance.Request{Text: strings.Repeat("x", 2<<20)}, nil); errCode(err) != appliance.CodeTooLong {
		t.Errorf("2 MiB: %v", err)
	}
}

func TestQueueCancelWithdraw(t *testing.T) {
	eng := &appliancetest.Engine{Delay: time.Millisecond}
	c := start(t, eng, func(cfg *appliance.Config) { cfg.Limits.Queue = 2 })
	started := make(chan struct{})
	var once sync.Once
	run, err := c.Submit(context.Background(), appliance.Request{ID: "run", Text: "long"}, func(appliance.Piece) { once.Do(func() { close(started) }) })
	if err != nil {
		t.Fatal(err)
	}
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	q1, err1 := c.Submit(ctx, appliance.Request{ID: "q1", Text: "x"}, nil)
	q2, err2 := c.Submit(context.Background(), appliance.Request{ID: "q2", Text: "x"}, nil)
	_, err3 := c.Submit(context.Background(), appliance.Request{ID: "q3", Text: "x"}, nil)
	if err1 != nil || err2 != nil || errCode(err3) != appliance.CodeBusy || !errors.Is(err3, appliance.ErrBusy) {
		t.Fatalf("queue of 2: %v %v %v", err1, err2, err3)
	}
	if st := c.Snapshot(); st.Queue != 2 || !st.Busy || st.State != "generating" || !slices.Equal(st.Running, []string{"run"}) {
		t.Errorf("state %+v", st)
	}
	cancel() // withdraws q1 at once
	if o := outcome(t, q1); code(o) != "cancelled" || o.Err.Message != "cancelled while queued" {
		t.Errorf("withdrawn: %+v", o)
	}
	if !c.Cancel("q2") || c.Cancel("nope") {
		t.Error("Cancel of a queued and an unknown id")
	}
	if o := outcome(t, q2); code(o) != "cancelled" {
		t.Errorf("cancelled while queued: %+v", o)
	}
	// A busy refusal does not reserve its id: q3 can be retried at once.
	q3, err := c.Submit(context.Background(), appliance.Request{ID: "q3", Text: "x"}, nil)
	if err != nil {
		t.Fatalf("retry after busy: %v", err)
	}
	if !c.CancelRunning() {
		t.Error("nothing was running")
	}
	if o := outcome(t, run); code(o) != "cancelled" || o.Text == "" {
		t.Errorf("cancelled while running: %+v", o)
	}
	if o := outcome(t, q3); code(o) != "answered" {
		t.Errorf("q3: %+v", o)
	}
	// Cancellations are asked for: counted apart, never as failures.
	if st := c.Snapshot(); st.Cancelled != 3 || st.Failed != 0 || st.Refused != 1 || st.Served != 1 {
		t.Errorf("counters after three cancellations: %+v", st)
	}
	if c.CancelRunning() {
		t.Error("CancelRunning with nothing running reported true")
	}
}

func TestTTL(t *testing.T) {
	eng := &appliancetest.Engine{Delay: time.Millisecond}
	c := start(t, eng, nil)
	long := submit(t, c, appliance.Request{Text: "long", Options: appliance.Options{MaxTokens: 100}})
	short := submit(t, c, appliance.Request{Text: "x", TTL: 20 * time.Millisecond})
	if o := outcome(t, short); code(o) != "timeout" || !strings.Contains(o.Err.Message, "0.02s") {
		t.Errorf("expired in the queue: %+v", o)
	}
	outcome(t, long)
	if o := outcome(t, submit(t, c, appliance.Request{Text: "long", TTL: 30 * time.Millisecond})); code(o) != "timeout" {
		t.Errorf("expired while running: %+v", o)
	}
}

// TestDedup: a repeated id is answered with the stored outcome once the
// first request finished, refused as a duplicate naming its state while
// it is queued or running; refused requests do not reserve their id.
// (In a synctest bubble: the sleeps wait for the queue to settle and for
// the dedup window to pass on the bubble's clock, without waiting.)
func TestDedup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := &appliancetest.Engine{Delay: time.Millisecond}
		c := start(t, eng, func(cfg *appliance.Config) { cfg.Dedup.TTL = 300 * time.Millisecond })
		eng.Hold()
		a := submit(t, c, appliance.Request{ID: "a", Text: "x"})
		b := submit(t, c, appliance.Request{ID: "b", Text: "x"})
		time.Sleep(20 * time.Millisecond)
		for id, state := range map[string]string{"a": "running", "b": "queued"} {
			_, err := c.Submit(context.Background(), appliance.Request{ID: id, Text: "x"}, nil)
			var e *appliance.Error
			if !errors.As(err, &e) || e.Code != appliance.CodeDuplicate || e.State != state || !strings.Contains(e.Message, "already "+state) {
				t.Errorf("%s again while %s: %v", id, state, err)
			}
		}
		eng.Release()
		first := outcome(t, a)
		outcome(t, b)
		again := submit(t, c, appliance.Request{ID: "a", Text: "something else"})
		if o := outcome(t, again); !o.Replayed || o.Text != first.Text || o.ID != "a" || len(eng.Requests()) != 2 {
			t.Errorf("finished id again: %+v (%d generations)", o, len(eng.Requests()))
		}
		// An invalid request or an engine refusal (too long) does not reserve its id.
		if _, err := c.Submit(context.Background(), appliance.Request{ID: "v", Text: " "}, nil); err == nil {
			t.Fatal("empty text accepted")
		}
		if o := outcome(t, submit(t, c, appliance.Request{ID: "v", Text: "TOOLONG"})); code(o) != "too_long" {
			t.Fatalf("too long: %+v", o)
		}
		if o := outcome(t, submit(t, c, appliance.Request{ID: "v", Text: "x"})); code(o) != "answered" || o.Replayed {
			t.Errorf("retried after refusals: %+v", o)
		}
		// After the window the id is new again.
		time.Sleep(350 * time.Millisecond)
		if o := outcome(t, submit(t, c, appliance.Request{ID: "a", Text: "x"})); o.Replayed {
			t.Errorf("replayed after the window: %+v", o)
		}
		if st := c.Snapshot(); st.Duplicates != 3 {
			t.Errorf("duplicates %d, want 3", st.Duplicates)
		}
	})
}

// TestSessions: a session's history goes to the engine as history (which
// it may leave out to fit), the exchange is appended, and a new
// conversation forgets it after the work queued before it.
func TestSessions(t *testing.T) {
	eng := &appliancetest.Engine{}
	store := appliance.NewMemorySessions(8, 20)
	c := start(t, eng, func(cfg *appliance.Config) { cfg.Sessions = store; cfg.System = "sys" })
	outcome(t, submit(t, c, appliance.Request{Text: "one", Session: "s"}))
	outcome(t, submit(t, c, appliance.Request{Text: "two", Session: "s"}))
	req := eng.Requests()[1]
	if req.History != 2 || len(req.Messages) != 4 || req.Messages[1].Content != "one" || req.Messages[2].Role != "assistant" {
		t.Errorf("second request: history %d, messages %+v", req.History, req.Messages)
	}
	// A request's own system message leads, before the history, and
	// becomes the conversation's (not a turn): later requests of the
	// session render it instead of the configured one, as run --session
	// does. The answers keep their token ids.
	outcome(t, submit(t, c, appliance.Request{Session: "s", Messages: []appliance.Message{{Role: "system", Content: "mine"}, {Role: "user", Content: "three"}}}))
	req = eng.Requests()[2]
	if req.Messages[0].Content != "mine" || req.History != 4 || req.Messages[5].Content != "three" {
		t.Errorf("messages with a system message: %+v", req.Messages)
	}
	h, _ := store.Load("s")
	if len(h) != 7 || h[0].Role != "system" || h[0].Content != "mine" || h[5].Content != "three" || len(h[6].Tokens) != 3 {
		t.Errorf("stored %+v", h)
	}
	outcome(t, submit(t, c, appliance.Request{Text: "again", Session: "s"}))
	if req = eng.Requests()[3]; req.Messages[0].Content != "mine" || req.History != 6 {
		t.Errorf("the stored system message is not rendered: %+v", req.Messages)
	}
	store.Forget("s")
	for range 3 {
		outcome(t, submit(t, c, appliance.Request{Text: "refill", Session: "s", System: "mine"}))
	}
	// The forget runs on the worker between the requests queued around it.
	eng.Hold()
	first := submit(t, c, appliance.Request{Text: "four", Session: "s"})
	c.NewConversation("s")
	second := submit(t, c, appliance.Request{Text: "five", Session: "s"})
	eng.Release()
	outcome(t, first)
	outcome(t, second)
	reqs := eng.Requests()
	if reqs[7].History != 6 || reqs[8].History != 0 {
		t.Errorf("history before the new conversation %d, after %d", reqs[3].History, reqs[4].History)
	}
	list, _ := store.List()
	if len(list) != 1 || list[0].ID != "s" || list[0].Messages != 2 {
		t.Errorf("sessions %+v", list)
	}
	// The dashboard conversation.
	d0 := c.DefaultSession()
	c.NewConversation("")
	if d1 := c.DefaultSession(); d1 == d0 || !strings.HasPrefix(d1, "dashboard-") || c.Snapshot().Session != d1 {
		t.Errorf("default session %s → %s", d0, d1)
	}
}

// TestWatch: every request reports queued, started and finished, in
// order, with its outcome.
func TestWatch(t *testing.T) {
	c := start(t, &appliancetest.Engine{}, nil)
	var mu sync.Mutex
	var got []string
	stop := c.Watch(func(ev appliance.Event) {
		mu.Lock()
		defer mu.Unlock()
		s := ev.Kind.String() + " " + string(ev.Source)
		if ev.Outcome != nil {
			s += " " + code(*ev.Outcome)
		}
		got = append(got, s)
	})
	outcome(t, submit(t, c, appliance.Request{Source: appliance.SourceButton, Text: "x"}))
	outcome(t, submit(t, c, appliance.Request{Source: appliance.SourceHermes, Text: "FAIL"}))
	stop()
	outcome(t, submit(t, c, appliance.Request{Text: "x"}))
	mu.Lock()
	defer mu.Unlock()
	want := []string{"queued button", "started button", "finished button answered", "queued hermes", "started hermes", "finished hermes internal"}
	if !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestShutdown: queued requests end cancelled, the running one finishes
// within the grace, later ones are busy.
func TestShutdown(t *testing.T) {
	eng := &appliancetest.Engine{Words: 20, Delay: 5 * time.Millisecond}
	c, err := appliance.New(appliance.Config{Engine: eng, Logger: testLog(), ShutdownGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	started := make(chan struct{})
	var once sync.Once
	run, _ := c.Submit(context.Background(), appliance.Request{Text: "x"}, func(appliance.Piece) { once.Do(func() { close(started) }) })
	<-started
	queued := submit(t, c, appliance.Request{Text: "x"})
	var stopping bool
	c.Watch(func(ev appliance.Event) {
		if ev.Kind == appliance.EventChanged && c.Snapshot().State == "stopping" {
			stopping = true
		}
	})
	cancel()
	if o := outcome(t, queued); code(o) != "cancelled" || o.Err.Message != "geist is shutting down" {
		t.Errorf("queued at shutdown: %+v", o)
	}
	if o := outcome(t, run); code(o) != "answered" {
		t.Errorf("running at shutdown: %+v", o)
	}
	<-done
	<-c.Done()
	if _, err := c.Submit(context.Background(), appliance.Request{Text: "x"}, nil); errCode(err) != appliance.CodeBusy {
		t.Errorf("after shutdown: %v", err)
	}
	if !stopping {
		t.Error("no stopping state reported")
	}
}

// TestDegraded: SetDegraded shows in the State and tells the watchers
// once per change; an empty reason clears it.
func TestDegraded(t *testing.T) {
	c := start(t, &appliancetest.Engine{}, nil)
	if d := c.Snapshot().Degraded; d != nil {
		t.Fatalf("degraded at start: %v", d)
	}
	var changes int
	var mu sync.Mutex
	stop := c.Watch(func(ev appliance.Event) {
		if ev.Kind == appliance.EventChanged {
			mu.Lock()
			changes++
			mu.Unlock()
		}
	})
	defer stop()
	c.SetDegraded(appliance.PartBroker, "not connected")
	c.SetDegraded(appliance.PartBroker, "not connected") // no change
	c.SetDegraded(appliance.PartGPIO, "button talk missing")
	want := map[appliance.Part]string{appliance.PartBroker: "not connected", appliance.PartGPIO: "button talk missing"}
	if d := c.Snapshot().Degraded; !maps.Equal(d, want) {
		t.Errorf("degraded %v, want %v", d, want)
	}
	c.SetDegraded(appliance.PartBroker, "")
	c.SetDegraded(appliance.PartGPIO, "")
	if d := c.Snapshot().Degraded; d != nil {
		t.Errorf("degraded after clearing: %v", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if changes != 4 {
		t.Errorf("%d change events, want 4", changes)
	}
}

// failingStore fails Append (and Load, when loadErr is set) with errors
// that name a file, as storage's do.
type failingStore struct {
	*appliance.MemorySessions
	mu                 sync.Mutex
	appendErr, loadErr error
}

func (f *failingStore) Append(id string, msgs ...appliance.Message) error {
	f.mu.Lock()
	err := f.appendErr
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.MemorySessions.Append(id, msgs...)
}

func (f *failingStore) Load(id string) ([]appliance.Message, error) {
	f.mu.Lock()
	err := f.loadErr
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return f.MemorySessions.Load(id)
}

func (f *failingStore) set(appendErr, loadErr error) {
	f.mu.Lock()
	f.appendErr, f.loadErr = appendErr, loadErr
	f.mu.Unlock()
}

// TestSaveFails: a failed session save still delivers the answer, with
// the warning not_saved in words without the file's path; the State
// reports storage degraded until a save works again. A failed read is an
// internal error, also without the path.
func TestSaveFails(t *testing.T) {
	store := &failingStore{MemorySessions: appliance.NewMemorySessions(8, 20)}
	c := start(t, &appliancetest.Engine{}, func(cfg *appliance.Config) { cfg.Sessions = store })
	store.set(fmt.Errorf("storage: no space left to save: %w: write /var/lib/geist/sessions.db: no space left on device", appliance.ErrStoreFull), nil)
	o := outcome(t, submit(t, c, appliance.Request{Text: "one", Session: "s"}))
	if o.Err != nil || o.Text == "" || o.Warning == nil || o.Warning.Code != appliance.CodeNotSaved {
		t.Fatalf("outcome of a failed save: %+v", o)
	}
	if strings.Contains(o.Warning.Message, "/") || !strings.Contains(o.Warning.Message, "disk is full") {
		t.Errorf("warning %q", o.Warning.Message)
	}
	if d := c.Snapshot().Degraded[appliance.PartStorage]; d != "the last session save failed: the device's disk is full" {
		t.Errorf("degraded storage %q", d)
	}
	store.set(nil, fmt.Errorf("storage: %w: page 7 of /var/lib/geist/sessions.db", appliance.ErrStoreCorrupt))
	o = outcome(t, submit(t, c, appliance.Request{Text: "two", Session: "s"}))
	if code(o) != "internal" || strings.Contains(o.Err.Message, "/") || !strings.Contains(o.Err.Message, "damaged") {
		t.Errorf("outcome of a failed read: %+v", o.Err)
	}
	store.set(nil, nil)
	o = outcome(t, submit(t, c, appliance.Request{Text: "three", Session: "s"}))
	if o.Err != nil || o.Warning != nil {
		t.Errorf("outcome of a save that works: %+v", o)
	}
	if d := c.Snapshot().Degraded; d != nil {
		t.Errorf("degraded after a save worked: %v", d)
	}
	// Other failures: no internals either.
	o = outcome(t, submit(t, c, appliance.Request{Text: "FAIL"}))
	if code(o) != "internal" || o.Err.Message != "generation failed (details in the device's log)" {
		t.Errorf("failed generation: %+v", o.Err)
	}
}

// prefixEngine is the scripted engine with the engine's prefix methods:
// a conversation's prefix is its messages' contents joined, as tokens.
type prefixEngine struct{ appliancetest.Engine }

func (*prefixEngine) ModelID() []byte { return []byte("model") }

func (*prefixEngine) ConversationPrefix(msgs []chat.Message) ([]int32, error) {
	var toks []int32
	for _, m := range msgs {
		for _, r := range m.Role + ":" + m.Content {
			toks = append(toks, r)
		}
	}
	return toks, nil
}

// dropCache records DeletePrefix calls (and is a PromptCache).
type dropCache struct {
	mu       sync.Mutex
	model    string
	prefixes []string
}

func (*dropCache) Lookup([]byte, []int32) (int, []byte, bool) { return 0, nil, false }
func (*dropCache) Put([]byte, []int32, []byte) error          { return nil }
func (*dropCache) Stats() appliance.CacheStats                { return appliance.CacheStats{} }
func (d *dropCache) DeletePrefix(model []byte, prefixes ...[]int32) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.model = string(model)
	for _, p := range prefixes {
		d.prefixes = append(d.prefixes, string(p))
	}
	return len(prefixes), nil
}

// TestDeleteSessionDropsCache: deleting a conversation deletes the
// prompt-cache entries of its prompts (each begins with the system
// message and one of its user turns), after the work queued before it.
func TestDeleteSessionDropsCache(t *testing.T) {
	eng := &prefixEngine{}
	cache := &dropCache{}
	store := appliance.NewMemorySessions(8, 20)
	c := start(t, eng, func(cfg *appliance.Config) {
		cfg.Sessions = store
		cfg.System = "sys"
		cfg.Storage = &appliance.Storage{Cache: cache}
	})
	outcome(t, submit(t, c, appliance.Request{Text: "one", Session: "s"}))
	eng.Hold()
	last := submit(t, c, appliance.Request{Text: "two", Session: "s"})
	done := make(chan error)
	go func() { done <- c.DeleteSession(context.Background(), "s") }()
	time.Sleep(50 * time.Millisecond)
	eng.Release()
	outcome(t, last)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if h, _ := store.Load("s"); h != nil {
		t.Errorf("history after delete: %v", h)
	}
	want := []string{"system:sysuser:two", "system:sysuser:one"}
	if cache.model != "model" || !slices.Equal(cache.prefixes, want) {
		t.Errorf("dropped %q of %q, want %q", cache.prefixes, cache.model, want)
	}
	if err := c.DeleteSession(context.Background(), "a/b"); errCode(err) != appliance.CodeBadRequest {
		t.Errorf("bad session name: %v", err)
	}
}

// speculation are fixed speculative decoding figures of an answer.
var speculation = engine.Stats{TargetPasses: 5, TreePasses: 4, Drafted: 12, Accepted: 5, MaxAcceptedDepth: 3,
	Drafters: map[string]engine.DrafterStats{"lookup": {Drafted: 8, Accepted: 4, Steps: 3}, "self": {Drafted: 4, Accepted: 1, Steps: 1}}}

// TestSpeculationTotals: the state sums speculative decoding over the
// answers: tokens per model pass, tree size and accepted depth, and each
// drafter's counts.
func TestSpeculationTotals(t *testing.T) {
	c := start(t, &appliancetest.Engine{Speculation: speculation}, nil)
	for range 2 {
		if o := outcome(t, submit(t, c, appliance.Request{Text: "x"})); o.Err != nil || o.Usage.TreePasses != 4 || o.Usage.Drafters["self"].Accepted != 1 {
			t.Fatalf("outcome %+v", o)
		}
	}
	st := c.Snapshot()
	if st.TargetPasses != 10 || st.TreePasses != 8 || st.TokensPerPass != 2 || st.MeanTreeSize != 3 || st.MeanAcceptedDepth != 1.25 ||
		st.Drafters["lookup"] != (appliance.DrafterUsage{Drafted: 16, Accepted: 8, Steps: 6}) || st.AcceptanceRate != 10.0/24 {
		t.Errorf("state %+v", st)
	}
}

// TestThinkingApart: a model that thinks whatever the template says has
// its thinking block split from the content for every source: the sink
// and the outcome's text carry content only, the thinking and its tokens
// are apart; spoken sources get enable_thinking false, others (and a
// request's own Think) decide for themselves.
func TestThinkingApart(t *testing.T) {
	eng := &appliancetest.Engine{Script: appliancetest.Thinker}
	c := start(t, eng, nil)
	on := true
	for i, r := range []appliance.Request{
		{Source: appliance.SourceVoice, Text: "q"},
		{Source: appliance.SourceButton, Text: "q"},
		{Source: appliance.SourceWyoming, Text: "q"},
		{Source: appliance.SourceHermes, Text: "q"},
		{Source: appliance.SourceMQTT, Text: "q"},
		{Source: appliance.SourceHTTP, Text: "q"},
		{Source: appliance.SourceVoice, Text: "q", Think: &on},
	} {
		var content, thinking strings.Builder
		tk, err := c.Submit(context.Background(), r, func(p appliance.Piece) { content.WriteString(p.Content); thinking.WriteString(p.Thinking) })
		if err != nil {
			t.Fatal(err)
		}
		o := outcome(t, tk)
		if o.Err != nil || o.Text != appliancetest.ThinkerContent || content.String() != o.Text ||
			o.Thinking != appliancetest.ThinkerThinking || thinking.String() != o.Thinking {
			t.Errorf("%s: text %q streamed %q thinking %q streamed %q", r.Source, o.Text, content.String(), o.Thinking, thinking.String())
		}
		if o.Usage.ThinkingTokens != 4 || o.Usage.GeneratedTokens != 6 {
			t.Errorf("%s: %d of %d tokens counted as thinking, want 4 of 6", r.Source, o.Usage.ThinkingTokens, o.Usage.GeneratedTokens)
		}
		req := eng.Requests()[i]
		off, set := req.TemplateVars["enable_thinking"]
		wantOff := i < 4
		if set != wantOff || set && off != false {
			t.Errorf("%s (think %v): template variables %v", r.Source, r.Think, req.TemplateVars)
		}
	}
	if st := c.Snapshot(); st.ThinkingTokens != 7*4 {
		t.Errorf("state: %d thinking tokens, want %d", st.ThinkingTokens, 7*4)
	}
}

// TestThinkingApartGemma4: with Gemma 4's marks (Config.ThinkMarks) its
// thought channel is split from the content, streamed and in the outcome,
// the channel's marks in neither; the same answer under the default
// <think> marks is all content.
func TestThinkingApartGemma4(t *testing.T) {
	pieces := []string{"<|channel>", "thought\n", "weigh it", "<channel|>", "It is four."}
	eng := &appliancetest.Engine{Script: func(engine.Request) []string { return pieces }}
	for _, marks := range []chat.ThinkMarks{chat.GemmaThought, {}} {
		c := start(t, eng, func(cfg *appliance.Config) { cfg.ThinkMarks = marks })
		var content, thinking strings.Builder
		tk, err := c.Submit(context.Background(), appliance.Request{Source: appliance.SourceHTTP, Text: "q"}, func(p appliance.Piece) {
			content.WriteString(p.Content)
			thinking.WriteString(p.Thinking)
		})
		if err != nil {
			t.Fatal(err)
		}
		o := outcome(t, tk)
		wantText, wantThinking, wantTokens := "It is four.", "weigh it", 4
		if marks == (chat.ThinkMarks{}) {
			wantText, wantThinking, wantTokens = strings.Join(pieces, ""), "", 0
		}
		if o.Err != nil || o.Text != wantText || content.String() != o.Text || o.Thinking != wantThinking || thinking.String() != o.Thinking {
			t.Errorf("marks %q: text %q streamed %q thinking %q streamed %q", marks, o.Text, content.String(), o.Thinking, thinking.String())
		}
		if o.Usage.ThinkingTokens != wantTokens {
			t.Errorf("marks %q: %d thinking tokens, want %d", marks, o.Usage.ThinkingTokens, wantTokens)
		}
	}
}

// TestDeleteSessionDropsCacheScripted: the scripted engine (as every
// engine the core accepts: the Engine interface requires it) renders the
// conversation's prefixes, and deleting the session drops them; no engine
// can make the core skip it.
func TestDeleteSessionDropsCacheScripted(t *testing.T) {
	cache := &dropCache{}
	c := start(t, &appliancetest.Engine{}, func(cfg *appliance.Config) { cfg.Storage = &appliance.Storage{Cache: cache} })
	outcome(t, submit(t, c, appliance.Request{Text: "one", Session: "s"}))
	if err := c.DeleteSession(context.Background(), "s"); err != nil {
		t.Fatal(err)
	}
	if cache.model != "appliancetest" || !slices.Equal(cache.prefixes, []string{"user:one\n"}) {
		t.Errorf("dropped %q of %q", cache.prefixes, cache.model)
	}
}

// TestAnswerCheck: a request's Check sees the finished content; an
// answer it refuses ends the request with its error (a oneOf a grammar
// could not keep exclusive), and the engine is told to let a thinking
// model think first.
func TestAnswerCheck(t *testing.T) {
	eng := &appliancetest.Engine{Words: 2}
	c := start(t, eng, nil)
	var seen string
	o := outcome(t, submit(t, c, appliance.Request{Text: "x", Check: func(b []byte) error { seen = string(b); return nil }}))
	if o.Err != nil || seen != o.Text || !eng.Requests()[0].GrammarAfterThink {
		t.Fatalf("%+v, check saw %q, engine request %+v", o, seen, eng.Requests()[0])
	}
	o = outcome(t, submit(t, c, appliance.Request{Text: "x", Check: func([]byte) error { return errors.New("two alternatives") }}))
	if code(o) != "internal" || !strings.Contains(o.Err.Message, "two alternatives") {
		t.Fatalf("a refused answer: %+v", o)
	}
}

// TestConstraintCompiledOnce: the core compiles a request's Constraint
// in Submit (the front end's goroutine): what cannot be enforced is
// refused there with bad_request naming it, before any work; the engine
// gets the grammar parsed, with its text, and the constraint's check
// sees the answer.
func TestConstraintCompiledOnce(t *testing.T) {
	eng := &appliancetest.Engine{Words: 2}
	c := start(t, eng, nil)
	_, err := c.Submit(context.Background(), appliance.Request{Text: "x", Constraint: &constraint.Constraint{Format: json.RawMessage(`"yaml"`)}}, nil)
	var ae *appliance.Error
	if !errors.As(err, &ae) || ae.Code != appliance.CodeBadRequest || !strings.Contains(ae.Message, `format "yaml"`) {
		t.Fatalf("a format that cannot be enforced: %v", err)
	}
	if n := len(eng.Requests()); n != 0 {
		t.Fatalf("%d requests reached the engine", n)
	}
	o := outcome(t, submit(t, c, appliance.Request{Text: "x", Constraint: &constraint.Constraint{Format: json.RawMessage(`"json"`)}}))
	r := eng.Requests()[0]
	if r.Parsed == nil || !strings.HasPrefix(r.Grammar, "root ::= object | array") || r.GrammarTrigger != "" {
		t.Fatalf("%+v: the engine got grammar %.40q parsed %v", o, r.Grammar, r.Parsed != nil)
	}
	// 3 is both an integer and a number: the oneOf's check refuses it.
	c = start(t, &appliancetest.Engine{Script: func(engine.Request) []string { return []string{"3"} }}, nil)
	o = outcome(t, submit(t, c, appliance.Request{Text: "x", Constraint: &constraint.Constraint{Format: json.RawMessage(`{"oneOf": [{"type": "integer"}, {"type": "number"}]}`)}}))
	if code(o) != "internal" || !strings.Contains(o.Err.Message, "the answer does not satisfy the schema") {
		t.Fatalf("an answer the check refuses: %+v", o)
	}
}

// TestToolCallsShapedOnce: with tools offered, the core parses the calls
// out of the answer once for every front end (Piece.Calls as they
// complete, Outcome.Calls), the content and thinking apart; the session
// keeps the content as the model wrote it (the call included, for the
// template to render again); without tools nothing is parsed.
func TestToolCallsShapedOnce(t *testing.T) {
	eng := &appliancetest.Engine{Script: appliancetest.ToolCaller}
	store := appliance.NewMemorySessions(4, 20)
	c := start(t, eng, func(cfg *appliance.Config) { cfg.Sessions = store })
	tools := []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"get_weather"}}`)}
	var streamed []appliance.ToolCall
	var content strings.Builder
	tk, err := c.Submit(context.Background(), appliance.Request{Text: "weather?", Session: "w", Tools: tools}, func(p appliance.Piece) {
		streamed = append(streamed, p.Calls...)
		content.WriteString(p.Content)
	})
	if err != nil {
		t.Fatal(err)
	}
	o := tk.Outcome()
	if o.Err != nil || o.Text != "Let me check." || content.String() != o.Text || o.Thinking != "look it up" ||
		len(o.Calls) != 1 || o.Calls[0].Name != "get_weather" || strings.ReplaceAll(string(o.Calls[0].Arguments), " ", "") != `{"city":"Paris"}` || len(streamed) != 1 {
		t.Fatalf("outcome %+v, streamed calls %+v, content %q", o, streamed, content.String())
	}
	h, _ := store.Load("w")
	if len(h) != 2 || !strings.Contains(h[1].Content, "<tool_call>") || strings.Contains(h[1].Content, "look it up") {
		t.Errorf("stored %+v", h)
	}
	if o := outcome(t, submit(t, c, appliance.Request{Text: "weather?"})); len(o.Calls) != 0 || !strings.Contains(o.Text, "<tool_call>") {
		t.Errorf("without tools: %+v", o)
	}
}

// TestOneToolCall: a request for one call (OpenAI's parallel_tool_calls
// false) gets the answer's first call only, the content before it, and
// generation ends at that call's closing tag: the second call and the
// text after never reach the sink or the outcome.
func TestOneToolCall(t *testing.T) {
	script := func(engine.Request) []string {
		return []string{"Sure.", "<tool_call>", `{"name": "get_weather", "arguments": {"city": "Paris"}}`, "</tool_call>",
			"\n<tool_call>", `{"name": "get_time", "arguments": {}}`, "</tool_call>", " Done."}
	}
	c := start(t, &appliancetest.Engine{Script: script}, nil)
	tools := []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"get_weather"}}`), json.RawMessage(`{"type":"function","function":{"name":"get_time"}}`)}
	for _, one := range []bool{true, false} {
		var streamed []appliance.ToolCall
		var content strings.Builder
		tk, err := c.Submit(context.Background(), appliance.Request{Text: "weather and time?", Tools: tools, OneToolCall: one}, func(p appliance.Piece) {
			streamed = append(streamed, p.Calls...)
			content.WriteString(p.Content)
		})
		if err != nil {
			t.Fatal(err)
		}
		o := outcome(t, tk)
		want, tokens, reason, text := 2, 8, "eos", "Sure.Done." // white space around calls is dropped
		if one {
			want, tokens, reason, text = 1, 4, "stop", "Sure."
		}
		if o.Err != nil || len(o.Calls) != want || len(streamed) != want || o.Calls[0].Name != "get_weather" || o.Text != text || content.String() != text ||
			o.Usage.GeneratedTokens != tokens || o.Usage.StopReason != reason {
			t.Errorf("one call %v: outcome %+v, streamed calls %+v, content %q", one, o, streamed, content.String())
		}
	}
}

// TestToolCallCutOff: an answer its token limit cuts off inside a tool
// call never streams the call's markup as content: the calls complete
// before the cut come back as calls (Granite's list: the first of two),
// the unfinished one is dropped, and the stop reason stays "length".
func TestToolCallCutOff(t *testing.T) {
	tools := []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"get_weather"}}`), json.RawMessage(`{"type":"function","function":{"name":"get_time"}}`)}
	for _, c := range []struct {
		name   string
		format chat.ToolFormat
		pieces []string
		calls  []string
		text   string
	}{
		{"tagged", chat.ToolsTagged, []string{"Sure.", "\n<tool_call>", `{"name": "get_weather", `, `"arguments": {"city": "Paris"}}`}, nil, "Sure."},
		{"tagged, one before", chat.ToolsTagged, []string{"<tool_call>", `{"name": "get_weather", "arguments": {}}`, "</tool_call>", "\n<tool_call>", `{"name": "get_time", `, `"arguments": {}}`}, []string{"get_weather"}, ""},
		{"granite", chat.ToolsGranite, []string{"<|tool_call|>", `[{"name": "get_weather", "arguments": {"city": "Paris"}}`, `, {"name": "get_time", `, `"arguments": {}}]`}, []string{"get_weather"}, ""},
	} {
		eng := &appliancetest.Engine{Script: func(engine.Request) []string { return c.pieces }}
		core := start(t, eng, func(cfg *appliance.Config) { cfg.ToolFormat = c.format })
		var content strings.Builder
		var streamed []string
		tk, err := core.Submit(context.Background(), appliance.Request{Text: "weather?", Tools: tools, Options: appliance.Options{MaxTokens: len(c.pieces) - 1}}, func(p appliance.Piece) {
			content.WriteString(p.Content)
			for _, call := range p.Calls {
				streamed = append(streamed, call.Name)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		o := outcome(t, tk)
		var names []string
		for _, call := range o.Calls {
			names = append(names, call.Name)
		}
		if o.Err != nil || o.Usage.StopReason != "length" || o.Text != c.text || content.String() != c.text || !slices.Equal(names, c.calls) || !slices.Equal(streamed, c.calls) {
			t.Errorf("%s: text %q (streamed %q), calls %v (streamed %v), stop %q, err %v; want text %q, calls %v", c.name, o.Text, content.String(), names, streamed, o.Usage.StopReason, o.Err, c.text, c.calls)
		}
		// The whole answer (a call's closing tag is not needed): every call.
		o = outcome(t, submit(t, core, appliance.Request{Text: "weather?", Tools: tools}))
		if o.Err != nil || len(o.Calls) != len(c.calls)+1 || o.Usage.StopReason != "eos" {
			t.Errorf("%s whole: %+v", c.name, o)
		}
	}
}

// warmEngine counts its warm-ups.
type warmEngine struct {
	*appliancetest.Engine
	warmed chan struct{}
}

func (w *warmEngine) Warm() (int, time.Duration) {
	w.warmed <- struct{}{}
	return 100, time.Millisecond
}

// TestWarm: Core.Warm runs the engine's warm-up on the worker; an engine
// that cannot warm makes it false.
func TestWarm(t *testing.T) {
	eng := &warmEngine{Engine: &appliancetest.Engine{Words: 2}, warmed: make(chan struct{}, 1)}
	c := start(t, eng, nil)
	if !c.Warm() {
		t.Fatal("Warm refused")
	}
	select {
	case <-eng.warmed:
	case <-time.After(5 * time.Second):
		t.Fatal("the engine was not warmed")
	}
	if start(t, &appliancetest.Engine{}, nil).Warm() {
		t.Error("Warm true for an engine that cannot warm")
	}
}

// TestStateThinkingOnlyInBlock: the busy state is "thinking" only while
// the answer is inside its thinking block, "generating" otherwise (a
// model that does not think never shows "thinking"; issue 37).
func TestStateThinkingOnlyInBlock(t *testing.T) {
	for _, c := range []struct {
		name   string
		pieces []string
	}{
		{"thinks", []string{"<think>", "\nhmm", " let me see", "\n</think>", "\n\n", "Hello", " there"}},
		{"does not think", []string{"Hello", " there", " friend"}},
	} {
		eng := &appliancetest.Engine{Delay: time.Millisecond, Script: func(engine.Request) []string { return c.pieces }}
		core := start(t, eng, nil)
		var mu sync.Mutex
		var seen []string
		tk, err := core.Submit(context.Background(), appliance.Request{Text: "hi"}, func(p appliance.Piece) {
			st := core.Snapshot().State
			mu.Lock()
			defer mu.Unlock()
			if p.Thinking != "" {
				seen = append(seen, "T:"+st)
			}
			if p.Content != "" {
				seen = append(seen, "C:"+st)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		outcome(t, tk)
		mu.Lock()
		for _, s := range seen {
			if strings.HasPrefix(s, "C:") && s != "C:generating" {
				t.Errorf("%s: content while %q (pieces and states %v)", c.name, s, seen)
			}
		}
		if c.name == "thinks" && !slices.Contains(seen, "T:thinking") || !slices.Contains(seen, "C:generating") {
			t.Errorf("%s: pieces and states %v", c.name, seen)
		}
		mu.Unlock()
		if st := core.Snapshot().State; st != "idle" {
			t.Errorf("%s: after the answer, state %q", c.name, st)
		}
	}
}
