package wyoming

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/geisten/geist/cmd/internal/wyoming/wyomingtest"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/mqtt/mqtttest"
)

// The server tests run the real appliance core over the scripted engine
// (appliancetest), and talk to the server with the reference Wyoming
// client (the rhasspy package in the peers folder, through
// wyoming-ask.py) and, for what that client does not show (the streamed
// events, malformed input), with raw events.

type testServer struct {
	addr string
	core *appliance.Core
	eng  *appliancetest.Engine
	logs *mqtttest.Log
	srv  *Server
	stop func() // stops the server (and then the core)
}

// start runs a core over eng and a Server on a loopback port until the
// end of the test.
func start(t *testing.T, eng *appliancetest.Engine, mod func(*appliance.Config, *Config)) *testServer {
	t.Helper()
	logs := &mqtttest.Log{}
	var w io.Writer = logs
	if testing.Verbose() {
		w = io.MultiWriter(logs, os.Stderr)
	}
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cc := appliance.Config{Engine: eng, Logger: log, ShutdownGrace: 2 * time.Second}
	wc := Config{Model: "stories260K-Q4_0", Version: "v-test", Logger: log}
	if mod != nil {
		mod(&cc, &wc)
	}
	core := appliancetest.Start(t, cc)
	srv, err := New(wc, core)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The server stops after the core, so that the last answers reach
	// their clients.
	core.Serve(func(ctx context.Context) error { return srv.Serve(ctx, ln) })
	return &testServer{addr: ln.Addr().String(), core: core.Core, eng: eng, logs: logs, srv: srv, stop: core.Stop}
}

// peer runs the reference client: wyoming-ask.py ADDR args....
func peer(t *testing.T, addr string, args ...string) (string, map[string]any) {
	t.Helper()
	return wyomingtest.Ask(t, addr, args...)
}

// client is a raw Wyoming client for the tests.
type client struct {
	t  *testing.T
	nc net.Conn
	r  *Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &client{t: t, nc: nc, r: NewReader(nc, Limits{MaxData: 1 << 20})}
}

func (c *client) send(typ string, data any) {
	c.t.Helper()
	b, err := AppendEvent(nil, typ, data, nil)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// recv reads the next event within d.
func (c *client) recv(d time.Duration) (Event, error) {
	c.nc.SetReadDeadline(time.Now().Add(d))
	return c.r.Read()
}

type gotEvent struct {
	Type string
	Data map[string]any
}

// until reads events until one of type last (or not-handled) arrives.
func (c *client) until(last string) []gotEvent {
	c.t.Helper()
	var evs []gotEvent
	for {
		ev, err := c.recv(10 * time.Second)
		if err != nil {
			c.t.Fatalf("reading events after %v: %v", evs, err)
		}
		g := gotEvent{Type: ev.Type, Data: map[string]any{}}
		if err := ev.Decode(&g.Data); err != nil {
			c.t.Fatal(err)
		}
		evs = append(evs, g)
		if ev.Type == last || ev.Type == "not-handled" {
			return evs
		}
	}
}

// closed reports whether the server closed the connection (EOF or a
// reset) within d.
func (c *client) closed(d time.Duration) bool {
	c.nc.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c.nc)
	var ne net.Error
	return err == nil || !(errors.As(err, &ne) && ne.Timeout())
}

func TestDescribeWithReferenceClient(t *testing.T) {
	ts := start(t, &appliancetest.Engine{}, func(_ *appliance.Config, c *Config) { c.Languages = []string{"en", "de"} })
	typ, data := peer(t, ts.addr, "describe")
	if typ != "info" {
		t.Fatalf("describe answered %s %v", typ, data)
	}
	b, _ := json.Marshal(data)
	var info Info
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	if len(info.Handle) != 1 {
		t.Fatalf("info %s: want one handle program", b)
	}
	h := info.Handle[0]
	if h.Name != "geist" || !h.Installed || h.Attribution.URL == "" || h.Version == nil || *h.Version != "v-test" ||
		h.Description == nil || !strings.Contains(*h.Description, "stories260K-Q4_0") || !h.SupportsHandledStreaming ||
		len(h.Models) != 1 || h.Models[0].Name != "stories260K-Q4_0" || !h.Models[0].Installed ||
		strings.Join(h.Models[0].Languages, ",") != "en,de" {
		t.Errorf("handle program %+v", h)
	}
	for _, k := range []string{"asr", "tts", "intent", "wake", "mic", "snd"} {
		if v, ok := data[k].([]any); !ok || len(v) != 0 {
			t.Errorf("info.%s = %v, want an empty list", k, data[k])
		}
	}
	t.Logf("describe: %s", b)
}

