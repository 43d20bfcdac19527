package wyoming

// The info event's parts that a conversation ("handle") service fills
// in, with the reference implementation's field names (wyoming/info.py).

// Attribution names who made an artifact and where it comes from.
type Attribution struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// Artifact is what every program and model of the info event has.
type Artifact struct {
	Name        string      `json:"name"`
	Attribution Attribution `json:"attribution"`
	Installed   bool        `json:"installed"`
	Description *string     `json:"description"`
	Version     *string     `json:"version"`
}

// HandleModel is a model of a handle program.
type HandleModel struct {
	Artifact
	// Languages the model answers in; empty: any (Home Assistant then
	// offers the agent for every language).
	Languages []string `json:"languages"`
}

// HandleProgram is a conversation service: text in, text out.
type HandleProgram struct {
	Artifact
	Models []HandleModel `json:"models"`
	// SupportsHandledStreaming: the answer also comes as handled-start,
	// handled-chunk… and handled-stop around the final handled event.
	SupportsHandledStreaming bool `json:"supports_handled_streaming"`
	// SupportsHomeControl: the service may act on the home itself; geist
	// only talks.
	SupportsHomeControl bool `json:"supports_home_control"`
}

// Info is the answer to describe. The lists of services geist does not
// offer are present and empty, as the reference implementation sends them.
type Info struct {
	ASR    []struct{}      `json:"asr"`
	TTS    []struct{}      `json:"tts"`
	Handle []HandleProgram `json:"handle"`
	Intent []struct{}      `json:"intent"`
	Wake   []struct{}      `json:"wake"`
	Mic    []struct{}      `json:"mic"`
	Snd    []struct{}      `json:"snd"`
}

// The data of the events the server reads and writes.
type (
	// transcript is a question (asr domain): the text and, from Home
	// Assistant, the conversation's context and the language.
	transcript struct {
		Text     *string        `json:"text"`
		Language string         `json:"language"`
		Context  map[string]any `json:"context"`
	}
	// handled, notHandled and handledStart carry the answer's context
	// for the next question.
	handled struct {
		Text    string         `json:"text"`
		Context map[string]any `json:"context,omitempty"`
	}
	handledStart struct {
		Context map[string]any `json:"context,omitempty"`
	}
	handledChunk struct {
		Text string `json:"text"`
	}
	ping struct {
		Text *string `json:"text"`
	}
)

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
