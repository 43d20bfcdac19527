package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/cmd/internal/daemon/daemontest"
	"github.com/geisten/geist/engine/zoo"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestServeStructuredClients is issue 25's client test: the npm ollama
// client with a format schema and the npm openai client with
// response_format json_schema get JSON that validates, seed after seed,
// and tool_choice required or a named function always parses into
// tool_calls with arguments that validate against the tool's parameters;
// a schema keyword geist cannot enforce is a 400 naming it. The model is
// stories260K (it knows nothing of JSON) with Qwen 2.5's chat template.
func TestServeStructuredClients(t *testing.T) {
	if testing.Short() || daemontest.Emulated() {
		t.Skip("runs node and the npm clients: native only")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	dir := npmDir(t)
	model := withTemplate(t, zoo.Path(t, "models", serveModel), zooTemplate(t, "Qwen-Qwen2.5-7B-Instruct"))
	addr, logs := serveHTTP(t, "-m", model, "--ctx", "2048")
	const schema = `{"type": "object", "properties": {"summary": {"type": "string", "maxLength": 40}, "temperature": {"type": "number"}, "rain": {"type": "boolean"}, "items": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 3}}, "required": ["summary", "temperature", "rain"]}`
	const tools = `[{"type": "function", "function": {"name": "HassTurnOn", "parameters": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 30}, "area": {"type": "string", "maxLength": 30}}, "required": ["name"]}}},
		{"type": "function", "function": {"name": "HassLightSet", "parameters": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 30}, "brightness": {"type": "integer", "minimum": 0, "maximum": 100}}, "required": ["brightness"]}}}]`
	name := strings.TrimSuffix(filepath.Base(model), ".gguf")
	out := runNode(t, dir, 4*time.Minute, logs, "testdata/http/structured.mjs", "http://"+addr, name, schema, tools, "4")
	t.Logf("clients: %s", out)
	var r struct {
		OllamaFormat, OllamaJSON, OpenaiSchema [][2]string
		ToolsRequired, ToolsNamed              [][3]json.RawMessage
		OllamaRefused, OpenaiRefused           string
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("structured.mjs printed %s: %v", out, err)
	}
	compile := func(s string) *jsonschema.Schema {
		c := jsonschema.NewCompiler()
		doc, _ := jsonschema.UnmarshalJSON(strings.NewReader(s))
		if err := c.AddResource("s.json", doc); err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile("s.json")
		if err != nil {
			t.Fatal(err)
		}
		return sch
	}
	valid := func(what, text string, sch *jsonschema.Schema) {
		t.Helper()
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if err != nil {
			t.Errorf("%s: %q does not parse: %v", what, text, err)
			return
		}
		if sch != nil {
			if err := sch.Validate(v); err != nil {
				t.Errorf("%s: %q does not validate: %v", what, text, err)
			}
		}
	}
	sch := compile(schema)
	for _, a := range r.OllamaFormat {
		valid("ollama format schema", a[0], sch)
	}
	for _, a := range r.OllamaJSON {
		if a[1] != "length" {
			valid("ollama format json", a[0], nil)
		}
	}
	for _, a := range r.OpenaiSchema {
		valid("openai json_schema", a[0], sch)
	}
	var toolDefs []struct {
		Function struct {
			Name       string
			Parameters json.RawMessage
		}
	}
	json.Unmarshal([]byte(tools), &toolDefs)
	params := map[string]*jsonschema.Schema{}
	for _, d := range toolDefs {
		params[d.Function.Name] = compile(string(d.Function.Parameters))
	}
	for i, set := range [][][3]json.RawMessage{r.ToolsRequired, r.ToolsNamed} {
		for _, a := range set {
			var calls []struct {
				Function struct{ Name, Arguments string }
			}
			if err := json.Unmarshal(a[0], &calls); err != nil || len(calls) == 0 {
				t.Errorf("tool_choice %d: no tool_calls (finish %s, content %s)", i, a[1], a[2])
				continue
			}
			for _, c := range calls {
				if i == 1 && c.Function.Name != "HassLightSet" {
					t.Errorf("named tool_choice: called %q", c.Function.Name)
				}
				sch, ok := params[c.Function.Name]
				if !ok {
					t.Errorf("called %q, not offered", c.Function.Name)
					continue
				}
				valid("tool arguments", c.Function.Arguments, sch)
			}
		}
	}
	if !strings.HasPrefix(r.OllamaRefused, "400") || !strings.Contains(r.OllamaRefused, "minProperties") {
		t.Errorf("ollama, unsupported keyword: %s", r.OllamaRefused)
	}
	if !strings.HasPrefix(r.OpenaiRefused, "400") || !strings.Contains(r.OpenaiRefused, "format") {
		t.Errorf("openai, unsupported format: %s", r.OpenaiRefused)
	}
}

// TestServeFamilyTools: Phi-4-mini's and SmolLM3's templates take no tools
// variable, and LFM2 writes its calls as a Python list, yet geist serves
// tool calls for them (the zoo's tiny phi3, smollm3 and lfm2 files, random
// weights, with their own templates): through the official OpenAI client,
// tool_choice required and a named function, plain and streamed, always
// give tool_calls whose arguments validate against the tool's parameters
// (Phi-4-mini's calls between its control tokens <|tool_call|> and
// <|/tool_call|>, SmolLM3's in <tool_call> tags, LFM2's
// <|tool_call_start|>[name(key=value)]<|tool_call_end|>); the
// official Ollama client's chat offering the tools (auto: the random
// weights rarely call) is served, not refused as before.
func TestServeFamilyTools(t *testing.T) {
	if testing.Short() || daemontest.Emulated() {
		t.Skip("runs node and the npm clients: native only")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	dir := npmDir(t)
	const tools = `[{"type": "function", "function": {"name": "HassTurnOn", "description": "Turns on a device", "parameters": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "area": {"type": "string", "maxLength": 20}}, "required": ["name"]}}},
		{"type": "function", "function": {"name": "HassLightSet", "description": "Sets a light's brightness", "parameters": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "brightness": {"type": "integer", "minimum": 0, "maximum": 100}}, "required": ["brightness"]}}}]`
	var defs []struct {
		Function struct {
			Name       string
			Parameters json.RawMessage
		}
	}
	json.Unmarshal([]byte(tools), &defs)
	params := map[string]*jsonschema.Schema{}
	for _, d := range defs {
		c := jsonschema.NewCompiler()
		doc, _ := jsonschema.UnmarshalJSON(strings.NewReader(string(d.Function.Parameters)))
		if err := c.AddResource("s.json", doc); err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile("s.json")
		if err != nil {
			t.Fatal(err)
		}
		params[d.Function.Name] = sch
	}
	// SmolLM3 thinks first unless told /no_think; its random weights would
	// think to the token limit.
	for fam, system := range map[string]string{"phi3": "You control the home.", "smollm3": "You control the home. /no_think", "lfm2": "You control the home.", "gemma4": "You control the home."} {
		t.Run(fam, func(t *testing.T) {
			model := zoo.Path(t, "new", "models", "tiny-"+fam+"-Q4_0.gguf")
			addr, logs := serveHTTP(t, "-m", model, "--ctx", "2048")
			name := strings.TrimSuffix(filepath.Base(model), ".gguf")
			out := runNode(t, dir, 4*time.Minute, logs, "testdata/http/family_tools.mjs", "http://"+addr, name, tools, "2", system)
			t.Logf("clients: %s", out)
			var r struct {
				Calls  [][4]json.RawMessage
				Ollama [][4]json.RawMessage
			}
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("family_tools.mjs printed %s: %v", out, err)
			}
			if len(r.Calls) != 8 || len(r.Ollama) != 2 {
				t.Fatalf("%d OpenAI answers, %d Ollama answers", len(r.Calls), len(r.Ollama))
			}
			for _, a := range r.Calls {
				var what, finish string
				json.Unmarshal(a[0], &what)
				json.Unmarshal(a[2], &finish)
				var calls []struct {
					ID       string
					Function struct{ Name, Arguments string }
				}
				if err := json.Unmarshal(a[1], &calls); err != nil || len(calls) == 0 {
					t.Errorf("%s: no tool_calls (finish %s, content %s)", what, finish, a[3])
					continue
				}
				if finish != "tool_calls" {
					t.Errorf("%s: finish_reason %q, want tool_calls", what, finish)
				}
				// Gemma 4 thinks (enable_thinking on): a thought it writes
				// is reasoning_content, never content.
				var content string
				if json.Unmarshal(a[3], &content); strings.Contains(content, "<|channel>") || strings.Contains(content, "<channel|>") {
					t.Errorf("%s: content %q has channel marks", what, content)
				}
				for _, c := range calls {
					if strings.HasPrefix(what, "named") && c.Function.Name != "HassLightSet" {
						t.Errorf("%s: called %q", what, c.Function.Name)
					}
					sch, ok := params[c.Function.Name]
					if !ok {
						t.Errorf("%s: called %q, not offered", what, c.Function.Name)
						continue
					}
					v, err := jsonschema.UnmarshalJSON(strings.NewReader(c.Function.Arguments))
					if err != nil {
						t.Errorf("%s: arguments %q do not parse: %v", what, c.Function.Arguments, err)
					} else if err := sch.Validate(v); err != nil {
						t.Errorf("%s: arguments %q do not validate: %v", what, c.Function.Arguments, err)
					}
				}
			}
			for _, a := range r.Ollama {
				var reason string
				json.Unmarshal(a[1], &reason)
				if reason == "" {
					t.Errorf("ollama chat with tools: no done_reason: %s", a)
				}
				// Calls the model chose to make are the tools' calls.
				var calls []struct {
					Function struct {
						Name      string
						Arguments json.RawMessage
					}
				}
				json.Unmarshal(a[0], &calls)
				for _, c := range calls {
					sch, ok := params[c.Function.Name]
					if !ok {
						t.Errorf("ollama chat: called %q, not offered", c.Function.Name)
						continue
					}
					v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(c.Function.Arguments)))
					if err != nil || sch.Validate(v) != nil {
						t.Errorf("ollama chat: arguments %s of %s do not validate", c.Function.Arguments, c.Function.Name)
					}
				}
			}
		})
	}
}