func TestAskWithReferenceClient(t *testing.T) {
	eng := &appliancetest.Engine{Words: 5}
	ts := start(t, eng, nil)
	typ, data := peer(t, ts.addr, "ask", "Hello there")
	if typ != "handled" || data["text"] != "w0 w1 w2 w3 w4." {
		t.Fatalf("ask: %s %v", typ, data)
	}
	ctx, _ := data["context"].(map[string]any)
	if id, _ := ctx["conversation_id"].(string); id == "" {
		t.Errorf("handled context %v has no conversation_id", data["context"])
	}
	// A conversation id continues across connections (Home Assistant
	// opens one per question).
	typ, data = peer(t, ts.addr, "ask", "first", "conv-1")
	typ2, data2 := peer(t, ts.addr, "ask", "second", "conv-1")
	if typ != "handled" || typ2 != "handled" {
		t.Fatalf("asks: %s %v, %s %v", typ, data, typ2, data2)
	}
	if c, _ := data2["context"].(map[string]any); c["conversation_id"] != "conv-1" {
		t.Errorf("context %v: want conversation_id conv-1", data2["context"])
	}
	reqs := eng.Requests()
	last := reqs[len(reqs)-1].Messages
	var roles []string
	for _, m := range last {
		roles = append(roles, m.Role+":"+m.Content)
	}
	if len(last) != 3 || last[0].Content != "first" || last[2].Content != "second" {
		t.Errorf("the second question of conv-1 was asked with %q; want the first exchange before it", roles)
	}
	st := ts.core.Snapshot()
	if st.Requests[appliance.SourceWyoming]["answered"] != 3 {
		t.Errorf("counters %v: want 3 Wyoming answers", st.Requests)
	}
}

func TestStreamedEvents(t *testing.T) {
	eng := &appliancetest.Engine{Words: 4, Delay: 5 * time.Millisecond}
	ts := start(t, eng, nil)
	c := dial(t, ts.addr)
	c.send("transcript", map[string]any{"text": "Hi", "language": "en"})
	evs := c.until("handled-stop")
	var types []string
	var chunks strings.Builder
	for _, e := range evs {
		types = append(types, e.Type)
		if e.Type == "handled-chunk" {
			chunks.WriteString(e.Data["text"].(string))
		}
	}
	n := len(evs)
	if n < 4 || evs[0].Type != "handled-start" || evs[n-2].Type != "handled" || evs[n-1].Type != "handled-stop" {
		t.Fatalf("events %v: want handled-start, handled-chunk…, handled, handled-stop", types)
	}
	if chunks.String() != " w0 w1 w2 w3." || evs[n-2].Data["text"] != "w0 w1 w2 w3." {
		t.Errorf("chunks %q, handled %q", chunks.String(), evs[n-2].Data["text"])
	}
	conv := evs[0].Data["context"].(map[string]any)["conversation_id"]
	// The connection's own conversation goes on with the next question,
	// and ping answers pong meanwhile.
	c.send("ping", map[string]any{"text": "p1"})
	if evs := c.until("pong"); evs[0].Data["text"] != "p1" {
		t.Errorf("pong %v", evs)
	}
	c.send("transcript", map[string]any{"text": "Again"})
	evs = c.until("handled-stop")
	if got := evs[0].Data["context"].(map[string]any)["conversation_id"]; got != conv {
		t.Errorf("second question's conversation %v, first %v", got, conv)
	}
	if reqs := eng.Requests(); len(reqs[1].Messages) != 3 {
		t.Errorf("second question asked with %d messages, want 3 (history)", len(reqs[1].Messages))
	}
	t.Logf("events: %v", types)
}

func TestParallelConnections(t *testing.T) {
	eng := &appliancetest.Engine{Words: 5, Delay: 20 * time.Millisecond}
	ts := start(t, eng, nil)
	var wg sync.WaitGroup
	results := make([]string, 2)
	for i := range results {
		wg.Go(func() {
			typ, data := peer(t, ts.addr, "ask", fmt.Sprintf("question %d", i))
			results[i] = typ + " " + fmt.Sprint(data["text"])
		})
	}
	wg.Wait()
	for i, r := range results {
		if r != "handled w0 w1 w2 w3 w4." {
			t.Errorf("client %d: %s", i, r)
		}
	}
	if n := len(eng.Requests()); n != 2 {
		t.Errorf("%d generations, want 2", n)
	}
}

