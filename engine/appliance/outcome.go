package appliance

import "time"

// Piece is a piece of an answer, shaped once for every front end: its
// content (what is shown or spoken), its thinking (a reasoning model's
// <think> block, never spoken) and the tool calls completed with it
// (parsed out of the content when the request offered tools). Any may
// be empty, never all.
type Piece struct {
	Content  string
	Thinking string
	Calls    []ToolCall
}

// Sink receives a request's answer as it is generated, piece by piece (any
// split, even inside a UTF-8 sequence). It is called on the worker
// goroutine, never after the request's Ticket is done, and must return
// promptly: generation waits for it.
type Sink func(Piece)

// Usage are the statistics of one answer.
type Usage struct {
	PromptTokens    int
	GeneratedTokens int
	ThinkingTokens  int    // of GeneratedTokens, those inside the thinking block
	CachedTokens    int    // prompt tokens whose KV state was reused (memory or the prompt cache)
	RestoredTokens  int    // of CachedTokens, those restored from the prompt cache
	DroppedTurns    int    // oldest history messages left out to fit the context
	StopReason      string // "eos", "stop", "length", "context"
	Queued          time.Duration
	TTFT            time.Duration // from the start of generation to the first token
	Duration        time.Duration // of the generation (prefill and decoding)
	PrefillTokS     float64
	TokS            float64 // decoding speed
	// Speculative decoding: forward passes of the model while decoding,
	// those that verified drafted tokens (a token tree), drafted tokens
	// verified and accepted, the deepest accepted path, and each
	// drafter's counts.
	TargetPasses     int
	TreePasses       int
	Drafted          int
	Accepted         int
	MaxAcceptedDepth int
	Drafters         map[string]DrafterUsage
}

// EvaluatedTokens are the prompt tokens the model evaluated: those whose
// KV state was neither held nor restored (Ollama's prompt_eval_count).
func (u *Usage) EvaluatedTokens() int { return max(u.PromptTokens-u.CachedTokens, 0) }

// DrafterUsage counts one drafter's proposals: tokens verified, tokens
// accepted, passes that verified any of them.
type DrafterUsage struct {
	Drafted, Accepted, Steps int
}

// Outcome is how a request ended: the answer, or Err.
type Outcome struct {
	ID      string
	Source  Source
	Session string
	Text    string // the answer's content (on cancellation, what was generated so far)
	// Thinking is the answer's thinking block, apart from Text (empty
	// when the model did not think).
	Thinking string
	// Calls are the tool calls the answer made (when the request offered
	// tools), parsed out of Text in the model's form of them.
	Calls []ToolCall
	Usage Usage
	Err   *Error // nil on success
	// Warning, on success, says what went wrong beside the answer: the
	// answer is delivered all the same (CodeNotSaved: the conversation
	// does not remember it).
	Warning *Error
	// Replayed marks the stored outcome of an earlier request with the
	// same id, answered again from the dedup window.
	Replayed bool
}

// Ticket follows a submitted request.
type Ticket struct {
	ID      string // the request's id, assigned when it had none
	Source  Source
	Session string
	done    chan struct{}
	out     Outcome
}

func newTicket(r *Request) *Ticket {
	return &Ticket{ID: r.ID, Source: r.Source, Session: r.Session, done: make(chan struct{})}
}

// Done is closed when the outcome is known.
func (t *Ticket) Done() <-chan struct{} { return t.done }

// Outcome waits for the request to end and returns how.
func (t *Ticket) Outcome() Outcome {
	<-t.done
	return t.out
}

func (t *Ticket) complete(o Outcome) {
	t.out = o
	close(t.done)
}

// EventKind says what happened.
type EventKind int

// Kinds of events.
const (
	EventQueued   EventKind = iota + 1 // a request was accepted
	EventStarted                       // a request started generating
	EventFinished                      // a request ended (Outcome set)
	EventChanged                       // something else in the State changed
)

