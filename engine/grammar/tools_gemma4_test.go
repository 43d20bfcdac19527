package grammar

import (
	"encoding/json"
	"strings"
	"testing"
)

// haTools are Home Assistant's kind of tools: bounded strings, an
// integer range, required and optional properties, and one without
// parameters.
var haTools = []json.RawMessage{
	json.RawMessage(`{"type": "function", "function": {"name": "HassTurnOn", "description": "Turns on a device", "parameters": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "area": {"type": "string", "maxLength": 20}}, "required": ["name"]}}}`),
	json.RawMessage(`{"type": "function", "function": {"name": "HassLightSet", "parameters": {"type": "object", "properties": {"name": {"type": "string"}, "brightness": {"type": "integer", "minimum": 0, "maximum": 100}, "color": {"enum": ["red", "warm white"]}, "on": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3}, "extra": {"type": "object", "properties": {"fade": {"type": "number"}, "odd key": {"type": "null"}}}}, "required": ["brightness"]}}}`),
	json.RawMessage(`{"type": "function", "function": {"name": "GetTime"}}`),
	json.RawMessage(`{"type": "function", "function": {"name": "Note", "parameters": {"properties": {"text": {"type": "string"}, "any": {}}, "additionalProperties": {"type": "integer"}}}}`),
}

func TestGemma4ToolCallsGrammar(t *testing.T) {
	t.Parallel()
	call := func(s string) string { return "<|tool_call>call:" + s + "<tool_call|>" }
	src, trigger, err := ToolCalls(haTools, "", ToolsGemma4, false)
	if err != nil {
		t.Fatal(err)
	}
	if trigger != "" {
		t.Errorf("trigger %q without lazy", trigger)
	}
	g, err := Parse(src)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	for _, s := range []string{
		call(`HassTurnOn{name:<|"|>Kitchen<|"|>}`),
		call(`HassTurnOn{area:<|"|>Küche ☀<|"|>,name:<|"|>Kitchen<|"|>}`),
		call(`HassTurnOn{name:<|"|><|"|>}`),
		call(`HassLightSet{brightness:0}`),
		call(`HassLightSet{brightness:100,color:<|"|>warm white<|"|>,extra:{fade:-0.5e3,odd key:null},name:<|"|>a < b, {c}: "d" \ e<|"|>,on:false,tags:[<|"|>x<|"|>,<|"|><|"|>]}`),
		call(`HassLightSet{brightness:7,name:<|"|>line
break<tool_call|><|"|>}`),
		call(`HassTurnOn{area:<|"|>Flur<|"|>,name:<|"|>Licht<|"|>}`),
		call(`GetTime{}`),
		call(`Note{}`),
		call(`Note{text:<|"|>t<|"|>,any:[1,{k:<|"|>v<|"|>},null,true],n:3,m:-2}`),
		call(`GetTime{}`) + call(`HassTurnOn{name:<|"|>x<|"|>}`),
	} {
		if !accepts(t, g, s) {
			t.Errorf("refused %s", s)
		}
	}
	for _, s := range []string{
		``,
		`<|tool_call>call:GetTime{}`,
		call(`GetTime{} `),
		call(`GetTime{ }`),
		call(`Launch{}`),
		call(`HassTurnOn{}`), // name is required
		call(`HassTurnOn{name:<|"|>123456789012345678901<|"|>}`), // maxLength 20
		call(`HassTurnOn{name:"Kitchen"}`),                       // JSON's quotes
		call(`HassTurnOn{"name":<|"|>Kitchen<|"|>}`),
		call(`HassTurnOn{name: <|"|>Kitchen<|"|>}`),
		call(`HassTurnOn{name:<|"|>Kitchen<|"|>,other:1}`),
		call(`HassTurnOn{name:<|"|>Licht<|"|>,area:<|"|>Flur<|"|>}`), // keys sorted, as the template writes them
		call(`HassTurnOn{area:<|"|>Flur<|"|>}`),
		call(`HassTurnOn{area:<|"|>Flur<|"|>,,name:<|"|>Licht<|"|>}`),
		call(`HassLightSet{brightness:101}`),
		call(`HassLightSet{brightness:5,color:<|"|>blue<|"|>}`),
		call(`HassLightSet{brightness:5,tags:[<|"|>a<|"|>,<|"|>b<|"|>,<|"|>c<|"|>,<|"|>d<|"|>]}`),
		call(`HassLightSet{brightness:5,name:<|"|>a<|tool_call>b<|"|>}`), // a string never holds <|
		call(`Note{n:<|"|>x<|"|>}`),
		`{"name": "GetTime", "arguments": {}}`,
	} {
		if accepts(t, g, s) {
			t.Errorf("accepted %s", s)
		}
	}

	// Lazy: from after the trigger, calls may follow each other.
	src, trigger, err = ToolCalls(haTools, "", ToolsGemma4, true)
	if err != nil || trigger != "<|tool_call>" {
		t.Fatalf("lazy: trigger %q, %v", trigger, err)
	}
	lazy := mustParse(t, src)
	for s, want := range map[string]bool{
		`call:GetTime{}<tool_call|>`:                           true,
		`call:GetTime{}<tool_call|>` + call(`GetTime{}`):       true,
		`<|tool_call>call:GetTime{}<tool_call|>`:               false,
		`call:HassLightSet{brightness:-1}<tool_call|>`:         false,
		`call:HassTurnOn{name:<|"|>x<|"|>}<tool_call|> thanks`: false,
	} {
		if accepts(t, lazy, s) != want {
			t.Errorf("lazy: %s: accepted %v, want %v", s, !want, want)
		}
	}

	// Named and one.
	src, _, err = ToolCalls(haTools, "HassLightSet", ToolsGemma4, false)
	if err != nil {
		t.Fatal(err)
	}
	named := mustParse(t, src)
	if !accepts(t, named, call(`HassLightSet{brightness:3}`)) || accepts(t, named, call(`GetTime{}`)) {
		t.Errorf("named: HassLightSet refused or GetTime accepted")
	}
	src, _, err = OneToolCall(haTools, "", ToolsGemma4, false)
	if err != nil {
		t.Fatal(err)
	}
	one := mustParse(t, src)
	if !accepts(t, one, call(`GetTime{}`)) || accepts(t, one, call(`GetTime{}`)+call(`GetTime{}`)) {
		t.Errorf("one: one call refused or two accepted")
	}
}

