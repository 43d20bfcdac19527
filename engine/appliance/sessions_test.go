package appliance

import (
	"testing"
)

func TestMemorySessions(t *testing.T) {
	m := NewMemorySessions(2, 3)
	m.Append("a", Message{Role: "user", Content: "1"}, Message{Role: "assistant", Content: "2"})
	m.Append("a", Message{Role: "user", Content: "3"}, Message{Role: "assistant", Content: "4"})
	h, _ := m.Load("a")
	if len(h) != 3 || h[0].Content != "2" {
		t.Errorf("history %v", h)
	}
	m.Append("b", Message{Role: "user", Content: "x"})
	m.Load("a")
	m.Append("c", Message{Role: "user", Content: "y"}) // evicts b, the least recently used
	if h, _ := m.Load("b"); h != nil {
		t.Errorf("b kept: %v", h)
	}
	if h, _ := m.Load("a"); len(h) != 3 {
		t.Errorf("a lost: %v", h)
	}
	if none := NewMemorySessions(2, 0); none.Append("x", Message{Role: "user", Content: "1"}) != nil {
		t.Error("append")
	} else if h, _ := none.Load("x"); len(h) != 0 {
		t.Errorf("max history 0 kept %v", h)
	}
}
