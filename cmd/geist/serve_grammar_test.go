package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/geisten/geist/cmd/internal/daemon/daemontest"
	"github.com/geisten/geist/engine/zoo"
)

// TestServeGrammarBounds is issue 33's grammar part over HTTP, with the
// tiny Qwen3-MoE file (Qwen3's thinking template): schemas and grammars
// whose compile took minutes and gigabytes are refused with a 400 naming
// the limit, as a format, as a response_format, as a tool's parameters
// with tool_choice required and as a GBNF grammar, while /healthz keeps
// answering within 100 ms; and format "json" (the request that opened
// about 110 brackets and stalled the worker at 0.2 tok/s), format
// {"type":"array"} and zod's integer bounds are answered within their
// token limit at the usual speed.
func TestServeGrammarBounds(t *testing.T) {
	if testing.Short() || daemontest.Emulated() {
		t.Skip("timing-bound: native only")
	}
	addr, logs := serveHTTP(t, "-m", zoo.Path(t, "new", "models", "tiny-qwen3moe-Q4_0.gguf"), "--ctx", "1024")
	base := "http://" + addr
	post := func(path, body string) (int, string) {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// /healthz, polled throughout.
	var mu sync.Mutex
	var worst time.Duration
	var failed []string
	var lat []time.Duration
	phase := "idle"
	worstIn := map[string]time.Duration{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			start := time.Now()
			resp, err := http.Get(base + "/healthz")
			took := time.Since(start)
			mu.Lock()
			worst = max(worst, took)
			lat = append(lat, took)
			worstIn[phase] = max(worstIn[phase], took)
			if err != nil {
				failed = append(failed, err.Error())
			} else {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failed = append(failed, resp.Status)
				}
			}
			mu.Unlock()
		}
	}()
	// The machine's own latency first: with nothing compiled, /healthz
	// polled for 2 s.
	time.Sleep(2 * time.Second)
	mu.Lock()
	idle := worst
	worst, lat = 0, lat[:0]
	mu.Unlock()
	const nested = `{"type":"string","pattern":"^((((a{0,10}){0,10}){0,10}){0,10}){0,10}$"}`
	msgs := `[{"role":"user","content":"Describe a person as JSON"}]`
	bad := []struct{ path, body string }{
		{"/api/chat", `{"model":"","messages":` + msgs + `,"format":` + nested + `,"stream":false}`},
		{"/v1/chat/completions", `{"model":"","messages":` + msgs + `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + nested + `}}}`},
		{"/v1/chat/completions", `{"model":"","messages":` + msgs + `,"tool_choice":"required","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"p":` + nested + `},"required":["p"]}}}]}`},
		{"/v1/chat/completions", `{"model":"","messages":` + msgs + `,"grammar":"root ::= ((\"a\"{0,50}){0,1000})"}`},
	}
	mu.Lock()
	phase = "compiles"
	mu.Unlock()
	for _, b := range bad {
		start := time.Now()
		code, body := post(b.path, b.body)
		t.Logf("%s: %d in %v: %.200s", b.path, code, time.Since(start).Round(time.Millisecond), body)
		if code != 400 || !strings.Contains(body, "too large") || !strings.Contains(body, "more than") {
			t.Errorf("%s %.80s: %d %s, want a 400 naming the limit", b.path, b.body, code, body)
		}
	}
	// Answered within the token limit, at speed.
	good := []struct{ body string }{
		{`{"model":"","messages":` + msgs + `,"format":"json","stream":false,"options":{"num_predict":200,"seed":1}}`},
		{`{"model":"","messages":[{"role":"user","content":"List"}],"format":{"type":"array"},"stream":false,"options":{"num_predict":200,"seed":2}}`},
		{`{"model":"","messages":` + msgs + `,"format":{"type":"object","properties":{"age":{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991}},"required":["age"],"additionalProperties":false},"stream":false,"options":{"num_predict":200,"seed":3}}`},
	}
	for seed := 4; seed <= 8; seed++ {
		good = append(good, struct{ body string }{fmt.Sprintf(`{"model":"","messages":%s,"format":"json","stream":false,"options":{"num_predict":200,"seed":%d}}`, msgs, seed)})
	}
	mu.Lock()
	phase = "generations"
	mu.Unlock()
	for _, g := range good {
		start := time.Now()
		code, body := post("/api/chat", g.body)
		took := time.Since(start)
		var r struct {
			Message      struct{ Content string }
			DoneReason   string `json:"done_reason"`
			EvalCount    int    `json:"eval_count"`
			EvalDuration int64  `json:"eval_duration"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &r) != nil {
			t.Errorf("%.120s: %d %s", g.body, code, body)
			continue
		}
		rate := float64(r.EvalCount) / (float64(r.EvalDuration) / 1e9)
		t.Logf("%d tokens (%s) in %v, %.0f tok/s: %.80q", r.EvalCount, r.DoneReason, took.Round(time.Millisecond), rate, r.Message.Content)
		if r.EvalCount > 200 || took > 60*time.Second || rate < 20 {
			t.Errorf("%.120s: %d tokens in %v (%.1f tok/s)", g.body, r.EvalCount, took, rate)
		}
	}
	close(stop)
	wg.Wait()
	slices.Sort(lat)
	t.Logf("/healthz: %d polls, median %v, 99th percentile %v, worst %v (load: %s)", len(lat), lat[len(lat)/2], lat[len(lat)*99/100], worst, loadavg())
	t.Logf("/healthz before: worst %v; worst by phase %v", idle, worstIn)
	if len(failed) > 0 {
		t.Errorf("/healthz failed: %v", failed)
	}
	switch {
	case worst <= 100*time.Millisecond:
	case idle > 50*time.Millisecond:
		// The machine itself answers this slowly (other processes
		// hold the cores): the bound cannot be told from its noise.
		t.Logf("/healthz: worst %v past 100 ms, but %v with nothing to do: the machine is overloaded, the bound is not checked", worst, idle)
	default:
		t.Errorf("/healthz: worst %v, past 100 ms (%v with nothing to do)", worst, idle)
	}
	_ = logs
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}
