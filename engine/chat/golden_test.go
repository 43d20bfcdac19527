package chat

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/geisten/geist/engine/zoo"
)

type goldenMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func toMessages(gm []goldenMessage) []Message {
	ms := make([]Message, len(gm))
	for i, m := range gm {
		ms[i] = Message{Role: m.Role, Content: m.Content}
	}
	return ms
}

// firstDiff describes where got and want first differ.
func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(i-40, 0)
	return fmt.Sprintf("first difference at byte %d (got %d bytes, want %d)\n  got:  %q\n  want: %q",
		i, len(got), len(want), got[lo:min(i+40, len(got))], want[lo:min(i+40, len(want))])
}

func TestGoldenChatTemplates(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(zoo.Path(t, "golden", "chat-templates.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Templates map[string]string `json:"templates"`
		Cases     []struct {
			TemplateName        string          `json:"template_name"`
			Messages            []goldenMessage `json:"messages"`
			AddGenerationPrompt bool            `json:"add_generation_prompt"`
			BOS                 string          `json:"bos_token"`
			EOS                 string          `json:"eos_token"`
			Date                string          `json:"date"`
			Prompt              string          `json:"prompt"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) == 0 {
		t.Fatal("no cases in chat-templates.json")
	}
	compiled := map[string]*Template{}
	for name, src := range g.Templates {
		tmpl, err := Compile(src)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		compiled[name] = tmpl
	}
	pass, total := map[string]int{}, map[string]int{}
	for i, c := range g.Cases {
		total[c.TemplateName]++
		tmpl := compiled[c.TemplateName]
		if tmpl == nil {
			continue
		}
		opt := Options{AddGenerationPrompt: c.AddGenerationPrompt, BOS: c.BOS, EOS: c.EOS}
		if c.Date != "" {
			d, err := time.Parse("2006-01-02", c.Date)
			if err != nil {
				t.Fatalf("case %d: date %q: %v", i, c.Date, err)
			}
			opt.Now = d
		}
		got, err := tmpl.Render(toMessages(c.Messages), opt)
		if err != nil {
			t.Errorf("case %d (%s): %v", i, c.TemplateName, err)
			continue
		}
		if got != c.Prompt {
			t.Errorf("case %d (%s): %s", i, c.TemplateName, firstDiff(got, c.Prompt))
			continue
		}
		pass[c.TemplateName]++
	}
	names := make([]string, 0, len(total))
	for n := range total {
		names = append(names, n)
	}
	sort.Strings(names)
	sum := 0
	for _, n := range names {
		t.Logf("%-45s %d/%d", n, pass[n], total[n])
		sum += pass[n]
	}
	t.Logf("chat-templates.json: %d/%d cases pass", sum, len(g.Cases))
}