// TestServeParallelToolCalls: OpenAI's parallel_tool_calls false through
// the official npm openai client, tool_choice required, plain and
// streamed: every answer is exactly one call, whose arguments validate
// against the tool's parameters, in each syntax (stories260K with Qwen
// 2.5's <tool_call> template, Llama 3.2's JSON, Phi-4-mini's and Granite
// 3.3's lists, LFM2.5's Python list; Granite's template has <think>, so
// the answer may open a thinking block before its calls, and the stories
// model's white space there is bounded). The same requests without the
// field, seed for seed, make call after call in some answers (several
// calls, or calls up to max_tokens: an answer cut there keeps the calls
// complete before the cut and drops the one cut off), which is what the
// limit ends.
func TestServeParallelToolCalls(t *testing.T) {
	if testing.Short() || daemontest.Emulated() {
		t.Skip("runs node and the npm clients: native only")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	dir := npmDir(t)
	const tools = `[{"type": "function", "function": {"name": "HassTurnOn", "parameters": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "area": {"type": "string", "maxLength": 20}}, "required": ["name"]}}},
		{"type": "function", "function": {"name": "HassLightSet", "parameters": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "brightness": {"type": "integer", "minimum": 0, "maximum": 100}}, "required": ["brightness"]}}}]`
	var defs []struct {
		Function struct {
			Name       string
			Parameters json.RawMessage
		}
	}
	json.Unmarshal([]byte(tools), &defs)
	params := map[string]*jsonschema.Schema{}
	for _, d := range defs {
		c := jsonschema.NewCompiler()
		doc, _ := jsonschema.UnmarshalJSON(strings.NewReader(string(d.Function.Parameters)))
		if err := c.AddResource("s.json", doc); err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile("s.json")
		if err != nil {
			t.Fatal(err)
		}
		params[d.Function.Name] = sch
	}
	const seeds = 3
	unlimited := 0 // answers without the limit that made more than one call
	for _, tmpl := range []string{"Qwen-Qwen2.5-7B-Instruct", "meta-llama-Llama-3.2-3B-Instruct", "microsoft-Phi-4-mini-instruct", "ibm-granite-granite-3.3-2B-Instruct", "LFM2.5-Instruct"} {
		t.Run(tmpl, func(t *testing.T) {
			model := withTemplate(t, zoo.Path(t, "models", serveModel), zooTemplate(t, tmpl))
			addr, logs := serveHTTP(t, "-m", model, "--ctx", "2048")
			name := strings.TrimSuffix(filepath.Base(model), ".gguf")
			out := runNode(t, dir, 4*time.Minute, logs, "testdata/http/parallel_tools.mjs", "http://"+addr, name, tools, fmt.Sprint(seeds))
			t.Logf("client: %s", out)
			var r struct{ Answers [][4]json.RawMessage }
			if err := json.Unmarshal(out, &r); err != nil {
				t.Fatalf("parallel_tools.mjs printed %s: %v", out, err)
			}
			if len(r.Answers) != seeds*4 {
				t.Fatalf("%d answers, want %d", len(r.Answers), seeds*4)
			}
			for _, a := range r.Answers {
				var what, finish, content string
				json.Unmarshal(a[0], &what)
				json.Unmarshal(a[2], &finish)
				json.Unmarshal(a[3], &content)
				var calls []struct {
					ID       string
					Function struct{ Name, Arguments string }
				}
				if err := json.Unmarshal(a[1], &calls); err != nil {
					t.Fatalf("%s: tool_calls %s: %v", what, a[1], err)
				}
				one := strings.HasPrefix(what, "one")
				switch {
				case one && (len(calls) != 1 || finish != "tool_calls" || content != ""):
					t.Errorf("%s: %d calls, finish_reason %q, content %q with parallel_tool_calls false, want one call: %s", what, len(calls), finish, content, a[1])
				case !one && len(calls) > 1, !one && finish == "length" && (len(calls) > 0 || strings.Count(content, `"name"`) > 1):
					// (a call the limit cut off is dropped, not left in
					// the content: a cut answer with a call went on past it)
					unlimited++
				}
				for _, c := range calls {
					sch, ok := params[c.Function.Name]
					if !ok {
						t.Errorf("%s: called %q, not offered", what, c.Function.Name)
						continue
					}
					v, err := jsonschema.UnmarshalJSON(strings.NewReader(c.Function.Arguments))
					if err != nil {
						t.Errorf("%s: arguments %q do not parse: %v", what, c.Function.Arguments, err)
					} else if err := sch.Validate(v); err != nil {
						t.Errorf("%s: arguments %q do not validate: %v", what, c.Function.Arguments, err)
					}
				}
			}
		})
	}
	if unlimited == 0 {
		t.Error("without parallel_tool_calls no answer made more than one call: the test shows no limit")
	}
	t.Logf("%d answers without the limit made more than one call", unlimited)
}

// The structured-output helpers' npm packages, installed beside
// npmClients for TestServeZodClients (zod 4 and LangChain's OpenAI chat
// model; @langchain/openai brings its own openai 7 beside openai 6).
var npmHelpers = []string{"zod@4.1.12", "@langchain/core@1.4.0", "@langchain/openai@1.6.0"}

// TestServeZodClients is issue 33's helper test: zod 4's integers carry
// bounds of ±(2^53-1), which geist refused ("minimum must be a number
// within ±1e15"); the OpenAI SDK's chat.completions.parse with
// zodResponseFormat and LangChain's withStructuredOutput (json schema
// and function calling) now get answers their own zod schema parses.
func TestServeZodClients(t *testing.T) {
	if testing.Short() || daemontest.Emulated() {
		t.Skip("runs node and the npm clients: native only")
	}
	dir := npmDir(t, npmHelpers...)
	model := withTemplate(t, zoo.Path(t, "models", serveModel), zooTemplate(t, "Qwen-Qwen2.5-7B-Instruct"))
	addr, logs := serveHTTP(t, "-m", model, "--ctx", "2048")
	name := strings.TrimSuffix(filepath.Base(model), ".gguf")
	out := runNode(t, dir, 4*time.Minute, logs, "testdata/http/zod.mjs", "http://"+addr, name, "3")
	t.Logf("clients: %s", out)
	var r struct {
		OpenaiParse, LangchainJSONSchema, LangchainFunctionCalling []struct {
			Parsed *struct {
				Name  string
				Age   *int64
				Score *int64
				Tags  []string
			}
			Finish string
			Error  string
		}
		Schema json.RawMessage
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("zod.mjs printed %s: %v", out, err)
	}
	if !strings.Contains(string(r.Schema), "9007199254740991") {
		t.Errorf("zod's schema has no 2^53-1 bound: %s", r.Schema)
	}
	for what, set := range map[string]int{"openai parse": 0, "langchain jsonSchema": 1, "langchain functionCalling": 2} {
		list := [][]struct {
			Parsed *struct {
				Name  string
				Age   *int64
				Score *int64
				Tags  []string
			}
			Finish string
			Error  string
		}{r.OpenaiParse, r.LangchainJSONSchema, r.LangchainFunctionCalling}[set]
		if len(list) == 0 {
			t.Errorf("%s: no answers", what)
		}
		for i, a := range list {
			switch {
			case a.Error != "":
				t.Errorf("%s, seed %d: %s", what, i+1, a.Error)
			case a.Parsed == nil || a.Parsed.Age == nil || a.Parsed.Score == nil:
				t.Errorf("%s, seed %d: parsed %+v", what, i+1, a.Parsed)
			case *a.Parsed.Score < 0 || *a.Parsed.Score > 100 || len(a.Parsed.Tags) > 3:
				t.Errorf("%s, seed %d: outside the schema: %+v", what, i+1, *a.Parsed)
			}
		}
	}
}

// TestServeHALlamaCpp is issue 37's Home Assistant test: the llama_cpp
// integration's request sequence (testdata/http/ha_llama_cpp.mjs: the
// config flow's checks, a conversation of tool rounds streamed as HA reads
// them, up to its 10, a round not streamed, an AI Task with a strict
// json_schema plain and streamed, an image and a PDF attachment) through the npm
// openai client, on a model with Qwen 2.5's template: every call names an
// offered tool with arguments valid under its OpenAPI 3.1 schema, every
// AI Task answer validates against its structure, the image and the PDF
// are a 400 naming the model.
func TestServeHALlamaCpp(t *testing.T) {
	if testing.Short() || daemontest.Emulated() {
		t.Skip("runs node and the npm clients: native only")
	}
	dir := npmDir(t)
	model := withTemplate(t, zoo.Path(t, "models", serveModel), zooTemplate(t, "Qwen-Qwen2.5-7B-Instruct"))
	addr, logs := serveHTTP(t, "-m", model, "--ctx", "8192")
	out := runNode(t, dir, 4*time.Minute, logs, "testdata/http/ha_llama_cpp.mjs", "http://"+addr)
	t.Logf("client: %s", out)
	var r struct {
		Models        []string
		Validate      string
		StreamSupport bool
		Rounds        []struct {
			Calls  []string
			Args   []json.RawMessage
			Finish string
			Role   string
		}
		Messages int
		Plain    struct {
			Calls        []string
			Finish, Then string
			ThenRole     string
		}
		Tasks      []json.RawMessage
		Image, PDF string
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("ha_llama_cpp.mjs printed %s: %v", out, err)
	}
	name := strings.TrimSuffix(filepath.Base(model), ".gguf") + ":latest"
	if len(r.Models) != 1 || r.Models[0] != name || r.Validate != "length" || !r.StreamSupport {
		t.Errorf("config flow: models %v, validation finish %q, stream support %v", r.Models, r.Validate, r.StreamSupport)
	}
	compile := func(schema string) *jsonschema.Schema {
		c := jsonschema.NewCompiler()
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource("s.json", doc); err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile("s.json")
		if err != nil {
			t.Fatal(err)
		}
		return sch
	}
	params := map[string]*jsonschema.Schema{
		"HassTurnOn":     compile(`{"type":"object","properties":{"name":{"type":"string","maxLength":20},"area":{"type":"string","maxLength":20},"floor":{"type":"string","maxLength":20},"domain":{"type":"array","items":{"type":"string","enum":["light","switch","fan","cover"]},"maxItems":2},"device_class":{"type":"array","items":{"type":"string","enum":["outlet","switch","awning","blind"]},"maxItems":2}},"required":[]}`),
		"HassLightSet":   compile(`{"type":"object","properties":{"name":{"type":"string","maxLength":20},"area":{"type":["string","null"],"maxLength":20},"brightness":{"type":["integer","null"],"minimum":0,"maximum":100},"color":{"anyOf":[{"type":"string","maxLength":12},{"type":"null"}]}},"required":["brightness"]}`),
		"GetLiveContext": compile(`{"type":"object","properties":{},"required":[]}`),
	}
	if len(r.Rounds) != 10 {
		t.Errorf("%d rounds, want HA's 10 (9 with a call asked for, the last as HA asks)", len(r.Rounds))
	}
	for i, round := range r.Rounds {
		if i < 9 && (len(round.Calls) == 0 || round.Finish != "tool_calls") || round.Role != "assistant" {
			t.Errorf("round %d: calls %v, finish %q, role %q", i+1, round.Calls, round.Finish, round.Role)
		}
		for j, c := range round.Calls {
			sch, ok := params[c]
			if !ok {
				t.Errorf("round %d: called %q, not offered", i+1, c)
				continue
			}
			v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(round.Args[j])))
			if err == nil {
				err = sch.Validate(v)
			}
			if err != nil {
				t.Errorf("round %d: %s arguments %s: %v", i+1, c, round.Args[j], err)
			}
		}
	}
	if len(r.Plain.Calls) == 0 || r.Plain.Finish != "tool_calls" || r.Plain.Then == "" || r.Plain.ThenRole != "assistant" {
		t.Errorf("the round not streamed: %+v", r.Plain)
	}
	task := compile(`{"type":"object","properties":{"characters":{"type":"array","items":{"type":"string","maxLength":12},"maxItems":3},"mood":{"type":"string","enum":["happy","sad","calm"]},"count":{"type":["integer","null"],"minimum":0,"maximum":9}},"required":["characters","mood","count"],"additionalProperties":false}`)
	if len(r.Tasks) != 2 {
		t.Errorf("%d AI Task answers, want 2", len(r.Tasks))
	}
	for i, a := range r.Tasks {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(a)))
		if err == nil {
			err = task.Validate(v)
		}
		if err != nil {
			t.Errorf("AI Task %d: %s: %v", i, a, err)
		}
	}
	if !strings.HasPrefix(r.Image, "400 ") || !strings.Contains(r.Image, "geist runs "+name+", a text-only model") {
		t.Errorf("an image attachment: %s", r.Image)
	}
	if !strings.HasPrefix(r.PDF, "400 ") || !strings.Contains(r.PDF, "geist runs "+name+", a text-only model") {
		t.Errorf("a PDF attachment: %s", r.PDF)
	}
}
