package appliance

import "github.com/geisten/geist/engine/chat"

// Conversation is one exchange of a stored conversation, as every path
// renders and saves it (the core's requests from every front end and
// geist chat, geist run --session): the system message in force, the
// history within the store's bounds, and how the exchange is saved.
type Conversation struct {
	store SessionStore
	id    string
	// System is the system message in force ("" : none); History the
	// conversation's messages before the exchange, oldest first.
	System  string
	History []Message
	keep    bool // System is the exchange's own, not the stored one: Save stores it
}

// OpenConversation loads conversation id of store for an exchange whose
// system message is system: the exchange's own, which replaces the
// conversation's from now on; "" keeps the conversation's, or, when it
// has none, takes def (the configured default, which is not stored).
// With id "" the exchange is stateless: no history, and Save keeps
// nothing.
func OpenConversation(store SessionStore, id, system, def string) (*Conversation, error) {
	c := &Conversation{store: store, id: id, System: system}
	var stored string
	var has bool
	if id != "" {
		h, err := store.Load(id)
		if err != nil {
			return nil, err
		}
		stored, has, c.History = SplitSystem(h)
	}
	switch {
	case system == "" && has:
		c.System = stored
	case system == "":
		c.System = def
	case id != "" && system != stored:
		c.keep = true
	}
	return c, nil
}

// Messages returns the exchange's chat: the system message, the history
// and turn (the exchange's own messages, of which the first earlier
// may be left out too: a stateless client's whole conversation), and
// how many of them, after the system message, are history the engine
// may leave out, oldest first, when the prompt does not fit.
func (c *Conversation) Messages(turn []Message, earlier int) ([]chat.Message, int) {
	msgs := make([]chat.Message, 0, 1+len(c.History)+len(turn))
	if c.System != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: c.System})
	}
	for _, m := range c.History {
		msgs = append(msgs, chatMessage(m))
	}
	for _, m := range turn {
		msgs = append(msgs, chatMessage(m))
	}
	return msgs, len(c.History) + max(min(earlier, len(turn)-1), 0)
}

// Save appends turn and the answer to the conversation, and the
// exchange's system message when it replaced the stored one.
func (c *Conversation) Save(turn []Message, answer Message) error {
	if c.id == "" {
		return nil
	}
	msgs := make([]Message, 0, len(turn)+2)
	if c.keep {
		msgs = append(msgs, Message{Role: "system", Content: c.System})
	}
	msgs = append(append(msgs, turn...), answer)
	return c.store.Append(c.id, msgs...)
}

func chatMessage(m Message) chat.Message {
	cm := chat.Message{Role: m.Role, Content: m.Content, ToolName: m.ToolName, ToolCallID: m.ToolCallID}
	for _, c := range m.ToolCalls {
		cm.ToolCalls = append(cm.ToolCalls, chat.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	return cm
}
