package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/zoo"
)

// vocabTemplate reads a vocab file's chat template ("" when it has none)
// and the texts of its BOS and EOS tokens.
func vocabTemplate(t *testing.T, path string) (src, bos, eos string) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	src, _ = f.String("tokenizer.chat_template")
	v, ok := f.Value("tokenizer.ggml.tokens")
	if !ok {
		t.Fatalf("%s: no tokenizer.ggml.tokens", path)
	}
	tokens, ok := v.([]string)
	if !ok {
		t.Fatalf("%s: tokenizer.ggml.tokens is %T, want []string", path, v)
	}
	text := func(key string) string {
		id, ok := f.Int(key)
		if !ok {
			return ""
		}
		if id < 0 || id >= int64(len(tokens)) {
			t.Fatalf("%s: %s = %d is outside the vocabulary of %d", path, key, id, len(tokens))
		}
		return tokens[id]
	}
	return src, text("tokenizer.ggml.bos_token_id"), text("tokenizer.ggml.eos_token_id")
}

func TestGoldenVocabTemplates(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(zoo.Path(t, "golden", "tokenize-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden/tokenize-*.json in the zoo")
	}
	sort.Strings(files)
	sum, all := 0, 0
	for _, file := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(file), "tokenize-"), ".json")
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var g struct {
			ChatTemplate []struct {
				Messages            []goldenMessage `json:"messages"`
				AddGenerationPrompt bool            `json:"add_generation_prompt"`
				Prompt              string          `json:"prompt"`
			} `json:"chat_template"`
		}
		if err := json.Unmarshal(raw, &g); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(g.ChatTemplate) == 0 {
			continue
		}
		src, bos, eos := vocabTemplate(t, zoo.Path(t, "vocab", "ggml-vocab-"+name+".gguf"))
		kind := "own template"
		if src == "" {
			kind = "ChatML fallback"
		}
		tmpl, err := Compile(src) // "" compiles ChatML
		if err != nil {
			t.Errorf("%s (%s): %v", name, kind, err)
			continue
		}
		pass := 0
		for i, c := range g.ChatTemplate {
			got, err := tmpl.Render(toMessages(c.Messages), Options{AddGenerationPrompt: c.AddGenerationPrompt, BOS: bos, EOS: eos})
			switch {
			case err != nil:
				t.Errorf("%s (%s) case %d: %v", name, kind, i, err)
			case got != c.Prompt:
				t.Errorf("%s (%s) case %d: %s", name, kind, i, firstDiff(got, c.Prompt))
			default:
				pass++
			}
		}
		t.Logf("%-16s %-16s %d/%d", name, kind, pass, len(g.ChatTemplate))
		sum += pass
		all += len(g.ChatTemplate)
	}
	t.Logf("tokenize-*.json chat_template: %d/%d cases pass", sum, all)
}

// TestFamilyFileTemplates: the template each family file of the zoo's
// new/ carries is, byte for byte, the reference template of its family in
// chat-templates.json, so TestGoldenChatTemplates (llama.cpp's renderings)
// and TestToolTemplatesMatchJinja2 (tools: Qwen3, Granite 3.3, LFM2.5,
// Gemma 4) check what geist renders for these files; and the file's
// template compiles and says whether it takes tools.
func TestFamilyFileTemplates(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(zoo.Path(t, "golden", "chat-templates.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Templates map[string]string `json:"templates"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		fam, template string
		tools         bool
		format        ToolFormat
	}{
		{"gemma3", "google-gemma-3-1b-it", false, ToolsAny},
		{"qwen3moe", "Qwen-Qwen3-0.6B", true, ToolsTagged},
		{"phi3", "microsoft-Phi-4-mini-instruct", true, ToolsPhi4}, // tools ride in the system message's "tools" string
		{"granite", "ibm-granite-granite-3.3-2B-Instruct", true, ToolsGranite},
		{"smollm3", "HuggingFaceTB-SmolLM3-3B", true, ToolsTagged}, // no tools in this template: the block goes into the system message
		{"lfm2", "LFM2.5-Instruct", true, ToolsLFM2},
		{"gemma4", "google-gemma-4-31B-it", true, ToolsGemma4},
		{"granitehybrid", "ibm-granite-granite-3.3-2B-Instruct", true, ToolsGranite}, // new2/: Granite 4.0-H serves Granite 3.3's template
	} {
		dir := "new"
		if c.fam == "granitehybrid" {
			dir = "new2"
		}
		src, _, _ := vocabTemplate(t, zoo.Path(t, dir, "models", "tiny-"+c.fam+"-F16.gguf"))
		if want, ok := g.Templates[c.template]; !ok || src != want {
			t.Errorf("tiny-%s: its template is not %s of chat-templates.json (%d bytes, the reference %d)", c.fam, c.template, len(src), len(want))
			continue
		}
		tmpl, err := Compile(src)
		if err != nil {
			t.Errorf("tiny-%s: %v", c.fam, err)
			continue
		}
		if tmpl.SupportsTools() != c.tools {
			t.Errorf("tiny-%s: SupportsTools %v, want %v", c.fam, tmpl.SupportsTools(), c.tools)
		}
		if tmpl.ToolFormat() != c.format {
			t.Errorf("tiny-%s: ToolFormat %v, want %v", c.fam, tmpl.ToolFormat(), c.format)
		}
		if c.fam == "granitehybrid" && tmpl.ThinkMarks() != ThinkTags {
			t.Errorf("tiny-%s: ThinkMarks %v, want <think>", c.fam, tmpl.ThinkMarks())
		}
	}
}
