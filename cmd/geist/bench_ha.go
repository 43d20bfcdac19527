package main

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Home Assistant's Assist talking to a conversation agent, replayed: the
// request shape of its Ollama integration (homeassistant/components/
// ollama/entity.py through ollama-python), its prompt (helpers/llm.py:
// the instructions, the Assist API's prompt and the exposed entities as
// YAML, no clock since 2025.10) and its intent tools
// (tests/helpers/snapshots/test_llm.ambr, 29 of them with timers, media,
// vacuum and lists). Each turn is a new conversation: a command, then a
// second call carrying the model's GetLiveContext call and its result
// (the state of every exposed entity, ~2,000 tokens at 50 entities).

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
}

func (f *haFlags) register(fs *pflag.FlagSet) {
	f.on = fs.Bool("ha", false, "replay Home Assistant voice turns against a running server (--url) instead of benchmarking a model file")
	f.url = fs.String("url", "", "with --ha: the server (default $OLLAMA_HOST or http://127.0.0.1:11434)")
	f.api = fs.String("api", "ollama", "with --ha: the server's API, ollama (/api/chat) or openai (/v1/chat/completions, as llama-server)")
	f.model = fs.String("ha-model", "", "with --ha: the model name sent in each request")
	f.turns = fs.Int("turns", 10, "with --ha: voice turns, each a new conversation")
	f.entities = fs.Int("entities", 50, "with --ha: exposed entities in the system prompt (8 areas)")
	f.predict = fs.Int("ha-predict", 16, "with --ha: most tokens generated per call")
	f.followUp = fs.Bool("follow-up", true, "with --ha: a second call per turn with a GetLiveContext result")
}

var haAreas = []string{"Kitchen", "Living Room", "Bedroom", "Bathroom", "Office", "Hallway", "Garage", "Garden"}

// haDomains: the kind of exposed entity, its states and attributes as
// GetLiveContext reports them.
var haDomains = []struct {
	domain, noun, state string
	attrs               []string
}{
	{"light", "Light", "'on'", []string{"brightness: '80'", "color_mode: color_temp", "color_temp_kelvin: '2700'"}},
	{"switch", "Plug", "'off'", nil},
	{"cover", "Blinds", "open", []string{"current_position: '60'", "device_class: blind"}},
	{"climate", "Thermostat", "heat", []string{"current_temperature: '20.5'", "temperature: '21'", "hvac_action: heating", "preset_mode: comfort"}},
	{"media_player", "Speaker", "playing", []string{"volume_level: '0.35'", "media_title: Morning Jazz", "media_artist: Various Artists", "device_class: speaker"}},
	{"lock", "Door Lock", "locked", nil},
	{"fan", "Fan", "'off'", []string{"percentage: '0'"}},
	{"sensor", "Temperature", "'21.3'", []string{"unit_of_measurement: °C", "device_class: temperature"}},
	{"binary_sensor", "Window", "'off'", []string{"device_class: window"}},
	{"sensor", "Humidity", "'48'", []string{"unit_of_measurement: '%'", "device_class: humidity"}},
}

// haEntities renders n exposed entities over 8 areas as Home Assistant's
// YAML: the static overview of the system prompt, or (live) with each
// entity's state and attributes, the GetLiveContext result.
func haEntities(n int, live bool) string {
	var b strings.Builder
	for i := range n {
		d := haDomains[i%len(haDomains)]
		area := haAreas[(i/len(haDomains)+i)%len(haAreas)]
		fmt.Fprintf(&b, "- names: %s %s", area, d.noun)
		if k := i / (len(haDomains) * len(haAreas)); k > 0 {
			fmt.Fprintf(&b, " %d", k+1)
		}
		fmt.Fprintf(&b, "\n  domain: %s\n", d.domain)
		if live {
			fmt.Fprintf(&b, "  state: %s\n", d.state)
		}
		fmt.Fprintf(&b, "  areas: %s\n", area)
		if live && len(d.attrs) > 0 {
			b.WriteString("  attributes:\n")
			for _, a := range d.attrs {
				fmt.Fprintf(&b, "    %s\n", a)
			}
		}
	}
	return b.String()
}