func TestBusyAndErrors(t *testing.T) {
	eng := &appliancetest.Engine{}
	ts := start(t, eng, func(cc *appliance.Config, _ *Config) { cc.Limits.Queue = 1 })
	eng.Hold()
	running, queued := dial(t, ts.addr), dial(t, ts.addr)
	running.send("transcript", map[string]any{"text": "one"})
	waitFor(t, "first question running", func() bool { return len(ts.core.Snapshot().Running) == 1 })
	queued.send("transcript", map[string]any{"text": "two"})
	waitFor(t, "second question queued", func() bool { return ts.core.Snapshot().Queue == 1 })
	typ, data := peer(t, ts.addr, "ask", "three")
	if typ != "not-handled" || !strings.Contains(fmt.Sprint(data["text"]), "busy") {
		t.Errorf("third question: %s %v, want not-handled (busy)", typ, data)
	}
	eng.Release()
	for _, c := range []*client{running, queued} {
		if evs := c.until("handled-stop"); evs[len(evs)-2].Type != "handled" {
			t.Errorf("events %v", evs)
		}
	}
	for _, q := range []struct{ text, want string }{
		{"FAIL please", "not-handled"},
		{"   ", "not-handled"},
		{"TOOLONG", "not-handled"},
	} {
		typ, data := peer(t, ts.addr, "ask", q.text)
		if typ != q.want {
			t.Errorf("%q: %s %v", q.text, typ, data)
		}
		t.Logf("%q: %s %v", q.text, typ, data["text"])
	}
	c := dial(t, ts.addr)
	c.send("transcript", map[string]any{"language": "en"})
	if evs := c.until("handled"); evs[0].Type != "not-handled" || !strings.Contains(evs[0].Data["text"].(string), "no text") {
		t.Errorf("transcript without text: %v", evs)
	}
}

// A client that goes away cancels its question, queued or running.
func TestClientGoneCancels(t *testing.T) {
	eng := &appliancetest.Engine{Delay: 10 * time.Millisecond}
	ts := start(t, eng, nil)
	outcomes := make(chan appliance.Outcome, 4)
	defer ts.core.Watch(func(ev appliance.Event) {
		if ev.Kind == appliance.EventFinished {
			outcomes <- *ev.Outcome
		}
	})()
	c := dial(t, ts.addr)
	c.send("transcript", map[string]any{"text": "long"})
	if _, err := c.recv(5 * time.Second); err != nil { // handled-start: it runs
		t.Fatal(err)
	}
	c.nc.Close()
	select {
	case o := <-outcomes:
		if o.Err == nil || o.Err.Code != appliance.CodeCancelled {
			t.Errorf("outcome %+v, want cancelled", o)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the question of a closed connection was not cancelled")
	}
}

func TestMalformedEvents(t *testing.T) {
	ts := start(t, &appliancetest.Engine{}, func(_ *appliance.Config, c *Config) {
		c.Limits = Limits{MaxLine: 1024, MaxData: 2048, MaxPayload: 4096}
	})
	big := strings.Repeat("x", 2000)
	for _, c := range []struct {
		name, raw, log string
	}{
		{"not JSON", "hello\n", "malformed event: header"},
		{"no type", `{"data":{}}` + "\n", "header has no type"},
		{"long line", `{"type":"transcript","data":{"text":"` + big + `"}}` + "\n", "header line longer than 1024 bytes"},
		{"long line without newline", strings.Repeat("y", 5000), "header line longer than 1024 bytes"},
		{"data too long", `{"type":"transcript","data_length":999999999}` + "\n", "data_length 999999999 exceeds the limit of 2048 bytes"},
		{"payload too long", `{"type":"audio-chunk","payload_length":5000}` + "\n", "payload_length 5000 exceeds the limit of 4096 bytes"},
		{"negative length", `{"type":"transcript","data_length":-5}` + "\n", "data_length -5 is negative"},
		{"fractional length", `{"type":"transcript","data_length":1.5}` + "\n", "data_length 1.5 is not a whole number"},
		{"data not an object", `{"type":"transcript","data_length":5}` + "\n[1,2]", "data block is not a JSON object"},
		{"header data not an object", `{"type":"transcript","data":"hi"}` + "\n", "data is not a JSON object"},
		{"text not a string", `{"type":"transcript","data":{"text":5}}` + "\n", "transcript data: json"},
		{"cut data block", `{"type":"transcript","data_length":50}` + "\n{\"text\":", "data block: unexpected EOF"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := dial(t, ts.addr)
			io.WriteString(cl.nc, c.raw)
			if strings.HasPrefix(c.name, "cut") {
				cl.nc.(*net.TCPConn).CloseWrite()
			}
			if !cl.closed(5 * time.Second) {
				t.Fatal("connection still open")
			}
			waitFor(t, "log line", func() bool { return strings.Contains(ts.logs.String(), c.log) })
			// The server goes on.
			d := dial(t, ts.addr)
			d.send("describe", nil)
			d.until("info")
		})
	}
	if typ, _ := peer(t, ts.addr, "describe"); typ != "info" {
		t.Fatalf("describe after the malformed events: %s", typ)
	}
	st := ts.core.Snapshot()
	t.Logf("counters after the malformed events: %v", st.Requests[appliance.SourceWyoming])
	if st.Refused < 11 {
		t.Errorf("%d refused, want the malformed events counted", st.Refused)
	}
	for _, line := range strings.Split(ts.logs.String(), "\n") {
		if strings.Contains(line, "closing the connection") {
			t.Log(line)
		}
	}
}