func (k EventKind) String() string {
	switch k {
	case EventQueued:
		return "queued"
	case EventStarted:
		return "started"
	case EventFinished:
		return "finished"
	case EventChanged:
		return "changed"
	}
	return "unknown"
}

// Event is a change the core reports to its watchers.
type Event struct {
	Kind    EventKind
	ID      string
	Source  Source
	Session string
	Outcome *Outcome // EventFinished
}

// State is a snapshot of the core.
type State struct {
	State   string   // "idle", "generating", "thinking" (an answer in its thinking block) or "stopping"
	Busy    bool     // a request is generating
	Queue   int      // requests waiting
	Running []string // ids of the requests generating
	// Stuck, when not empty, says that the worker has made no progress
	// for longer than Limits.StallTimeout, on which request: the
	// watchdog cancelled it (and, when it did not stop, answered it);
	// /readyz fails while it holds.
	Stuck   string
	Session string // the default (dashboard) conversation
	Model   string // Config.Model
	Version string // Config.Version
	Started time.Time
	// ModelLoad is Config.ModelLoad: how long loading the model took.
	ModelLoad time.Duration
	// Sessions is the number of conversations the session store holds
	// (-1 when the store cannot count them cheaply).
	Sessions int
	// Cache is the prompt cache's counters (nil: no prompt cache).
	Cache *CacheStats

	LastTokS       float64   // decoding speed of the last answer
	LastAnswered   time.Time // when the last answer finished (zero: none yet)
	AcceptanceRate float64   // accepted / drafted tokens, all answers
	CacheHitRate   float64   // cached / prompt tokens, all answers

	// Totals: answers; refusals (bad_request, too_long, busy);
	// cancellations (by a client, a button, Ctrl-C or shutdown: asked
	// for, so not failures); failures (timeout, internal); duplicates
	// (answered from the dedup window or refused as still running).
	Served, Refused, Cancelled, Failed, Duplicates int64
	// Requests counts outcomes by source and by outcome: "answered", or
	// an error code.
	Requests map[Source]map[string]int64

	PromptTokens, CachedTokens, GeneratedTokens, ThinkingTokens, Drafted, Accepted int64
	// RestoredTokens are the CachedTokens restored from the prompt cache
	// (the rest were held in memory).
	RestoredTokens int64
	// Speculative decoding, all answers: model passes while decoding,
	// those that verified a drafted tree, and each drafter's counts.
	TargetPasses, TreePasses int64
	Drafters                 map[string]DrafterUsage
	// Derived from them: tokens per model pass, the mean tree size and
	// accepted depth of the tree passes (0 when there were none).
	TokensPerPass, MeanTreeSize, MeanAcceptedDepth float64

	// Degraded names the parts that work less than configured, each with
	// why, in words safe to show to any client (no paths); nil when
	// everything works. See Part and Core.SetDegraded.
	Degraded map[Part]string
	// Links are the front ends' connections to the outside, by name
	// ("mqtt": the broker), as they report them (Core.SetLink).
	Links map[string]Link

	// Jobs are the running requests (with their progress), then the
	// queued ones.
	Jobs []JobState
}

// Link is the state of a front end's connection to something outside it,
// such as the MQTT broker.
type Link struct {
	Up     bool
	Since  time.Time // when it came up or went down
	Target string    // what it connects to (the broker URL)
	// While down: why, in a few words ("not authorised", "unreachable",
	// "connecting"), the same with the error, and the next attempt.
	Reason    string
	Detail    string
	NextRetry time.Time
}

// Part names a part of the appliance that can be degraded while the rest
// keeps serving.
type Part string

// The parts whose degradation the State reports.
const (
	// PartStorage: sessions.db could not be opened (conversations live
	// in memory until a restart) or the last session save failed (disk
	// full, write error) and no save has worked since.
	PartStorage Part = "storage"
	// PartBroker: an MQTT broker is configured but not connected.
	PartBroker Part = "broker"
	// PartGPIO: buttons or LEDs are configured but missing or unusable.
	PartGPIO Part = "gpio"
)
