package bench

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/spf13/pflag"
)

// Home Assistant's Assist talking to a conversation agent, replayed as
// Home Assistant's source has it (home-assistant/core, read at 2025.10 and
// later):
//   - the request: components/ollama/entity.py through ollama-python
//     (client.chat with tools, stream, keep_alive, options.num_ctx); the
//     tool result message is role "tool" with json_dumps of the tool's
//     result and nothing else;
//   - the system prompt: conversation/chat_log.py joins the instructions
//     (llm.DEFAULT_INSTRUCTIONS_PROMPT, rendered as a template, which drops
//     its last newline) and the Assist API's prompt with "\n";
//     helpers/llm.py's AssistAPI._async_get_api_prompt joins its parts with
//     "\n": the tool usage line, the satellite's area line, the timer line
//     (absent: a voice satellite that supports timers), DYNAMIC_CONTEXT_PROMPT
//     (with its own line breaks) and the static context, yaml_util.dump of
//     _get_exposed_entities(include_state=False): names, domain, areas per
//     entity, sorted by name, no clock (2025.10 moved it to GetDateTime);
//   - the tools (ha_tools.json): AssistAPI._async_get_tools for the exposed
//     domains and a satellite with timers, the intents' slot schemas
//     converted by voluptuous_openapi (as tests/helpers/snapshots/
//     test_llm.ambr shows them), then validated by ollama-python's Tool
//     model (_copy_tools): a property keeps only type, items, description
//     and enum, the parameters only type, required and properties, so
//     minimum/maximum, anyOf and default are gone before the server sees
//     them;
//   - the GetLiveContext result: {"success": true, "result": "Live Context:
//     ...\n" + yaml_util.dump(entities)}, each entity with its state and
//     only _get_exposed_entities' interesting attributes (integers as
//     strings).
// With Qwen 2.5's template and its real tokenizer (llama.cpp's
// ggml-vocab-qwen2.gguf) 50 entities give ~4,900 tokens before the user
// speaks and a result of ~2,000; a synthetic file's byte-level vocabulary
// tokenizes the same text into about twice as many tokens.

//go:embed ha_tools.json
var haToolsJSON []byte

// haFlags are bench --ha's options.
type haFlags struct {
	on       *bool
	url      *string
	api      *string
	model    *string
	turns    *int
	entities *int
	predict  *int
	followUp *bool
	pid      *int
}

func (f *haFlags) register(fs *pflag.FlagSet) {
	f.on = fs.Bool("ha", false, "replay Home Assistant voice turns against a running server (--url) instead of benchmarking a model file")
	f.url = fs.String("url", "", "with --ha: the server (default $OLLAMA_HOST or http://127.0.0.1:11434)")
	f.api = fs.String("api", "ollama", "with --ha: the server's API, ollama (/api/chat) or openai (/v1/chat/completions, as llama-server)")
	f.model = fs.String("ha-model", "", "with --ha: the model name sent in each request")
	f.turns = fs.Int("turns", 10, "with --ha: voice turns, each a new conversation")
	f.entities = fs.Int("entities", 50, "with --ha: exposed entities in the system prompt (8 areas and a shopping list)")
	f.predict = fs.Int("ha-predict", 16, "with --ha: most tokens generated per call")
	f.followUp = fs.Bool("follow-up", true, "with --ha: a second call per turn with a GetLiveContext result")
	f.pid = fs.Int("server-pid", 0, "with --ha: also report the CPU time the server process (this PID, on this machine) spent on each call, which the load of a shared machine moves far less than the clock")
}

var haAreas = []string{"Kitchen", "Living Room", "Bedroom", "Bathroom", "Office", "Hallway", "Garage", "Garden"}