// Unknown events are ignored and the connection serves on; idle
// connections are closed, and when all MaxConns are open a new one takes
// the place of the one idle longest.
func TestConnectionLimits(t *testing.T) {
	ts := start(t, &appliancetest.Engine{}, func(_ *appliance.Config, c *Config) {
		c.MaxConns = 2
		c.IdleTimeout = 300 * time.Millisecond
	})
	a := dial(t, ts.addr)
	a.send("audio-chunk", map[string]any{"rate": 16000})
	a.send("describe", nil)
	if evs := a.until("info"); len(evs) != 1 {
		t.Errorf("events %v", evs)
	}
	b := dial(t, ts.addr)
	b.send("describe", nil)
	b.until("info")
	c := dial(t, ts.addr)
	c.send("describe", nil)
	c.until("info")
	if !a.closed(2 * time.Second) {
		t.Error("the connection idle longest stayed open when a third came past MaxConns 2")
	}
	if !b.closed(3*time.Second) || !c.closed(3*time.Second) {
		t.Error("idle connections stayed open past the idle timeout")
	}
	waitFor(t, "log lines", func() bool {
		l := ts.logs.String()
		return strings.Contains(l, "closed the one idle longest") && strings.Contains(l, "idle connection closed")
	})
	if typ, _ := peer(t, ts.addr, "describe"); typ != "info" {
		t.Error("describe after the limits")
	}
}

// dialFrom connects from a loopback address of its own (127.0.0.N), as a
// second client on the LAN would.
func dialFrom(t *testing.T, local, addr string) *client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &client{t: t, nc: nc, r: NewReader(nc, Limits{MaxData: 1 << 20})}
}

// The lock-out of issue 22 (item 5): 32 idle connections from one
// address kept everyone out for the 5-minute idle timeout. Now one
// address gets MaxPerClient, another client is served beside them, and a
// connection that sends nothing is closed after FirstTimeout.
func TestIdleConnectionsLockNobodyOut(t *testing.T) {
	ts := start(t, &appliancetest.Engine{}, func(_ *appliance.Config, c *Config) {
		c.FirstTimeout = 3 * time.Second
	})
	var idle []*client
	for range 32 {
		idle = append(idle, dial(t, ts.addr))
	}
	refused := 0
	for _, c := range idle {
		if c.closed(30 * time.Millisecond) {
			refused++
		}
	}
	if refused != 32-8 {
		t.Errorf("%d of 32 connections from one address refused, want %d (8 per client)", refused, 32-8)
	}
	start := time.Now()
	other := dialFrom(t, "127.0.0.2", ts.addr)
	other.send("describe", nil)
	if evs := other.until("info"); len(evs) != 1 {
		t.Errorf("another client beside 32 idle connections: %v", evs)
	}
	t.Logf("another client answered %v after 32 idle connections", time.Since(start).Round(time.Millisecond))
	if !idle[0].closed(5 * time.Second) {
		t.Error("a connection that sent nothing stayed open past FirstTimeout")
	}
}

