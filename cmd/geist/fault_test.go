package main

// The fault and abuse suite of issue 15: every attack and fault of the
// issue replayed against geist serve (real Mosquitto, stories260K), each
// asserting its bound. The hostile chat template is
// TestHostileTemplateRefusedAtLoad (template_limits_test.go). Natively
// only: they start processes, measure memory and mount file systems.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/geisten/geist/cmd/internal/daemon"
	"github.com/geisten/geist/cmd/internal/daemon/daemontest"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/chat"
	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/mqtt/hermes"
	"github.com/geisten/geist/mqtt/mqtttest"
	"github.com/geisten/geist/storage"
)

func skipFaults(t *testing.T) {
	t.Helper()
	if testing.Short() || daemontest.Emulated() {
		t.Skip("fault suite: starts geist processes and measures them; natively only")
	}
}

// geistProc is `geist args...` running in a child process (this test
// binary as TestHelperGeist).
type geistProc struct {
	cmd  *exec.Cmd
	logs *daemontest.SyncBuffer
	done chan struct{}
	code int
}

func startGeist(t *testing.T, env []string, args ...string) *geistProc {
	t.Helper()
	p := &geistProc{logs: &daemontest.SyncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], "-test.run=^TestHelperGeist$")
	p.cmd.Env = append(os.Environ(), "GEIST_HELPER_ARGS="+strings.Join(args, "\n"), "GEIST_HELPER_RSS="+filepath.Join(t.TempDir(), "rss"))
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			p.code = ee.ExitCode()
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("geist log:\n%s", p.logs.String())
		}
	})
	return p
}

// status reads a field of /proc/<pid>/status in bytes (VmRSS, VmHWM).
func (p *geistProc) status(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc status", field)
	return 0
}

// wait waits for the process to exit and returns its status.
func (p *geistProc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(d):
		t.Fatalf("geist did not exit within %v", d)
	}
	return -1
}

func (p *geistProc) waitLog(t *testing.T, d time.Duration, what string) {
	t.Helper()
	waitFor(t, d, "log "+what, func() bool { return strings.Contains(p.logs.String(), what) })
}