func mustParse(t *testing.T, src string) *Grammar {
	t.Helper()
	g, err := Parse(src)
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	return g
}

func TestGemma4ToolCallsErrors(t *testing.T) {
	t.Parallel()
	tool := func(name, params string) []json.RawMessage {
		return []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "` + name + `", "parameters": ` + params + `}}`)}
	}
	for _, c := range []struct {
		tools []json.RawMessage
		only  string
		want  string
	}{
		{tool("f", `{"type": "object", "properties": {"s": {"type": "string", "pattern": "^a+$"}}}`), "", "pattern"},
		{tool("f", `{"type": "string"}`), "", "want an object schema"},
		{tool("f", `{"$ref": "#/$defs/x", "$defs": {"x": {"type": "object"}}}`), "", "$ref"},
		{tool("f", `{"type": "object", "properties": {"s": {"const": "a<|\"|>b"}}}`), "", "quote"},
		{tool("f", `{"type": "object", "properties": {"a<|\"|>b": {"type": "integer"}}}`), "", "quote"},
		{tool("two words", `{}`), "", "cannot be written"},
		{tool("f", `{}`), "g", "not among the tools"},
		{tool("f", `{"type": "object", "properties": {"s": {"type": "string", "maxLength": 100000}}}`), "", "lengths up to"},
	} {
		_, _, err := ToolCalls(c.tools, c.only, ToolsGemma4, false)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.tools[0], err, c.want)
		}
	}
	// Keys a bare key cannot write are quoted; refs resolve inside each
	// tool's own schema even when two tools name the same definition.
	two := []json.RawMessage{
		json.RawMessage(`{"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {"x": {"$ref": "#/$defs/v"}, "k:1": {"type": "boolean"}}, "$defs": {"v": {"type": "integer"}}}}}`),
		json.RawMessage(`{"type": "function", "function": {"name": "b", "parameters": {"type": "object", "properties": {"x": {"$ref": "#/$defs/v"}}, "$defs": {"v": {"type": "string"}}}}}`),
	}
	src, _, err := ToolCalls(two, "", ToolsGemma4, false)
	if err != nil {
		t.Fatal(err)
	}
	g := mustParse(t, src)
	for s, want := range map[string]bool{
		`<|tool_call>call:a{<|"|>k:1<|"|>:true,x:3}<tool_call|>`: true,
		`<|tool_call>call:a{k:1:true}<tool_call|>`:               false,
		`<|tool_call>call:a{x:<|"|>3<|"|>}<tool_call|>`:          false,
		`<|tool_call>call:b{x:<|"|>3<|"|>}<tool_call|>`:          true,
		`<|tool_call>call:b{x:3}<tool_call|>`:                    false,
	} {
		if accepts(t, g, s) != want {
			t.Errorf("%s: accepted %v, want %v", s, !want, want)
		}
	}
}