// haDomains: the kind of exposed entity, its state and the attributes
// GetLiveContext reports (only llm.py's interesting_attributes: integers
// become strings, floats stay numbers).
var haDomains = []struct {
	domain, noun, state string
	attrs               []string
}{
	{"light", "Light", "'on'", []string{"brightness: '204'"}},
	{"switch", "Plug", "'off'", nil},
	{"cover", "Blinds", "open", []string{"current_position: '60'", "device_class: blind"}},
	{"climate", "Thermostat", "heat", []string{"current_temperature: 20.5", "temperature: 21.0"}},
	{"media_player", "Speaker", "playing", []string{"volume_level: 0.35", "media_title: Morning Jazz", "media_artist: Various Artists", "device_class: speaker"}},
	{"lock", "Door Lock", "locked", nil},
	{"fan", "Fan", "'off'", []string{"percentage: '0'"}},
	{"sensor", "Temperature", "'21.3'", []string{"unit_of_measurement: °C", "device_class: temperature"}},
	{"binary_sensor", "Window", "'off'", []string{"device_class: window"}},
	{"sensor", "Humidity", "'48'", []string{"unit_of_measurement: '%'", "device_class: humidity"}},
}

// haEntities renders n exposed entities as Home Assistant's YAML: n-1
// devices over 8 areas and the shopping list (a todo entity in no area,
// which brings the list tools), sorted by name as _get_exposed_entities
// sorts the states; the static overview of the system prompt, or (live)
// with each entity's state and attributes, the GetLiveContext result.
func haEntities(n int, live bool) string {
	type entity struct {
		name, domain, state, area string
		attrs                     []string
	}
	var es []entity
	if n > 0 {
		es = append(es, entity{name: "Shopping List", domain: "todo", state: "'3'"})
	}
	for i := range max(n-1, 0) {
		d := haDomains[i%len(haDomains)]
		area := haAreas[(i/len(haDomains)+i)%len(haAreas)]
		name := area + " " + d.noun
		if k := i / (len(haDomains) * len(haAreas)); k > 0 {
			name += fmt.Sprintf(" %d", k+1)
		}
		es = append(es, entity{name, d.domain, d.state, area, d.attrs})
	}
	slices.SortStableFunc(es, func(a, b entity) int { return strings.Compare(a.name, b.name) })
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "- names: %s\n  domain: %s\n", e.name, e.domain)
		if live {
			fmt.Fprintf(&b, "  state: %s\n", e.state)
		}
		if e.area != "" {
			fmt.Fprintf(&b, "  areas: %s\n", e.area)
		}
		if live && len(e.attrs) > 0 {
			b.WriteString("  attributes:\n")
			for _, a := range e.attrs {
				fmt.Fprintf(&b, "    %s\n", a)
			}
		}
	}
	return b.String()
}

// haSystemPrompt is the system prompt chat_log.py builds for the Assist
// API with n exposed entities, asked from a voice satellite that supports
// timers (helpers/llm.py as of 2025.10: no time line).
func haSystemPrompt(n int) string {
	return "You are a voice assistant for Home Assistant.\n" +
		"Answer questions about the world truthfully.\n" +
		"Answer in plain text. Keep it simple and to the point.\n" +
		"When controlling Home Assistant always call the intent tools. Use HassTurnOn to lock and HassTurnOff to unlock a lock. " +
		"When controlling a device, prefer passing just name and domain. When controlling an area, prefer passing just area name and domain.\n" +
		"When a request names a generic device without an area, treat it as the user's current area and call `GetCurrentLocation` to resolve it before targeting.\n" +
		"You ARE equipped to answer questions about the current state of\n" +
		"the home using the `GetLiveContext` tool. This is a primary function. Do not state you lack the\n" +
		"functionality if the question requires live data.\n" +
		"If the user asks about device existence/type (e.g., \"Do I have lights in the bedroom?\"): Answer\n" +
		"from the static context below.\n" +
		"If the user asks about the CURRENT state, value, or mode (e.g., \"Is the lock locked?\",\n" +
		"\"Is the fan on?\", \"What mode is the thermostat in?\", \"What is the temperature outside?\"):\n" +
		"    1.  Recognize this requires live data.\n" +
		"    2.  You MUST call `GetLiveContext`. This tool will provide the needed real-time information (like temperature from the local weather, lock status, etc.).\n" +
		"    3.  Use the tool's response** to answer the user accurately (e.g., \"The temperature outside is [value from tool].\").\n" +
		"For general knowledge questions not about the home: Answer truthfully from internal knowledge.\n" +
		"\n" +
		"Static Context: An overview of the areas and the devices in this smart home:\n" +
		haEntities(n, false)
}