// faultConfig writes a serve configuration for device dev on broker with
// stories260K, greedy and short answers, in a data directory of its own
// (returned with the file).
func faultConfig(t *testing.T, broker, dev, extra string) (path, dataDir string) {
	t.Helper()
	dir := t.TempDir()
	dataDir = filepath.Join(dir, "data")
	path = filepath.Join(dir, "geist.toml")
	cfg := fmt.Sprintf(`model = %q
device = %q
data_dir = %q
threads = 1
ctx = 256
cache_size = 0
[mqtt]
broker = %q
discovery = true
pool = false
[limits]
max_tokens = 8
shutdown_grace_s = 5
[generation]
temperature = 0
`, zoo.Path(t, "models", serveModel), dev, dataDir, broker)
	if err := os.WriteFile(path, []byte(cfg+extra), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, dataDir
}

// ask publishes a JSON ask and returns its reply (answer or error).
func ask(t *testing.T, c *mqtttest.Client, dev, id, extra string) reply {
	t.Helper()
	c.Publish(t, "geist/"+dev+"/ask", []byte(fmt.Sprintf(`{"id":%q,"text":"Once upon a time"%s}`, id, extra)))
	return waitReply(t, c, "geist/"+dev+"/answer/"+id, 20*time.Second)
}

// TestFaultOversizedPayloads: a 100 MiB ask, a 10 MiB cancel and a 10 MB
// Hermes transcript (the review: 400 MB RSS, 1.5 GB and 12 s of CPU) are
// refused while the process's peak resident set grows by less than
// 16 MiB; the ask's refusal reaches the id its first bytes name; geist
// answers on.
func TestFaultOversizedPayloads(t *testing.T) {
	skipFaults(t)
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/big/#", hermes.TopicSay)
	cfg, _ := faultConfig(t, b.URL, "big", "[hermes]\nmode = \"asr\"\n")
	p := startGeist(t, nil, "serve", "--config", cfg)
	p.waitLog(t, 20*time.Second, "mqtt connected")
	if r := ask(t, c, "big", "warm", ""); r.code() != "answer" {
		t.Fatalf("first ask: %+v", r)
	}
	// Hermes answers too (and has connected).
	hc := mqtttest.NewClient(t, b.URL)
	hc.Publish(t, hermes.TopicTextCaptured, []byte(`{"text":"Once upon a time","siteId":"default"}`))
	if _, ok := c.Wait(20*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, hermes.TopicSay)) > 0 }); !ok {
		t.Fatal("the Hermes bridge did not answer")
	}
	time.Sleep(200 * time.Millisecond)
	hwm0, rss0 := p.status(t, "VmHWM"), p.status(t, "VmRSS")
	start := time.Now()
	mqtttest.PublishLarge(t, b.URL, "geist/big/ask", false, []byte(`{"id":"huge","text":"`), 100<<20)
	mqtttest.PublishLarge(t, b.URL, "geist/big/cancel", false, []byte(`{"id":"huge","`), 10<<20)
	mqtttest.PublishLarge(t, b.URL, hermes.TopicTextCaptured, false, []byte(`{"siteId":"default","text":"`), 10_000_000)
	r := waitReply(t, c, "geist/big/answer/huge", 20*time.Second)
	cancelled := waitReply(t, c, "geist/big/error", 20*time.Second)
	p.waitLog(t, 20*time.Second, "message dropped: payload too large")
	took := time.Since(start)
	if cancelled.code() != "too_long" || !strings.Contains(cancelled.Error.Message, "cancel: payload of 10485760 bytes") {
		t.Errorf("10 MiB cancel: %+v", cancelled.Error)
	}
	if r.code() != "too_long" || !strings.Contains(r.Error.Message, "104857600 bytes") {
		t.Errorf("100 MiB ask: %+v", r.Error)
	}
	if r := ask(t, c, "big", "after", ""); r.code() != "answer" {
		t.Errorf("ask after the floods: %+v", r)
	}
	hwm1, rss1 := p.status(t, "VmHWM"), p.status(t, "VmRSS")
	t.Logf("100 MiB ask + 10 MiB cancel + 10 MB Hermes transcript refused in %v: peak RSS %.1f -> %.1f MiB (+%.2f), RSS %.1f -> %.1f MiB",
		took.Round(time.Millisecond), mib(hwm0), mib(hwm1), mib(hwm1-hwm0), mib(rss0), mib(rss1))
	if hwm1-hwm0 >= 16<<20 {
		t.Errorf("peak RSS grew by %.1f MiB, want under 16", mib(hwm1-hwm0))
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// TestFaultRetainedAndReplyTo: an ask retained on the broker is not run
// by geist, neither at start nor after a restart; a reply_to outside
// geist/<dev>/reply/ is refused and nothing is published there.
func TestFaultRetainedAndReplyTo(t *testing.T) {
	skipFaults(t)
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "#")
	if tok := c.Paho().Publish("geist/ret/ask", 1, true, `{"id":"old","text":"Once upon a time"}`); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	cfg, _ := faultConfig(t, b.URL, "ret", "")
	for round := range 2 { // a start and a restart
		stop, logs := runServe(t, "--config", cfg)
		waitFor(t, 20*time.Second, "connected", func() bool { return strings.Contains(logs.String(), "mqtt connected") })
		waitFor(t, 5*time.Second, "the retained ask's warning", func() bool { return strings.Contains(logs.String(), "retained message on a command topic ignored") })
		if round == 1 {
			r := ask(t, c, "ret", "hijack", `,"reply_to":"homeassistant/device/x/config"`)
			if r.code() != "bad_request" || !strings.Contains(r.Error.Message, "geist/ret/reply/") {
				t.Errorf("reply_to outside the prefix: %+v", r)
			}
			c.Publish(t, "geist/ret/ask", []byte(`{"id":"fine","text":"Once upon a time","reply_to":"geist/ret/reply/kitchen"}`))
			if r := waitReply(t, c, "geist/ret/reply/kitchen", 20*time.Second); r.code() != "answer" {
				t.Errorf("reply_to inside the prefix: %+v", r)
			}
			// Clearing the retained ask as the warning says is no error.
			if tok := c.Paho().Publish("geist/ret/ask", 1, true, ""); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
				t.Fatal(tok.Error())
			}
			time.Sleep(300 * time.Millisecond)
			if strings.Contains(logs.String(), "level=ERROR") || len(mqtttest.On(c.Messages(), "geist/ret/error")) != 0 {
				t.Errorf("clearing the retained ask logged or answered an error:\n%s", logs.String())
			}
		}
		if n := strings.Count(logs.String(), "retained message on a command topic ignored"); n != 1 || !strings.Contains(logs.String(), "mosquitto_pub -r -n -t geist/ret/ask") {
			t.Errorf("round %d: the retained-ask warning %d times, want once naming the topic:\n%s", round, n, logs.String())
		}
		if code := stop(); code != 0 {
			t.Fatalf("exit %d", code)
		}
		if n := len(mqtttest.On(c.Messages(), "geist/ret/answer/old")); n != 0 {
			t.Fatalf("round %d: the retained ask was answered", round)
		}
	}
	if n := len(mqtttest.On(c.Messages(), "homeassistant/device/x/config")); n != 0 {
		t.Errorf("%d publications on the reply_to outside the prefix", n)
	}
	t.Log("retained ask: not run at start nor after a restart; reply_to outside geist/ret/reply/ refused (bad_request), nothing published there")
}

