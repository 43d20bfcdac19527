package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/cmd/internal/daemon"
	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/mqtt/mqtttest"
	"github.com/geisten/geist/storage"
	bolt "go.etcd.io/bbolt"
)

// TestSessionsNeverCreate: the commands that only read fail with a clear
// message when there is no database, and create neither file nor folder.
func TestSessionsNeverCreate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	for _, args := range [][]string{{"list"}, {"show", "x"}, {"export", "x"}, {"delete", "x"}, {"check"}, {"salvage"}} {
		code, _, errs := geist(t, "", append([]string{"sessions", "--data-dir", dir}, args...)...)
		if code != 1 || !strings.Contains(errs, "no sessions database at") {
			t.Errorf("%v: exit %d, %q", args, code, errs)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the data directory was created: %v", err)
	}
}

// TestSessionsCheckSalvage damages a sessions.db (a branch page of the
// conversations, and the value of one turn): check says so with exit
// status 1, salvage keeps every intact conversation, and the reading
// commands show them.
func TestSessionsCheckSalvage(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sessions.db")
	db, err := storage.OpenSessions(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 250
	for i := range n {
		id := fmt.Sprintf("talk-%03d", i)
		if _, err := db.Create(storage.Conversation{ID: id}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Append(id, storage.Turn{Role: "user", Text: "question " + id}, storage.Turn{Role: "assistant", Text: "answer " + id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := geist(t, "", "sessions", "--data-dir", dir, "check"); code != 0 || !strings.Contains(out, "sound (250 conversations") {
		t.Fatalf("check of a sound file: exit %d, %q %q", code, out, errs)
	}
	// The page of the conversations bucket's root (a branch page), and the
	// text of one answer (turn records are stored as written).
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var root uint64
	_ = bdb.View(func(tx *bolt.Tx) error { root = uint64(tx.Bucket([]byte("conversations")).Root()); return nil })
	page := bdb.Info().PageSize
	bdb.Close()
	for i := range 16 {
		b[int(root)*page+16+i] ^= 0x5A
	}
	found := 0
	for at := 0; ; at++ {
		i := strings.Index(string(b[at:]), "answer talk-123")
		if i < 0 {
			break
		}
		at += i
		b[at-1] = 0xFF // the text's length (a uvarint: now unterminated)
		found++
	}
	if found == 0 {
		t.Fatal("answer not found in the file")
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	code, out, errs := geist(t, "", "sessions", "--data-dir", dir, "check")
	if code != 1 || !strings.Contains(out, "DAMAGED") || !strings.Contains(errs, "geist sessions salvage") {
		t.Fatalf("check of the damaged file: exit %d, %q %q", code, out, errs)
	}
	if code, _, errs := geist(t, "", "sessions", "--data-dir", dir, "list"); code != 1 || !strings.Contains(errs, "corrupt") {
		t.Errorf("list of the damaged file: exit %d, %q", code, errs)
	}
	code, out, errs = geist(t, "", "sessions", "--data-dir", dir, "salvage")
	if code != 0 || !strings.Contains(out, "copied the damaged file to") || !strings.Contains(out, "kept 250 conversations, 499 turns") {
		t.Fatalf("salvage: exit %d, %q %q", code, out, errs)
	}
	t.Logf("salvage said:\n%s", out)
	if code, out, errs := geist(t, "", "sessions", "--data-dir", dir, "check"); code != 0 {
		t.Fatalf("check after salvage: exit %d, %q %q", code, out, errs)
	}
	code, out, _ = geist(t, "", "sessions", "--data-dir", dir, "list")
	if code != 0 || strings.Count(out, "talk-") != n {
		t.Errorf("list after salvage: exit %d, %d conversations", code, strings.Count(out, "talk-"))
	}
	for i := range n {
		id := fmt.Sprintf("talk-%03d", i)
		code, out, errs := geist(t, "", "sessions", "--data-dir", dir, "show", id)
		if code != 0 || !strings.Contains(out, "question "+id) || (i != 123) != strings.Contains(out, "answer "+id) {
			t.Errorf("show %s: exit %d, %q %q", id, code, out, errs)
		}
	}
	aside, _ := filepath.Glob(path + ".damaged-*")
	if len(aside) != 1 {
		t.Errorf("copies aside: %v", aside)
	}
}

// TestSessionsWhileServing: while geist serve holds sessions.db, the
// sessions commands reach its conversations through the daemon's control
// socket (mode 0600); once it stopped, they read the file again.
func TestSessionsWhileServing(t *testing.T) {
	model := zoo.Path(t, "models", serveModel)
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/ctl/answer/#")
	dir := t.TempDir()
	stop, logs := runServe(t, "-m", model, "--broker", b.URL, "--device", "ctl", "--data-dir", dir, "--temp", "0", "--max-tokens", "12")
	waitForLog(t, logs, 20*time.Second, "the broker connection", func() bool { return strings.Contains(logs.String(), "mqtt connected") })
	for _, id := range []string{"a1", "a2"} {
		c.Publish(t, "geist/ctl/ask", []byte(fmt.Sprintf(`{"id":%q,"text":"Once upon a time","session":"kitchen"}`, id)))
		if r := waitReply(t, c, "geist/ctl/answer/"+id, 20*time.Second); r.code() != "answer" {
			t.Fatalf("%s: %+v", id, r)
		}
	}
	sock := filepath.Join(dir, "geist.sock")
	if st, err := os.Stat(sock); err != nil || st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
		t.Fatalf("control socket: %v %v", st, err)
	}
	code, out, errs := geist(t, "", "sessions", "--data-dir", dir, "list")
	if code != 0 || !regexp.MustCompile(`(?m)^kitchen\s+4\s`).MatchString(out) {
		t.Fatalf("list while serving: exit %d, %q %q", code, out, errs)
	}
	t.Logf("geist sessions list (geist serve running):\n%s", out)
	code, out, _ = geist(t, "", "sessions", "--data-dir", dir, "show", "kitchen")
	if code != 0 || !strings.HasPrefix(out, "session kitchen (4 turns, model "+serveModel+")") || strings.Count(out, "[user]\nOnce upon a time") != 2 {
		t.Errorf("show while serving: %q", out)
	}
	code, js, _ := geist(t, "", "sessions", "--data-dir", dir, "show", "--json", "kitchen")
	_, exp, _ := geist(t, "", "sessions", "--data-dir", dir, "export", "kitchen")
	var doc daemon.SessionDoc
	if code != 0 || js != exp || json.Unmarshal([]byte(js), &doc) != nil || doc.ID != "kitchen" || len(doc.Turns) != 4 {
		t.Errorf("show --json %q, export %q", js, exp)
	}
	if code, _, errs := geist(t, "", "sessions", "--data-dir", dir, "show", "nosuch"); code != 1 || !strings.Contains(errs, "not found") {
		t.Errorf("show of a missing conversation: %d %q", code, errs)
	}
	code, out, _ = geist(t, "", "sessions", "--data-dir", dir, "list", "--json")
	var rows []struct {
		ID    string `json:"id"`
		Turns int    `json:"turns"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].ID != "kitchen" || rows[0].Turns != 4 {
		t.Errorf("list --json while serving: %q", out)
	}
	if code, _, errs := geist(t, "", "sessions", "--data-dir", dir, "delete", "kitchen"); code != 0 {
		t.Errorf("delete while serving: %q", errs)
	}
	c.Publish(t, "geist/ctl/ask", []byte(`{"id":"a3","text":"Once upon a time","session":"porch"}`))
	waitReply(t, c, "geist/ctl/answer/a3", 20*time.Second)
	if code := stop(); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("the socket outlived the daemon: %v", err)
	}
	// Without the daemon: the file, read-only.
	code, out, _ = geist(t, "", "sessions", "--data-dir", dir, "list")
	if code != 0 || !strings.Contains(out, "porch") || strings.Contains(out, "kitchen") {
		t.Errorf("list after serve stopped: %q", out)
	}
	// A socket left by a daemon that died is not mistaken for one.
	os.WriteFile(sock, nil, 0o600)
	if code, out, _ := geist(t, "", "sessions", "--data-dir", dir, "list"); code != 0 || !strings.Contains(out, "porch") {
		t.Errorf("list with a stale socket file: %q", out)
	}
}

// TestOneConversationPath: run --session, serve (an MQTT ask) and chat
// --session continue one conversation in turn: each renders what the
// others stored, its system message included, and stores the exchange
// the same way (the content, the answer's token ids).
func TestOneConversationPath(t *testing.T) {
	model := zoo.Path(t, "models", serveModel)
	dir := t.TempDir()
	run := func(q string, extra ...string) int {
		t.Helper()
		args := append([]string{"run", "-m", model, "--data-dir", dir, "--session", "alt", "-n", "6", "--temp", "0", "--stats"}, extra...)
		code, _, errs := geist(t, "", append(args, q)...)
		lines := strings.Split(strings.TrimSpace(errs), "\n")
		var st struct {
			PromptTokens int `json:"prompt_tokens"`
		}
		if code != 0 || json.Unmarshal([]byte(lines[len(lines)-1]), &st) != nil {
			t.Fatalf("run %q: exit %d, %s", q, code, errs)
		}
		return st.PromptTokens
	}
	p1 := run("Once upon a time", "--system", "Tell stories.")
	code, _, errs := geist(t, "And then?\n", "chat", "-m", model, "--temp", "0", "-n", "6", "--data-dir", dir, "--session", "alt", "--verbose")
	m := promptTokens.FindStringSubmatch(errs)
	if code != 0 || m == nil {
		t.Fatalf("chat: exit %d, %s", code, errs)
	}
	var p2 int
	fmt.Sscan(m[1], &p2)
	p3 := run("The end.")
	b := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/alt/answer/#")
	stop, logs := runServe(t, "-m", model, "--broker", b.URL, "--device", "alt", "--data-dir", dir, "--temp", "0", "--max-tokens", "6")
	waitForLog(t, logs, 20*time.Second, "the broker connection", func() bool { return strings.Contains(logs.String(), "mqtt connected") })
	c.Publish(t, "geist/alt/ask", []byte(`{"id":"s1","text":"Once more.","session":"alt"}`))
	r := waitReply(t, c, "geist/alt/answer/s1", 20*time.Second)
	stop()
	if r.code() != "answer" {
		t.Fatalf("serve: %+v", r)
	}
	p4 := r.Usage.PromptTokens
	p5 := run("Goodbye.")
	if !(p1 < p2 && p2 < p3 && p3 < p4 && p4 < p5) {
		t.Errorf("prompt tokens %d (run), %d (chat), %d (run), %d (serve), %d (run): each turn should render the history before it", p1, p2, p3, p4, p5)
	}
	_, out, _ := geist(t, "", "sessions", "--data-dir", dir, "export", "alt")
	var doc daemon.SessionDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.System != "Tell stories." || len(doc.Turns) != 10 {
		t.Fatalf("export: %v %s", err, out)
	}
	for i, want := range []string{"Once upon a time", "", "And then?", "", "The end.", "", "Once more.", "", "Goodbye.", ""} {
		turn := doc.Turns[i]
		if want != "" && (turn.Role != "user" || turn.Text != want) || want == "" && (turn.Role != "assistant" || len(turn.Tokens) == 0) {
			t.Errorf("turn %d: %+v", i, turn)
		}
	}
}

// TestRunSessionThinking: run --session keeps an answer that thought
// first (a grammar makes tiny-qwen3 open with a <think> block) as its
// content with that content's token ids, and the next run restores the
// first prompt from the prompt cache (the engine stores the prompt too
// when the answer thought: the history renders the answer without its
// block, so the conversation parts there).
func TestRunSessionThinking(t *testing.T) {
	model := zoo.Path(t, "models", "tiny-qwen3-Q4_0.gguf")
	dir := t.TempDir()
	gbnf := filepath.Join(dir, "think.gbnf")
	if err := os.WriteFile(gbnf, []byte(`root ::= "<think>" [a-z]{1,8} "</think>" "\n\n" [a-z]{1,8}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	type stats struct {
		PromptTokens   int `json:"prompt_tokens"`
		RestoredTokens int `json:"restored_tokens"`
	}
	run := func(q string, extra ...string) (string, stats) {
		t.Helper()
		args := append([]string{"run", "-m", model, "--data-dir", dir, "--session", "th", "-n", "40", "--temp", "0", "--grammar", gbnf, "--stats"}, extra...)
		code, out, errs := geist(t, "", append(args, q)...)
		lines := strings.Split(strings.TrimSpace(errs), "\n")
		var st stats
		if code != 0 || json.Unmarshal([]byte(lines[len(lines)-1]), &st) != nil {
			t.Fatalf("run %q: exit %d, %s", q, code, errs)
		}
		return out, st
	}
	out, first := run("Hi", "--system", "Be brief.") // its own snapshot comes first: the prompt's must not be lost
	_, content, ok := strings.Cut(strings.TrimSpace(out), "</think>\n\n")
	if !strings.HasPrefix(out, "<think>") || !ok || content == "" {
		t.Fatalf("the grammar did not make the model think first: %q", out)
	}
	_, exported, _ := geist(t, "", "sessions", "--data-dir", dir, "export", "th")
	var doc daemon.SessionDoc
	if err := json.Unmarshal([]byte(exported), &doc); err != nil || doc.System != "Be brief." || len(doc.Turns) != 2 {
		t.Fatalf("export: %v %s", err, exported)
	}
	tok, f, err := engine.LoadVocab(model)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	a := doc.Turns[1]
	if a.Text != content || len(a.Tokens) == 0 || tok.Detokenize(a.Tokens, false, false) != content {
		t.Errorf("stored answer %q with tokens %v (%q), want %q with its token ids", a.Text, a.Tokens, tok.Detokenize(a.Tokens, false, false), content)
	}
	if _, second := run("And?"); second.RestoredTokens < first.PromptTokens-1 {
		t.Errorf("the second turn restored %d tokens, want the first prompt's %d but its last", second.RestoredTokens, first.PromptTokens)
	}
}