// haCommands are the turns' words, one new conversation each.
var haCommands = []string{
	"Is the front door locked?",
	"What is the temperature in the living room?",
	"Are any lights on in the kitchen?",
	"Is the bedroom window open?",
	"What is playing on the office speaker?",
	"How warm is it in the bathroom?",
	"Is the garage fan running?",
	"What is the humidity in the garden?",
	"Are the hallway blinds open?",
	"Which lights are on right now?",
}

// HACall is one measured request of a turn.
type HACall struct {
	Turn      int     `json:"turn"`
	Call      string  `json:"call"` // "first" or "live" (with the GetLiveContext result)
	TTFTms    float64 `json:"ttft_ms"`
	TotalMs   float64 `json:"total_ms"`
	Prompt    int     `json:"prompt_tokens"` // -1: the API does not say
	Cached    int     `json:"cached_tokens"` // -1: the API does not say
	Prefilled int     `json:"prefilled_tokens"`
	Generated int     `json:"generated_tokens"`
	// CPUms is the CPU time the server process spent during the call
	// (--server-pid; 0: not measured).
	CPUms float64 `json:"server_cpu_ms,omitempty"`
	// Error: the server's error in the stream, after the prompt was
	// evaluated (llama-server's tool-call parser refuses what a model with
	// random weights writes): the call counts, its TTFT is the error's
	// time when no piece came before.
	Error string `json:"error,omitempty"`
}

func benchHA(ctx context.Context, e *cli.Env, f *haFlags, asJSON bool) error {
	url := *f.url
	if url == "" {
		url = os.Getenv("OLLAMA_HOST")
	}
	if url == "" {
		url = "127.0.0.1:11434"
	}
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	url = strings.TrimRight(url, "/")
	if *f.api != "ollama" && *f.api != "openai" {
		return cli.Usagef("--api %q: want ollama or openai", *f.api)
	}
	if *f.turns < 1 || *f.entities < 0 || *f.predict < 1 {
		return cli.Usagef("--turns and --ha-predict must be >= 1, --entities >= 0")
	}
	var tools []json.RawMessage
	if err := json.Unmarshal(haToolsJSON, &tools); err != nil {
		return err
	}
	system := haSystemPrompt(*f.entities)
	// HA's json_dumps (orjson): compact, in the tool's key order.
	live, _ := json.Marshal(struct {
		Success bool   `json:"success"`
		Result  string `json:"result"`
	}{true, "Live Context: An overview of the areas and the devices in this smart home:\n" + haEntities(*f.entities, true)})
	if !asJSON {
		fmt.Fprintf(e.Stdout, "# %s API at %s, %d entities, %d tools, %d turns\n", *f.api, url, *f.entities, len(tools), *f.turns)
		fmt.Fprintf(e.Stdout, "%4s %-5s %9s %9s %7s %7s %9s %5s", "turn", "call", "ttft_ms", "total_ms", "prompt", "cached", "prefilled", "gen")
		if *f.pid > 0 {
			fmt.Fprintf(e.Stdout, " %9s", "server_cpu_ms")
		}
		fmt.Fprintln(e.Stdout)
	}
	var calls []HACall
	report := func(c HACall) {
		calls = append(calls, c)
		if asJSON {
			b, _ := json.Marshal(c)
			fmt.Fprintln(e.Stdout, string(b))
			return
		}
		num := func(n int) string {
			if n < 0 {
				return "-"
			}
			return fmt.Sprint(n)
		}
		fmt.Fprintf(e.Stdout, "%4d %-5s %9.0f %9.0f %7s %7s %9d %5d", c.Turn, c.Call, c.TTFTms, c.TotalMs, num(c.Prompt), num(c.Cached), c.Prefilled, c.Generated)
		if *f.pid > 0 {
			fmt.Fprintf(e.Stdout, " %9.0f", c.CPUms)
		}
		if c.Error != "" {
			fmt.Fprintf(e.Stdout, " (server error: %.80s)", c.Error)
		}
		fmt.Fprintln(e.Stdout)
	}
	for turn := range *f.turns {
		words := haCommands[turn%len(haCommands)]
		if turn >= len(haCommands) {
			words += fmt.Sprintf(" (%d)", turn/len(haCommands)+1)
		}
		msgs := []map[string]any{{"role": "system", "content": system}, {"role": "user", "content": words}}
		cpu0 := procCPU(*f.pid)
		c, err := haRequest(ctx, url, *f.api, *f.model, msgs, tools, *f.predict)
		if err != nil {
			return fmt.Errorf("turn %d: %w", turn+1, err)
		}
		c.CPUms = cpuSince(*f.pid, cpu0)
		c.Turn, c.Call = turn+1, "first"
		report(c)
		if !*f.followUp {
			continue
		}
		call := map[string]any{"function": map[string]any{"name": "GetLiveContext", "arguments": map[string]any{}}}
		result := map[string]any{"role": "tool", "content": string(live)}
		if *f.api == "openai" {
			call = map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "GetLiveContext", "arguments": "{}"}}
			result["tool_call_id"] = "call_1"
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": "", "tool_calls": []any{call}}, result)
		cpu0 = procCPU(*f.pid)
		if c, err = haRequest(ctx, url, *f.api, *f.model, msgs, tools, *f.predict); err != nil {
			return fmt.Errorf("turn %d, GetLiveContext call: %w", turn+1, err)
		}
		c.CPUms = cpuSince(*f.pid, cpu0)
		c.Turn, c.Call = turn+1, "live"
		report(c)
	}
	if !asJSON {
		// The first call of turn 1 is the cold one; the others find the
		// system prompt and the tools in the cache.
		for _, kind := range []string{"first", "live"} {
			var ttft, cpu []float64
			for _, c := range calls {
				if c.Call == kind && !(kind == "first" && c.Turn == 1) {
					ttft, cpu = append(ttft, c.TTFTms), append(cpu, c.CPUms)
				}
			}
			if len(ttft) > 0 {
				fmt.Fprintf(e.Stdout, "# median ttft %s (warm): %.0f ms over %d calls", kind, median(ttft), len(ttft))
				if *f.pid > 0 {
					fmt.Fprintf(e.Stdout, ", server CPU %.0f ms", median(cpu))
				}
				fmt.Fprintln(e.Stdout)
			}
		}
		fmt.Fprintf(e.Stdout, "# cold first turn ttft: %.0f ms", calls[0].TTFTms)
		if *f.pid > 0 {
			fmt.Fprintf(e.Stdout, ", server CPU %.0f ms", calls[0].CPUms)
		}
		fmt.Fprintln(e.Stdout)
	}
	return nil
}