// TestFaultBirthFlood: 5000 "online" birth messages from Home Assistant
// (the review: 5000 discovery and 5000 state publications, 28.5 MB)
// cause at most a handful of republications.
func TestFaultBirthFlood(t *testing.T) {
	skipFaults(t)
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "homeassistant/device/#", "geist/flood/state")
	cfg, _ := faultConfig(t, b.URL, "flood", "")
	stop, logs := runServe(t, "--config", cfg)
	waitFor(t, 20*time.Second, "connected", func() bool { return strings.Contains(logs.String(), "mqtt connected") })
	time.Sleep(300 * time.Millisecond)
	c.Reset()
	const n = 5000
	c.Flood(t, "homeassistant/status", []byte("online"), n)
	// The republication comes after a random delay of up to 3 s; any
	// further one would follow within a second of it.
	waitFor(t, 5*time.Second, "a republication", func() bool {
		return len(mqtttest.On(c.Messages(), "homeassistant/device/geist_flood/config")) > 0
	})
	time.Sleep(time.Second)
	msgs := c.Messages()
	disc, state := len(mqtttest.On(msgs, "homeassistant/device/geist_flood/config")), len(mqtttest.On(msgs, "geist/flood/state"))
	bytes := 0
	for _, m := range msgs {
		bytes += len(m.Payload)
	}
	t.Logf("%d birth messages: %d discovery and %d state publications (%d bytes)", n, disc, state, bytes)
	if disc > 2 || state > 4 {
		t.Errorf("%d discovery and %d state publications, want a handful", disc, state)
	}
	stop()
}