// At shutdown the question being answered gets its answer; the server
// then returns.
func TestShutdownDeliversAnswer(t *testing.T) {
	eng := &appliancetest.Engine{Words: 20, Delay: 20 * time.Millisecond}
	ts := start(t, eng, nil)
	c := dial(t, ts.addr)
	idle := dial(t, ts.addr)
	idle.send("describe", nil)
	idle.until("info")
	c.send("transcript", map[string]any{"text": "hi"})
	if _, err := c.recv(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { ts.stop(); close(stopped) }()
	evs := c.until("handled-stop")
	if evs[len(evs)-2].Type != "handled" || !strings.HasSuffix(evs[len(evs)-2].Data["text"].(string), "w19.") {
		t.Errorf("events at shutdown: %v", evs)
	}
	<-stopped
	if !idle.closed(time.Second) {
		t.Error("idle connection open after shutdown")
	}
}

func TestSessionName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"01HS6SP2XD1E5HEHVDZE8R2WMR", "wyoming-01HS6SP2XD1E5HEHVDZE8R2WMR"},
		{"with space", "wyoming-h"},
		{strings.Repeat("a", 200), "wyoming-h"},
		{"a/b", "wyoming-h"},
	} {
		got := sessionName(c.in)
		if !strings.HasPrefix(got, c.want) || appliance.CheckID("session", got) != nil {
			t.Errorf("sessionName(%q) = %q", c.in, got)
		}
	}
	if sessionName("a/b") == sessionName("a+b") {
		t.Error("different ids share a session")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestThinkingNotSpoken: Wyoming asks go out with enable_thinking false,
// and a model that thinks all the same has only its content spoken.
func TestThinkingNotSpoken(t *testing.T) {
	eng := &appliancetest.Engine{Script: appliancetest.Thinker}
	ts := start(t, eng, nil)
	typ, data := peer(t, ts.addr, "ask", "what is it?")
	if typ != "handled" || data["text"] != appliancetest.ThinkerContent {
		t.Fatalf("ask: %s %v, want only %q", typ, data, appliancetest.ThinkerContent)
	}
	if r := eng.Requests(); len(r) != 1 || r[0].TemplateVars["enable_thinking"] != false {
		t.Errorf("asked with template variables %v, want enable_thinking false", r[0].TemplateVars)
	}
}

// Issue 33: 40 idle connections from 127.0.0.1 locked out a real client
// of the same address (Home Assistant on the box connects from there):
// past MaxPerClient a new connection now replaces one of that address
// idle longest, those that never sent an event first, so the real client
// gets in, and a client that already spoke keeps its connection through
// a flood of silent ones.
func TestSameAddressClientGetsIn(t *testing.T) {
	ts := start(t, &appliancetest.Engine{}, nil)
	early := dial(t, ts.addr) // a client that spoke before the flood
	early.send("describe", nil)
	early.until("info")
	var idle []*client
	for range 40 {
		idle = append(idle, dial(t, ts.addr))
	}
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	late := dial(t, ts.addr)
	late.send("describe", nil)
	if evs := late.until("info"); len(evs) != 1 {
		t.Errorf("a client of the same address after 40 idle connections: %v", evs)
	}
	late.send("transcript", map[string]any{"text": "hello"})
	if evs := late.until("handled"); len(evs) == 0 {
		t.Error("no answer for the client after the flood")
	}
	t.Logf("a client from 127.0.0.1 answered %v after 40 idle connections from there", time.Since(start).Round(time.Millisecond))
	early.send("describe", nil)
	if evs := early.until("info"); len(evs) != 1 {
		t.Errorf("the client that spoke before the flood: %v", evs)
	}
	open := 0
	for _, c := range idle {
		if !c.closed(20 * time.Millisecond) {
			open++
		}
	}
	if open > 8-2 {
		t.Errorf("%d silent connections still open beside 2 clients, want at most %d (8 per address)", open, 8-2)
	}
	waitFor(t, "the log line", func() bool {
		return strings.Contains(ts.logs.String(), "connections from 127.0.0.1 open; closed the one idle longest")
	})
	// Home Assistant's own client (the rhasspy wyoming package) gets in
	// too, while the flood's survivors stay open.
	if typ, _ := peer(t, ts.addr, "ask", "hello"); typ != "handled" {
		t.Errorf("the reference client after the flood: %s, want handled", typ)
	}
}

// TestStreamedWithReferenceClient: a client on the reference wyoming
// package (testdata/wyoming-stream.py over peer/wyoming) receives the
// streamed answer: handled-start with the conversation, the chunks while
// the answer is being generated (the first long before the last word),
// the whole text as handled for clients that do not stream, handled-stop.
func TestStreamedWithReferenceClient(t *testing.T) {
	pkg := zoo.Peer(t, "wyoming")
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: the reference Wyoming client needs it")
	}
	eng := &appliancetest.Engine{Words: 6, Delay: 80 * time.Millisecond}
	ts := start(t, eng, nil)
	out, err := exec.Command(py, "testdata/wyoming-stream.py", pkg, ts.addr, "Tell me a story").Output()
	if err != nil {
		t.Fatalf("wyoming-stream.py: %v\n%s", err, out)
	}
	type ev struct {
		Type    string
		T       float64
		Text    string
		Context map[string]any
	}
	var evs []ev
	var types []string
	var chunks strings.Builder
	var firstChunk, handledAt float64
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var e ev
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		evs = append(evs, e)
		types = append(types, e.Type)
		switch e.Type {
		case "handled-chunk":
			if chunks.Len() == 0 {
				firstChunk = e.T
			}
			chunks.WriteString(e.Text)
		case "handled":
			handledAt = e.T
		}
	}
	n := len(evs)
	if n < 4 || evs[0].Type != "handled-start" || evs[0].Context["conversation_id"] == nil || evs[n-2].Type != "handled" || evs[n-1].Type != "handled-stop" {
		t.Fatalf("events %v: want handled-start (with the conversation), handled-chunk…, handled, handled-stop", types)
	}
	if chunks.String() != " w0 w1 w2 w3 w4 w5." || evs[n-2].Text != "w0 w1 w2 w3 w4 w5." {
		t.Errorf("chunks %q, handled %q", chunks.String(), evs[n-2].Text)
	}
	// Six words 80 ms apart: the first chunk comes while the rest are
	// still being generated.
	if handledAt-firstChunk < 0.2 {
		t.Errorf("first chunk at %.3f s, handled at %.3f s: the answer was not streamed", firstChunk, handledAt)
	}
	t.Logf("events %v; first chunk %.3f s, handled %.3f s", types, firstChunk, handledAt)
}

