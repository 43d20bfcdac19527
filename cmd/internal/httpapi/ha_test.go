package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestHAStreamedToolCalls: streamed tool calls come as OpenAI streams
// them, one call per chunk (Home Assistant's llama_cpp integration reads
// only delta.tool_calls[0]): first its index, id, type, name and empty
// arguments, then its arguments under the same index; read the way Home
// Assistant's _transform_stream reads them, both calls come out whole.
func TestHAStreamedToolCalls(t *testing.T) {
	two := "<tool_call>\n{\"name\": \"HassTurnOn\", \"arguments\": {\"name\": \"Kitchen\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Köln\"}}\n</tool_call>"
	ts := newTestServer(t, scripted(two), nil)
	resp, out := ts.do(t, "POST", "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"x"}],"user":"01JCONVERSATION","stream":true,"max_tokens":150,"top_p":1,"temperature":0.6,"tools":`+toolTools+`}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	type call struct{ id, name, args string }
	var got []call
	var cur *call
	curIndex := -1
	finish := ""
	for _, line := range strings.Split(out, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					ToolCalls []map[string]any `json:"tool_calls"`
				}
				FinishReason *string `json:"finish_reason"`
			}
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		if len(c.Choices) == 0 {
			continue
		}
		ch := c.Choices[0]
		if ch.FinishReason != nil {
			finish = *ch.FinishReason
			if cur != nil {
				got = append(got, *cur)
			}
			break
		}
		if len(ch.Delta.ToolCalls) > 1 {
			t.Fatalf("a chunk with %d calls: %s", len(ch.Delta.ToolCalls), data)
		}
		if len(ch.Delta.ToolCalls) == 0 {
			continue
		}
		d := ch.Delta.ToolCalls[0]
		idx := int(d["index"].(float64))
		f, _ := d["function"].(map[string]any)
		args, _ := f["arguments"].(string)
		if cur != nil && idx == curIndex {
			if len(d) != 2 || f["name"] != nil {
				t.Errorf("an arguments chunk carries more than index and arguments: %s", data)
			}
			cur.args += args
			continue
		}
		if cur != nil {
			got = append(got, *cur)
		}
		if d["type"] != "function" || !strings.HasPrefix(d["id"].(string), "call_") || args != "" {
			t.Errorf("a call's first chunk: %s", data)
		}
		cur, curIndex = &call{id: d["id"].(string), name: f["name"].(string)}, idx
	}
	if finish != "tool_calls" || len(got) != 2 || got[0].name != "HassTurnOn" || got[0].args != `{"name": "Kitchen"}` ||
		got[1].name != "get_weather" || got[1].args != `{"city": "Köln"}` || got[0].id == got[1].id {
		t.Errorf("finish %q, calls %+v\n%s", finish, got, out)
	}
}

// TestHAToolRound: the second request of Home Assistant's tool round
// (the assistant's call with its arguments as a string, the result as a
// tool message naming only the call, its content {"data", "error"} JSON)
// is accepted and reaches the template with the tool's name.
func TestHAToolRound(t *testing.T) {
	ts := newTestServer(t, scripted("Done."), nil)
	body := `{"model":"tiny","user":"01JCONVERSATION","max_tokens":150,"top_p":1,"temperature":0.6,"tools":` + toolTools + `,"messages":[
		{"role":"system","content":"You control the home."},
		{"role":"user","content":"turn on the kitchen light"},
		{"role":"assistant","content":null,"tool_calls":[{"type":"function","id":"call_abc","function":{"arguments":"{\"name\": \"Kitchen\"}","name":"HassTurnOn"}}]},
		{"role":"tool","tool_call_id":"call_abc","content":"{\"data\": {\"speech\": {}, \"response_type\": \"action_done\", \"data\": {\"targets\": [], \"success\": [{\"name\": \"Kitchen\", \"type\": \"entity\", \"id\": \"light.kitchen\"}], \"failed\": []}}, \"error\": null}"}]}`
	resp, out := ts.do(t, "POST", "/v1/chat/completions", body)
	if resp.StatusCode != 200 || !strings.Contains(out, `"content":"Done."`) {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	reqs := ts.eng.Requests()
	msgs := reqs[len(reqs)-1].Messages
	if last := msgs[len(msgs)-1]; last.Role != "tool" || last.ToolName != "HassTurnOn" || !strings.HasPrefix(last.Content, `{"data": {"speech"`) {
		t.Errorf("the tool message reached the engine as %+v", last)
	}
}

// TestHAAttachmentsRefused: AI Task attachments (an image_url part, a PDF
// as Home Assistant's llama_cpp integration sends one: a text part
// "[File: NAME]\nContent: BASE64", an OpenAI file part) get a 400 that
// names the model geist runs and that it reads text only.
func TestHAAttachmentsRefused(t *testing.T) {
	ts := newTestServer(t, scripted("x"), nil)
	for what, part := range map[string]string{
		"image": `{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/4AAQ","detail":"auto"}}`,
		"PDF":   `{"type":"text","text":"[File: bill.pdf]\nContent: JVBERi0xLjcKJcfs"}`,
		"file":  `{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERi0x"}}`,
	} {
		resp, out := ts.do(t, "POST", "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":[{"type":"text","text":"Describe it"},`+part+`]}]}`)
		if resp.StatusCode != 400 || !strings.Contains(out, `geist runs tiny:latest, a text-only model`) || !strings.Contains(out, "messages[0].content[1]") {
			t.Errorf("%s: %d %s", what, resp.StatusCode, out)
		}
	}
	// Text that merely starts like a file is text.
	resp, out := ts.do(t, "POST", "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"[File: notes.txt]\nContent: buy milk"}]}`)
	if resp.StatusCode != 200 {
		t.Errorf("a text file: %d %s", resp.StatusCode, out)
	}
}
