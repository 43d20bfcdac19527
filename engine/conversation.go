package engine

import (
	"bytes"

	"github.com/geisten/geist/engine/chat"
)

// ModelID is the identity under which the engine files its entries in
// Options.Cache (the model argument of PromptCache): the model file's
// header and the KV type.
func (e *Engine) ModelID() []byte { return bytes.Clone(e.id) }

// ConversationPrefix returns the tokens with which every prompt of a
// conversation that starts with msgs begins: msgs rendered through the
// chat template without a generation prompt, tokenized as generation
// does, less the last token (the text that follows may merge with it). A
// prompt cache drops what the engine stored for that conversation by
// this prefix. It waits for the engine's background writes to the cache
// first, so that none lands after the caller deleted. Like Generate, it
// must not run concurrently with other calls of the engine.
func (e *Engine) ConversationPrefix(msgs []chat.Message) ([]int32, error) {
	e.waitSnapshots()
	e.setup.Lock() // batched mode: beside the requests' own renders
	defer e.setup.Unlock()
	text, err := e.renderMessages(&Request{}, msgs, false)
	if err != nil {
		return nil, err
	}
	toks := e.encode(text)
	if len(toks) == 0 {
		return nil, nil
	}
	return toks[:len(toks)-1], nil
}