// TestFaultSessionsBounded: 2000 conversations (the review: 2005 kept,
// 16 MiB) stay within [sessions] max_bytes, the file within twice that
// (bbolt doubles a small file as it grows); the oldest go.
func TestFaultSessionsBounded(t *testing.T) {
	skipFaults(t)
	dir := t.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() { // fsyncs cost nothing there
		if dir, err = os.MkdirTemp("/dev/shm", "geist-fault-"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	const budget = 1 << 20
	store := daemon.OpenStorage(dir, daemon.StorageOptions{MaxHistory: 20, Logger: testLog(),
		SessionLimits: daemon.SessionsSection{MaxBytes: budget}.Limits()})
	defer store.Close()
	temp := 0.0
	core, err := appliance.New(appliance.Config{Engine: loadStories(t, 256), Sessions: store.Sessions, Logger: testLog(),
		Defaults: appliance.Options{Temperature: &temp}, Limits: appliance.Limits{MaxTokens: 2}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go core.Run(ctx)
	start := time.Now()
	for i := range 2000 {
		tk, err := core.Submit(context.Background(), appliance.Request{Text: "Once upon a time there was a little girl named Lily.", Session: fmt.Sprintf("s%04d", i)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if o := tk.Outcome(); o.Err != nil || o.Warning != nil {
			t.Fatalf("%d: %+v", i, o)
		}
	}
	db := store.DB()
	conversations, used := db.Usage()
	st, _ := os.Stat(filepath.Join(dir, "sessions.db"))
	t.Logf("2000 conversations in %v: %d kept, %d bytes accounted (max_bytes %d), file %d bytes", time.Since(start).Round(time.Millisecond), conversations, used, budget, st.Size())
	if used > budget || conversations >= 2000 || st.Size() > 2*budget {
		t.Errorf("%d conversations, %d bytes accounted, file %d bytes: over the budget of %d", conversations, used, st.Size(), budget)
	}
	if list, _ := store.Sessions.List(); len(list) == 0 || list[0].ID != "s1999" {
		t.Errorf("the newest conversation is not kept")
	}
}

// TestFaultCorruptSessions: a damaged sessions.db is salvaged when geist
// serve starts (copied aside, every readable conversation kept), and
// every intact conversation is readable with the CLI afterwards.
func TestFaultCorruptSessions(t *testing.T) {
	skipFaults(t)
	b := mqtttest.StartMosquitto(t)
	cfg, dataDir := faultConfig(t, b.URL, "salv", "")
	path := filepath.Join(dataDir, "sessions.db")
	db, err := storage.OpenSessions(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		id := fmt.Sprintf("c%03d", i)
		db.Create(storage.Conversation{ID: id})
		db.Append(id, storage.Turn{Role: "user", Text: fmt.Sprintf("question %d %s", i, strings.Repeat("words ", 30))},
			storage.Turn{Role: "assistant", Text: fmt.Sprintf("answer %d", i)})
	}
	db.Close()
	damaged := garblePage(t, path)
	stop, logs := runServe(t, "--config", cfg)
	waitFor(t, 20*time.Second, "connected", func() bool { return strings.Contains(logs.String(), "mqtt connected") })
	if !strings.Contains(logs.String(), "sessions database salvaged") {
		t.Fatalf("no salvage at start; log:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), `part=storage`) {
		t.Errorf("storage reported degraded after a salvage")
	}
	stop()
	code, out, errs := geist(t, "", "sessions", "--data-dir", dataDir, "list", "--json")
	if code != 0 {
		t.Fatalf("sessions list: %d %s", code, errs)
	}
	var rows []daemon.SessionRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	whole := 0
	for _, r := range rows {
		if r.Turns != 2 {
			continue
		}
		code, out, errs := geist(t, "", "sessions", "--data-dir", dataDir, "show", r.ID)
		n, _ := strconv.Atoi(strings.TrimPrefix(r.ID, "c"))
		if code != 0 || !strings.Contains(out, fmt.Sprintf("question %d ", n)) || !strings.Contains(out, fmt.Sprintf("answer %d", n)) {
			t.Errorf("sessions show %s: %d %q %s", r.ID, code, out, errs)
		}
		whole++
	}
	if code, _, errs := geist(t, "", "sessions", "--data-dir", dataDir, "check"); code != 0 {
		t.Errorf("sessions check after the salvage: %s", errs)
	}
	aside, _ := filepath.Glob(path + ".damaged-*")
	t.Logf("sessions.db with page %d garbled: salvaged at start, %d of 300 conversations kept, %d whole and each readable with geist sessions show; damaged copy kept (%d)", damaged, len(rows), whole, len(aside))
	if whole < 290 || len(aside) != 1 {
		t.Errorf("%d whole conversations, %d copies aside", whole, len(aside))
	}
}

// garblePage overwrites the first page of the second half of the file's
// data that makes the file damaged, and returns its number.
func garblePage(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	for i := len(b) / page / 2; i > 2; i-- {
		orig := append([]byte(nil), b[i*page:(i+1)*page]...)
		copy(b[i*page:], bytes.Repeat([]byte{0xA5}, page))
		os.WriteFile(path, b, 0o600)
		if err := storage.CheckSessions(path); err != nil {
			return i
		}
		copy(b[i*page:], orig)
	}
	t.Fatal("no page whose damage shows")
	return 0
}

// TestFaultDeleteDropsCache: deleting a conversation (geist sessions
// delete while geist serve runs) deletes its prompts from cache.db too;
// the system prompt's entry, shared with every conversation, stays.
func TestFaultDeleteDropsCache(t *testing.T) {
	skipFaults(t)
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/del/#")
	cfg, dataDir := faultConfig(t, b.URL, "del", "")
	const system = "You are a storyteller. Tell short stories about Lily, Ben, their dog and the big red ball in the park."
	const question = "Once upon a time there was a little girl named Lily who loved to play outside."
	stop, logs := runServe(t, "--config", cfg, "--cache-size", "67108864", "--system", system)
	waitFor(t, 20*time.Second, "connected", func() bool { return strings.Contains(logs.String(), "mqtt connected") })
	for i, q := range []string{question, "What did Lily and Ben do with the ball after that?"} {
		c.Publish(t, "geist/del/ask", []byte(fmt.Sprintf(`{"id":"d%d","text":%q,"session":"kitchen"}`, i, q)))
		if r := waitReply(t, c, fmt.Sprintf("geist/del/answer/d%d", i), 20*time.Second); r.code() != "answer" {
			t.Fatalf("ask %d: %+v", i, r)
		}
	}
	time.Sleep(time.Second) // the engine writes snapshots in the background (200 ms was too short at a load of 7)
	if code, _, errs := geist(t, "", "sessions", "--data-dir", dataDir, "delete", "kitchen"); code != 0 {
		t.Fatalf("sessions delete: %s", errs)
	}
	waitFor(t, 5*time.Second, "the cache entries dropped", func() bool {
		return strings.Contains(logs.String(), "prompt-cache entries of the conversation dropped")
	})
	stop()
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "prompt-cache entries of the conversation dropped") {
			line = l
		}
	}
	eng := loadStories(t, 256)
	prefix, err := eng.ConversationPrefix([]chat.Message{{Role: "system", Content: system}, {Role: "user", Content: question}})
	if err != nil {
		t.Fatal(err)
	}
	sys, _ := eng.ConversationPrefix([]chat.Message{{Role: "system", Content: system}})
	cache, err := storage.OpenCache(filepath.Join(dataDir, "cache.db"), &storage.CacheOptions{MaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	n, _, ok := cache.Lookup(eng.ModelID(), append(prefix, 1, 2, 3))
	t.Logf("deleted conversation: %s; longest cached prefix of its first prompt now %d tokens (its own prefix %d, the system prompt %d)", strings.TrimSpace(line[strings.Index(line, "msg="):]), n, len(prefix), len(sys))
	if !strings.Contains(line, "entries=") || strings.Contains(line, "entries=0 ") {
		t.Errorf("no entry dropped: %s", line)
	}
	if ok && n > len(sys)+1 {
		t.Errorf("a prefix of %d tokens of the deleted conversation is still cached", n)
	}
}

// TestFaultDiskFull: with the data directory on a full file system, an
// answer is still delivered, with the warning not_saved; the state says
// storage degraded until a save works again. Needs root (a tmpfs).
func TestFaultDiskFull(t *testing.T) {
	skipFaults(t)
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root; engine/appliance TestSaveFails and storage TestDiskFull cover the paths without it")
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	os.MkdirAll(dataDir, 0o700)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dataDir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() { exec.Command("umount", dataDir).Run() })
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/full/#")
	cfg, _ := faultConfig(t, b.URL, "full", "")
	stop, logs := runServe(t, "--config", cfg, "--data-dir", dataDir)
	waitFor(t, 20*time.Second, "connected", func() bool { return strings.Contains(logs.String(), "mqtt connected") })
	if r := ask(t, c, "full", "before", `,"session":"kitchen"`); r.code() != "answer" {
		t.Fatalf("before the disk is full: %+v", r)
	}
	// Fill the file system. sessions.db still has free pages inside: new
	// conversations use them up, then a save needs space there is not.
	filler := filepath.Join(dataDir, "filler")
	f, _ := os.Create(filler)
	f.Write(make([]byte, 2<<20)) // fails at the end of the space: that is the point
	f.Close()
	var a struct {
		Text    string `json:"text"`
		Warning struct{ Code, Message string }
	}
	saved := 0
	for i := 0; a.Warning.Code == ""; i++ {
		if i == 200 {
			t.Fatalf("200 conversations saved on a full disk")
		}
		id := fmt.Sprintf("full%d", i)
		c.Publish(t, "geist/full/ask", []byte(fmt.Sprintf(`{"id":%q,"text":"Once upon a time","session":"s%d"}`, id, i)))
		msgs, ok := c.Wait(20*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, "geist/full/answer/"+id)) > 0 })
		if !ok {
			t.Fatalf("no answer with the disk full (ask %d)", i)
		}
		json.Unmarshal(mqtttest.On(msgs, "geist/full/answer/"+id)[0].Payload, &a)
		if a.Text == "" {
			t.Fatalf("ask %d: no answer: %s", i, mqtttest.On(msgs, "geist/full/answer/"+id)[0].Payload)
		}
		saved = i
	}
	if a.Warning.Code != "not_saved" || strings.Contains(a.Warning.Message, "/") {
		t.Errorf("answer with the disk full: %+v", a)
	}
	waitFor(t, 5*time.Second, "degraded state", func() bool {
		for _, m := range mqtttest.On(c.Messages(), "geist/full/state") {
			if bytes.Contains(m.Payload, []byte(`"degraded":{"storage":"the last session save failed: the device's disk is full"}`)) {
				return true
			}
		}
		return false
	})
	t.Logf("disk full (1 MiB tmpfs): %d more conversations saved in sessions.db's free pages, then answer %q delivered with warning %q; state degraded", saved, a.Text, a.Warning.Message)
	// Space again: the next save works and the degradation ends.
	os.Remove(filler)
	c.Reset()
	if r := ask(t, c, "full", "after", `,"session":"kitchen"`); r.code() != "answer" {
		t.Errorf("after freeing space: %+v", r)
	}
	waitFor(t, 5*time.Second, "state without degraded", func() bool {
		st := mqtttest.On(c.Messages(), "geist/full/state")
		return len(st) > 0 && !bytes.Contains(st[len(st)-1].Payload, []byte("degraded"))
	})
	stop()
}

// TestFaultSignals: the first SIGTERM drains (the running answer is
// finished and published, exit 0); a second one during the drain exits
// at once with 143 and says so; SIGHUP re-reads the configuration.
func TestFaultSignals(t *testing.T) {
	skipFaults(t)
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/sig/#")
	cfg, _ := faultConfig(t, b.URL, "sig", "")

	// SIGHUP, then one SIGTERM with an answer in flight: it is delivered.
	slow := []string{"GEIST_HELPER_SERVE_DELAY=10ms"} // 10 ms a piece: answers take seconds
	p := startGeist(t, slow, "serve", "--config", cfg, "--max-tokens", "100", "--ctx", "512")
	p.waitLog(t, 20*time.Second, "mqtt connected")
	p.cmd.Process.Signal(syscall.SIGHUP)
	p.waitLog(t, 5*time.Second, "SIGHUP: configuration re-read; nothing else changed")
	c.Publish(t, "geist/sig/ask", []byte(`{"id":"drain","text":"Once upon a time","max_tokens":100,"stream":true}`))
	waitReply(t, c, "geist/sig/answer/drain/stream", 20*time.Second)
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t, 20*time.Second); code != 0 {
		t.Errorf("one SIGTERM: exit %d", code)
	}
	if r := waitReply(t, c, "geist/sig/answer/drain", 5*time.Second); r.code() != "answer" {
		t.Errorf("the answer in flight at SIGTERM: %+v", r)
	}
	// Two: the second ends the drain at once.
	p = startGeist(t, []string{"GEIST_HELPER_SERVE_DELAY=1s"}, "serve", "--config", cfg, "--shutdown-grace", "60", "--max-tokens", "100")
	p.waitLog(t, 20*time.Second, "mqtt connected")
	c.Publish(t, "geist/sig/ask", []byte(`{"id":"endless","text":"Once upon a time","max_tokens":100,"stream":true}`))
	waitReply(t, c, "geist/sig/answer/endless/stream", 20*time.Second)
	start := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.waitLog(t, 5*time.Second, "shutting down")
	p.cmd.Process.Signal(syscall.SIGTERM)
	code := p.wait(t, 10*time.Second)
	t.Logf("second SIGTERM: exit %d after %v: %s", code, time.Since(start).Round(time.Millisecond), lastLine(p.logs.String()))
	if code != 143 || !strings.Contains(p.logs.String(), "SIGTERM again while shutting down: exiting now") {
		t.Errorf("second SIGTERM: exit %d", code)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