// TestTranscriptNamesAModel: a transcript's context.model (or, without
// one, Config.AnswerModel) names the model the core answers with
// (appliance.Request.Model); a core that serves only its own refuses
// another, and a malformed name is not-handled before the core.
func TestTranscriptNamesAModel(t *testing.T) {
	eng := &appliancetest.Engine{Words: 2}
	ts := start(t, eng, func(cc *appliance.Config, wc *Config) { cc.Model = "first"; wc.AnswerModel = "first" })
	ask := func(ctx map[string]any) gotEvent {
		c := dial(t, ts.addr)
		c.send("transcript", map[string]any{"text": "hello", "context": ctx})
		evs := c.until("handled-stop")
		for _, e := range evs {
			if e.Type == "handled" || e.Type == "not-handled" {
				return e
			}
		}
		return evs[len(evs)-1]
	}
	if e := ask(nil); e.Type != "handled" {
		t.Errorf("AnswerModel first: %+v", e)
	}
	if e := ask(map[string]any{"model": "First:latest"}); e.Type != "handled" {
		t.Errorf("context.model First:latest: %+v", e)
	}
	if e := ask(map[string]any{"model": "other"}); e.Type != "not-handled" || !strings.Contains(fmt.Sprint(e.Data["text"]), `model "other"`) {
		t.Errorf("context.model other: %+v", e)
	}
	for _, bad := range []any{"", "two words", 7} {
		if e := ask(map[string]any{"model": bad}); e.Type != "not-handled" || !strings.Contains(fmt.Sprint(e.Data["text"]), "context.model") {
			t.Errorf("context.model %v: %+v", bad, e)
		}
	}
	if n := len(eng.Requests()); n != 2 {
		t.Errorf("%d requests reached the engine, want the 2 for the core's own model", n)
	}
}
