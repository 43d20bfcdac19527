package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/cmd/internal/daemon"
	"github.com/geisten/geist/cmd/internal/daemon/daemontest"
	"github.com/geisten/geist/cmd/internal/wyoming"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/mqtt/mqtttest"
)

// wyomingAsk sends one transcript with context ctx to the Wyoming
// service at addr and returns the final event: handled or not-handled,
// and its text.
func wyomingAsk(t *testing.T, addr, text string, ctx map[string]any) (string, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	ev, err := wyoming.AppendEvent(nil, "transcript", map[string]any{"text": text, "context": ctx}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(ev); err != nil {
		t.Fatal(err)
	}
	r := wyoming.NewReader(c, wyoming.Limits{})
	for {
		e, err := r.Read()
		if err != nil {
			t.Fatalf("wyoming: %v", err)
		}
		if e.Type == "handled" || e.Type == "not-handled" {
			var d struct{ Text string }
			e.Decode(&d)
			return e.Type, d.Text
		}
	}
}

// twoModels is a model store of the zoo's stories (the model serve starts
// with) and tiny-llama.
func twoModels(t *testing.T) string {
	t.Helper()
	store := t.TempDir()
	for name, file := range map[string]string{"stories": serveModel, "tiny-llama": "tiny-llama-Q4_0.gguf"} {
		if err := os.Symlink(zoo.Path(t, "models", file), filepath.Join(store, name+".gguf")); err != nil {
			t.Fatal(err)
		}
	}
	return store
}

// serveTwoModels runs geist serve with store's stories first, the HTTP
// API and an embedded broker as device, and returns a client subscribed
// to the device's topics.
func serveTwoModels(t *testing.T, store, device, maxTokens string) (stop func() int, logs *daemontest.SyncBuffer, httpURL string, c *mqtttest.Client) {
	t.Helper()
	broker := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	stop, logs = runServe(t, "-m", filepath.Join(store, "stories.gguf"), "--models-dir", store, "--ctx", "256", "--temp", "0", "--max-tokens", maxTokens,
		"--device", device, "--mqtt-embedded", "--mqtt-embedded-addr", broker, "--http", "127.0.0.1:0", "--data-dir", filepath.Join(t.TempDir(), "state"))
	httpURL = "http://" + httpAddr(t, logs)
	waitFor(t, 30*time.Second, "the broker link", func() bool { return strings.Contains(logs.String(), "mqtt connected") })
	c = mqtttest.NewClient(t, "tcp://"+broker)
	c.Subscribe(t, "geist/"+device+"/#")
	return stop, logs, httpURL, c
}

// TestServeModelByName: the front ends besides HTTP switch models by
// name too. geist serve started with one model answers an MQTT ask naming
// another stored model (its model field) and a Wyoming transcript naming
// one (context.model) with that model, exactly as geist run --chat
// answers with it, and the asks naming none with the first; a model not
// stored is a bad request on both. The first model unloads by keep_alive
// 0 (Ollama's unload request over HTTP); while it is unloaded, a request
// for the other model is answered without loading it (a request never
// waits on a load it does not need); the next request for it loads it
// again and gets the same answer; a keep_alive duration unloads it once
// it ran out after the last request.
func TestServeModelByName(t *testing.T) {
	store := twoModels(t)
	const prompt, n = "Once upon a time", "12"
	want := map[string]string{}
	for _, name := range []string{"stories", "tiny-llama"} {
		code, out, errs := geist(t, "", "run", "-m", filepath.Join(store, name+".gguf"), "--chat", "--temp", "0", "-n", n, "--ctx", "256", prompt)
		if code != 0 {
			t.Fatalf("geist run %s: %d %s", name, code, errs)
		}
		want[name] = strings.TrimSpace(out)
	}
	if want["stories"] == want["tiny-llama"] {
		t.Fatalf("the two models answer alike (%q): the test could not tell them apart", want["stories"])
	}
	broker := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	stop, logs := runServe(t, "-m", filepath.Join(store, "stories.gguf"), "--models-dir", store, "--ctx", "256", "--temp", "0", "--max-tokens", n,
		"--device", "route", "--mqtt-embedded", "--mqtt-embedded-addr", broker, "--wyoming", "127.0.0.1:0", "--wyoming-mdns=false",
		"--http", "127.0.0.1:0", "--data-dir", filepath.Join(t.TempDir(), "state"))
	httpURL := "http://" + httpAddr(t, logs)
	waitFor(t, 30*time.Second, "the broker link", func() bool { return strings.Contains(logs.String(), "mqtt connected") })
	m := regexp.MustCompile(`Wyoming conversation service listening.*addr=(\S+)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no Wyoming listener:\n%s", logs.String())
	}
	wyAddr := m[1]
	c := mqtttest.NewClient(t, "tcp://"+broker)
	c.Subscribe(t, "geist/route/#")
	seq := 0
	ask := func(model string) reply {
		t.Helper()
		seq++
		id := fmt.Sprintf("r%d", seq)
		p := map[string]any{"id": id, "text": prompt}
		if model != "" {
			p["model"] = model
		}
		b, _ := json.Marshal(p)
		c.Publish(t, "geist/route/ask", b)
		return waitReply(t, c, "geist/route/answer/"+id, 60*time.Second)
	}
	check := func(what, got, model string) {
		t.Helper()
		if strings.TrimSpace(got) != want[model] {
			t.Errorf("%s answered %q; geist run --chat with %s: %q", what, got, model, want[model])
		}
	}
	a := ask("tiny-llama")
	check("MQTT naming tiny-llama", a.Text, "tiny-llama")
	check("MQTT naming none", ask("").Text, "stories")
	check("MQTT naming stories:latest", ask("stories:latest").Text, "stories")
	if r := ask("not-stored"); r.code() != "bad_request" || !strings.Contains(r.Error.Message, "not stored") {
		t.Errorf("MQTT naming a model not stored: %+v", r)
	}
	typ, text := wyomingAsk(t, wyAddr, prompt, map[string]any{"model": "tiny-llama"})
	if typ != "handled" {
		t.Errorf("Wyoming naming tiny-llama: %s %q", typ, text)
	}
	check("Wyoming naming tiny-llama", text, "tiny-llama")
	typ, text = wyomingAsk(t, wyAddr, prompt, nil)
	check("Wyoming naming none ("+typ+")", text, "stories")
	if typ, text = wyomingAsk(t, wyAddr, prompt, map[string]any{"model": "not-stored"}); typ != "not-handled" || !strings.Contains(text, "not stored") {
		t.Errorf("Wyoming naming a model not stored: %s %q", typ, text)
	}

	// The first model unloaded: the other answers without loading it.
	post := func(body string) map[string]any {
		t.Helper()
		resp, err := http.Post(httpURL+"/api/generate", "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s: %d %v", body, resp.StatusCode, out)
		}
		return out
	}
	if out := post(`{"model":"stories","prompt":"","keep_alive":0}`); out["done_reason"] != "unload" {
		t.Errorf("unload request answered %v", out)
	}
	waitFor(t, 10*time.Second, "the first model's unload", func() bool {
		return strings.Contains(logs.String(), `msg="model unloaded" model=stories`)
	})
	check("MQTT naming tiny-llama, stories unloaded", ask("tiny-llama").Text, "tiny-llama")
	if strings.Contains(logs.String(), "model loaded again") {
		t.Errorf("a request for tiny-llama loaded stories again:\n%s", logs.String())
	}
	check("MQTT naming none, stories unloaded", ask("").Text, "stories")
	if !strings.Contains(logs.String(), "model loaded again") {
		t.Errorf("no reload in the log:\n%s", logs.String())
	}
	// keep_alive "1s": unloaded about a second after the answer.
	if out := post(`{"model":"stories","prompt":"` + prompt + `","stream":false,"keep_alive":"1s","options":{"num_predict":2}}`); out["done"] != true {
		t.Errorf("keep_alive 1s: %v", out)
	}
	waitFor(t, 10*time.Second, "the unload after keep_alive 1s", func() bool {
		return strings.Contains(logs.String(), `msg="model unloaded" model=stories why="keep_alive ended"`)
	})
	if code := stop(); code != 0 {
		t.Errorf("exit %d; log:\n%s", code, logs.String())
	}
}

// TestServePooledPromptCache: a model loaded on demand keeps its prompts
// in the prompt cache as the first model does: asked again after it was
// unloaded (keep_alive 0) and loaded again, it restores the prompt's KV
// state from cache.db instead of evaluating it, and answers the same.
func TestServePooledPromptCache(t *testing.T) {
	store := twoModels(t)
	stop, logs, httpURL, c := serveTwoModels(t, store, "pcache", "8")
	const text = "Once upon a time there was a little girl named Lily who loved to play in the park with her dog and her friends every day after school"
	ask := func(id string) reply {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"id": id, "text": text, "model": "tiny-llama", "system": "You are a storyteller who tells short stories for children."})
		c.Publish(t, "geist/pcache/ask", b)
		return waitReply(t, c, "geist/pcache/answer/"+id, 60*time.Second)
	}
	cold := ask("p1")
	if cold.code() != "answer" || cold.Usage.RestoredTokens != 0 {
		t.Fatalf("first ask: %+v", cold)
	}
	resp, err := http.Post(httpURL+"/api/generate", "application/json", strings.NewReader(`{"model":"tiny-llama","prompt":"","keep_alive":0}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor(t, 10*time.Second, "tiny-llama's unload", func() bool {
		return regexp.MustCompile(`model unloaded".* model=tiny-llama`).MatchString(logs.String())
	})
	warm := ask("p2")
	t.Logf("cold: %d prompt tokens, %d cached; after the reload: %d cached, %d of them restored during the request", cold.Usage.PromptTokens, cold.Usage.CachedTokens, warm.Usage.CachedTokens, warm.Usage.RestoredTokens)
	// The reload warms the state from the cache (the prefix served
	// last) or the request restores it: either way a fresh engine holds
	// the prompt only through cache.db.
	if warm.code() != "answer" || warm.Text != cold.Text || warm.Usage.CachedTokens < 16 {
		t.Errorf("after the reload: %+v; want %q with the prompt restored from the cache", warm, cold.Text)
	}
	if warm.Usage.RestoredTokens == 0 && !regexp.MustCompile(`prompt cache warmed.* model=tiny-llama`).MatchString(logs.String()) {
		t.Errorf("tiny-llama's prompt neither warmed at the reload nor restored:\n%s", logs.String())
	}
	if code := stop(); code != 0 {
		t.Errorf("exit %d; log:\n%s", code, logs.String())
	}
}

// TestServePriorityBySource: priorities per source, end to end in geist
// serve (one sequence at a time, the engine slowed to 30 ms a piece): while
// an HTTP answer streams, an Open WebUI-style title request arrives over
// HTTP and then a Wyoming question (a voice pipeline's); when the stream
// ends, the Wyoming question goes first and is answered before the title.
func TestServePriorityBySource(t *testing.T) {
	daemon.TestEngine = func(e appliance.Engine) appliance.Engine { return throttled{e, 30 * time.Millisecond} }
	t.Cleanup(func() { daemon.TestEngine = nil })
	model := zoo.Path(t, "models", serveModel)
	_, logs := runServe(t, "-m", model, "--ctx", "512", "--temp", "0", "--parallel", "1", "--max-tokens", "24", "--wyoming", "127.0.0.1:0", "--wyoming-mdns=false",
		"--http", "127.0.0.1:0", "--data-dir", filepath.Join(t.TempDir(), "state"))
	base := "http://" + httpAddr(t, logs)
	m := regexp.MustCompile(`Wyoming conversation service listening.*addr=(\S+)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no Wyoming listener:\n%s", logs.String())
	}
	start := time.Now()
	type done struct {
		what string
		at   time.Duration
	}
	ends := make(chan done, 3)
	stream, err := http.Post(base+"/api/generate", "application/json", strings.NewReader(`{"model":"stories260K-Q4_0","prompt":"Once upon a time","options":{"num_predict":40}}`))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer stream.Body.Close()
		io.Copy(io.Discard, stream.Body)
		ends <- done{"stream", time.Since(start)}
	}()
	time.Sleep(150 * time.Millisecond) // the stream runs (24 pieces, 30 ms each)
	go func() {
		resp, err := http.Post(base+"/api/chat", "application/json", strings.NewReader(`{"model":"stories260K-Q4_0","stream":false,"messages":[{"role":"user","content":"Generate a concise title for this chat"}],"options":{"num_predict":8}}`))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		ends <- done{"title", time.Since(start)}
	}()
	time.Sleep(100 * time.Millisecond) // the title queued first
	go func() {
		typ, _ := wyomingAsk(t, m[1], "turn on the light", nil)
		ends <- done{"wyoming " + typ, time.Since(start)}
	}()
	var order []string
	for range 3 {
		select {
		case d := <-ends:
			order = append(order, fmt.Sprintf("%s@%dms", d.what, d.at.Milliseconds()))
		case <-time.After(60 * time.Second):
			t.Fatalf("answers so far %v", order)
		}
	}
	t.Logf("ended: %v", order)
	if len(order) != 3 || !strings.HasPrefix(order[0], "stream@") || !strings.HasPrefix(order[1], "wyoming handled@") || !strings.HasPrefix(order[2], "title@") {
		t.Errorf("order %v: want the stream, then the Wyoming question, then the title queued before it", order)
	}
}

// TestServeCountsEveryModel (issue 37): in a serve with several models,
// MQTT's state and the status page count the requests of every loaded
// model, not only the first's: an MQTT ask naming the other model (handed
// to its core), one naming none, and an HTTP request for the other model
// (answered by its core directly) make three served on both; once the
// other model is unloaded (keep_alive 0) its requests stay counted.
func TestServeCountsEveryModel(t *testing.T) {
	if daemontest.Emulated() {
		t.Skip("two serve loads under qemu: the counting is plain Go, tested in engine/appliance (TestGroupCountsEveryModel) on every platform")
	}
	stop, logs, httpURL, c := serveTwoModels(t, twoModels(t), "count", "2")
	seq := 0
	ask := func(model string) {
		t.Helper()
		seq++
		id := fmt.Sprintf("r%d", seq)
		p := map[string]any{"id": id, "text": "Once upon a time"}
		if model != "" {
			p["model"] = model
		}
		b, _ := json.Marshal(p)
		c.Publish(t, "geist/count/ask", b)
		if r := waitReply(t, c, "geist/count/answer/"+id, 60*time.Second); r.Error != nil {
			t.Fatalf("ask naming %q: %+v", model, r.Error)
		}
	}
	post := func(body string) {
		t.Helper()
		resp, err := http.Post(httpURL+"/api/generate", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s: %d %s", body, resp.StatusCode, b)
		}
	}
	// mqttServed waits for a published state with want served.
	mqttServed := func(want int64) {
		t.Helper()
		var last int64 = -1
		_, ok := c.Wait(30*time.Second, func(msgs []mqtttest.Msg) bool {
			states := mqtttest.On(msgs, "geist/count/state")
			if len(states) == 0 {
				return false
			}
			var st struct{ Served int64 }
			json.Unmarshal(states[len(states)-1].Payload, &st)
			last = st.Served
			return last == want
		})
		if !ok {
			t.Errorf("MQTT state: served %d, want %d", last, want)
		}
	}
	// pageServed is what a new status feed's first state says.
	pageServed := func() int64 {
		t.Helper()
		resp, err := http.Get(httpURL + "/api/geist/events")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var st struct{ Served int64 }
				json.Unmarshal([]byte(d), &st)
				return st.Served
			}
		}
		t.Fatal("the status feed sent no state")
		return 0
	}
	ask("tiny-llama")
	ask("")
	post(`{"model":"tiny-llama","prompt":"Once upon a time","stream":false,"options":{"num_predict":2}}`)
	mqttServed(3)
	if n := pageServed(); n != 3 {
		t.Errorf("status page: served %d, want 3 (two models' requests)", n)
	}
	post(`{"model":"tiny-llama","prompt":"","keep_alive":0}`)
	waitFor(t, 10*time.Second, "tiny-llama's unload", func() bool {
		return regexp.MustCompile(`model unloaded".* model=tiny-llama`).MatchString(logs.String())
	})
	ask("")
	mqttServed(4)
	if n := pageServed(); n != 4 {
		t.Errorf("status page after the unload: served %d, want 4 (the unloaded model's kept)", n)
	}
	if code := stop(); code != 0 {
		t.Errorf("exit %d; log:\n%s", code, logs.String())
	}
}