// procCPU is the CPU time process pid has used, in milliseconds, from
// /proc/PID/stat (0: pid 0 or unreadable).
func procCPU(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	return parseProcCPU(string(b))
}

// parseProcCPU reads utime and stime (fields 14 and 15, clock ticks of
// 1/100 s on Linux) from a /proc/PID/stat line; the command name (field
// 2) may hold spaces and parentheses, so the fields count from its last
// ')'.
func parseProcCPU(stat string) float64 {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0
	}
	var ut, st float64
	if _, err := fmt.Sscan(f[11], &ut); err != nil {
		return 0
	}
	if _, err := fmt.Sscan(f[12], &st); err != nil {
		return 0
	}
	return (ut + st) * 10
}

// cpuSince is the server's CPU time since c0 (0 without --server-pid).
func cpuSince(pid int, c0 float64) float64 {
	if pid <= 0 {
		return 0
	}
	return procCPU(pid) - c0
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// haRequest sends one streamed chat request as Home Assistant does and
// measures it: the time to the first streamed piece of the answer (text,
// thinking or a tool call) and to the end, and the usage the server
// reports.
func haRequest(ctx context.Context, url, api, model string, msgs []map[string]any, tools []json.RawMessage, predict int) (HACall, error) {
	body := map[string]any{"model": model, "messages": msgs, "tools": tools, "stream": true}
	path := "/api/chat"
	if api == "ollama" {
		// ollama/entity.py: num_ctx and keep_alive from the options;
		// greedy here, so that runs compare.
		body["options"] = map[string]any{"num_ctx": 8192, "num_predict": predict, "temperature": 0}
		body["keep_alive"] = "-1m"
	} else {
		path = "/v1/chat/completions"
		body["max_tokens"], body["temperature"] = predict, 0
		body["stream_options"] = map[string]any{"include_usage": true}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return HACall{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+path, bytes.NewReader(b))
	if err != nil {
		return HACall{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return HACall{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return HACall{}, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	c := HACall{Prompt: -1, Cached: -1}
	var first time.Duration
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if api == "openai" {
			var ok bool
			if line, ok = bytes.CutPrefix(line, []byte("data:")); !ok {
				continue
			}
			line = bytes.TrimSpace(line)
			if string(line) == "[DONE]" {
				break
			}
		}
		if len(line) == 0 {
			continue
		}
		got, err := haChunk(api, line, &c)
		var se haServerError
		if errors.As(err, &se) {
			c.Error = string(se)
			break
		}
		if err != nil {
			return HACall{}, err
		}
		if got && first == 0 {
			first = time.Since(start)
		}
	}
	if err := sc.Err(); err != nil {
		return HACall{}, err
	}
	total := time.Since(start)
	if first == 0 {
		first = total
	}
	c.TTFTms, c.TotalMs = ms(first), ms(total)
	return c, nil
}

// haServerError is an error the server streamed.
type haServerError string

func (e haServerError) Error() string { return "server: " + string(e) }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// haChunk reads one streamed chunk into c and says whether it carries a
// piece of the answer.
func haChunk(api string, line []byte, c *HACall) (bool, error) {
	if api == "ollama" {
		var ch struct {
			Message struct {
				Content   string            `json:"content"`
				Thinking  string            `json:"thinking"`
				ToolCalls []json.RawMessage `json:"tool_calls"`
			} `json:"message"`
			Error           string `json:"error"`
			Done            bool   `json:"done"`
			PromptEvalCount int    `json:"prompt_eval_count"`
			EvalCount       int    `json:"eval_count"`
		}
		if err := json.Unmarshal(line, &ch); err != nil {
			return false, fmt.Errorf("a chunk that is no JSON: %.200q", line)
		}
		if ch.Error != "" {
			return false, haServerError(ch.Error)
		}
		if ch.Done {
			// Ollama's prompt_eval_count counts the evaluated tokens
			// only; it names neither the prompt's length nor the cache.
			c.Prefilled, c.Generated = ch.PromptEvalCount, ch.EvalCount
		}
		m := &ch.Message
		return m.Content != "" || m.Thinking != "" || len(m.ToolCalls) > 0, nil
	}
	var ch struct {
		Choices []struct {
			Delta struct {
				Content          string            `json:"content"`
				ReasoningContent string            `json:"reasoning_content"`
				ToolCalls        []json.RawMessage `json:"tool_calls"`
			} `json:"delta"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens        int `json:"prompt_tokens"`
			CompletionTokens    int `json:"completion_tokens"`
			PromptTokensDetails *struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
		// llama-server's own figures: cache_n tokens reused, prompt_n
		// evaluated.
		Timings *struct {
			CacheN     *int `json:"cache_n"`
			PromptN    int  `json:"prompt_n"`
			PredictedN int  `json:"predicted_n"`
		} `json:"timings"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &ch); err != nil {
		return false, fmt.Errorf("a chunk that is no JSON: %.200q", line)
	}
	if ch.Error != nil {
		return false, haServerError(ch.Error.Message)
	}
	if u := ch.Usage; u != nil {
		c.Prompt, c.Generated = u.PromptTokens, u.CompletionTokens
		if u.PromptTokensDetails != nil {
			c.Cached = u.PromptTokensDetails.CachedTokens
		}
		if c.Cached >= 0 {
			c.Prefilled = c.Prompt - c.Cached
		}
	}
	if t := ch.Timings; t != nil && t.CacheN != nil {
		c.Cached, c.Prefilled = *t.CacheN, t.PromptN
		if c.Prompt < 0 {
			c.Prompt = *t.CacheN + t.PromptN
		}
	}
	for _, d := range ch.Choices {
		if d.Delta.Content != "" || d.Delta.ReasoningContent != "" || len(d.Delta.ToolCalls) > 0 {
			return true, nil
		}
	}
	return false, nil
}