// haSystemPrompt is helpers/llm.py's prompt for the Assist API with n
// exposed entities (2025.10 and later: no time line).
func haSystemPrompt(n int) string {
	return "You are a voice assistant for Home Assistant.\n" +
		"Answer questions about the world truthfully.\n" +
		"Answer in plain text. Keep it simple and to the point.\n" +
		"When controlling Home Assistant always call the intent tools. Use HassTurnOn to lock and HassTurnOff to unlock a lock. " +
		"When controlling a device, prefer passing just name and domain. When controlling an area, prefer passing just area name and domain.\n" +
		"When a user asks to turn on all devices of a specific type, ask user to specify an area, unless there is only one device of that type.\n" +
		"You ARE equipped to answer questions about the current state of the home using the `GetLiveContext` tool. This is a primary function. " +
		"Do not state you lack the functionality if the question requires live data.\n" +
		"If the user asks about device existence/type (e.g., \"Do I have lights in the bedroom?\"): Answer from the static context below.\n" +
		"If the user asks about the CURRENT state, value, or mode (e.g., \"Is the lock locked?\", \"Is the fan on?\", \"What mode is the thermostat in?\", \"What is the temperature outside?\"):\n" +
		"    1.  Recognize this requires live data.\n" +
		"    2.  You MUST call `GetLiveContext`. This tool will provide the needed real-time information (like temperature from the local weather, lock status, etc.).\n" +
		"    3.  Use the tool's response** to answer the user accurately (e.g., \"The temperature outside is [value from tool].\").\n" +
		"For general knowledge questions not about the home: Answer truthfully from internal knowledge.\n" +
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

// haCall is one measured request of a turn.
type haCall struct {
	Turn      int     `json:"turn"`
	Call      string  `json:"call"` // "first" or "live" (with the GetLiveContext result)
	TTFTms    float64 `json:"ttft_ms"`
	TotalMs   float64 `json:"total_ms"`
	Prompt    int     `json:"prompt_tokens"` // -1: the API does not say
	Cached    int     `json:"cached_tokens"` // -1: the API does not say
	Prefilled int     `json:"prefilled_tokens"`
	Generated int     `json:"generated_tokens"`
}

func benchHA(ctx context.Context, e *env, f *haFlags, asJSON bool) error {
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
		return usagef("--api %q: want ollama or openai", *f.api)
	}
	if *f.turns < 1 || *f.entities < 0 || *f.predict < 1 {
		return usagef("--turns and --ha-predict must be >= 1, --entities >= 0")
	}
	var tools []json.RawMessage
	if err := json.Unmarshal(haToolsJSON, &tools); err != nil {
		return err
	}
	system := haSystemPrompt(*f.entities)
	live, _ := json.Marshal(map[string]any{"success": true, "result": "Live Context: An overview of the areas and the devices in this smart home:\n" + haEntities(*f.entities, true)})
	if !asJSON {
		fmt.Fprintf(e.stdout, "# %s API at %s, %d entities, %d tools, %d turns\n", *f.api, url, *f.entities, len(tools), *f.turns)
		fmt.Fprintf(e.stdout, "%4s %-5s %9s %9s %7s %7s %9s %5s\n", "turn", "call", "ttft_ms", "total_ms", "prompt", "cached", "prefilled", "gen")
	}
	var calls []haCall
	report := func(c haCall) {
		calls = append(calls, c)
		if asJSON {
			b, _ := json.Marshal(c)
			fmt.Fprintln(e.stdout, string(b))
			return
		}
		num := func(n int) string {
			if n < 0 {
				return "-"
			}
			return fmt.Sprint(n)
		}
		fmt.Fprintf(e.stdout, "%4d %-5s %9.0f %9.0f %7s %7s %9d %5d\n", c.Turn, c.Call, c.TTFTms, c.TotalMs, num(c.Prompt), num(c.Cached), c.Prefilled, c.Generated)
	}
	for turn := range *f.turns {
		words := haCommands[turn%len(haCommands)]
		if turn >= len(haCommands) {
			words += fmt.Sprintf(" (%d)", turn/len(haCommands)+1)
		}
		msgs := []map[string]any{{"role": "system", "content": system}, {"role": "user", "content": words}}
		c, err := haRequest(ctx, url, *f.api, *f.model, msgs, tools, *f.predict)
		if err != nil {
			return fmt.Errorf("turn %d: %w", turn+1, err)
		}
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
		} else {
			result["tool_name"] = "GetLiveContext"
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": "", "tool_calls": []any{call}}, result)
		if c, err = haRequest(ctx, url, *f.api, *f.model, msgs, tools, *f.predict); err != nil {
			return fmt.Errorf("turn %d, GetLiveContext call: %w", turn+1, err)
		}
		c.Turn, c.Call = turn+1, "live"
		report(c)
	}
	if !asJSON {
		// The first call of turn 1 is the cold one; the others find the
		// system prompt and the tools in the cache.
		for _, kind := range []string{"first", "live"} {
			var ttft []float64
			for _, c := range calls {
				if c.Call == kind && !(kind == "first" && c.Turn == 1) {
					ttft = append(ttft, c.TTFTms)
				}
			}
			if len(ttft) > 0 {
				fmt.Fprintf(e.stdout, "# median ttft %s (warm): %.0f ms over %d calls\n", kind, median(ttft), len(ttft))
			}
		}
		fmt.Fprintf(e.stdout, "# cold first turn ttft: %.0f ms\n", calls[0].TTFTms)
	}
	return nil
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
func haRequest(ctx context.Context, url, api, model string, msgs []map[string]any, tools []json.RawMessage, predict int) (haCall, error) {
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
		return haCall{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+path, bytes.NewReader(b))
	if err != nil {
		return haCall{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return haCall{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return haCall{}, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	c := haCall{Prompt: -1, Cached: -1}
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
		if err != nil {
			return haCall{}, err
		}
		if got && first == 0 {
			first = time.Since(start)
		}
	}
	if err := sc.Err(); err != nil {
		return haCall{}, err
	}
	total := time.Since(start)
	if first == 0 {
		first = total
	}
	c.TTFTms, c.TotalMs = ms(first), ms(total)
	return c, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// haChunk reads one streamed chunk into c and says whether it carries a
// piece of the answer.
func haChunk(api string, line []byte, c *haCall) (bool, error) {
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
			return false, fmt.Errorf("server: %s", ch.Error)
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
		return false, fmt.Errorf("server: %s", ch.Error.Message)
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
