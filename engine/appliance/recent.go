package appliance

import (
	"slices"
	"sync/atomic"
	"time"
)

// The status page's view of the core: the last finished requests (a
// ring), and the requests queued and running with their progress.

// recentSize is how many finished requests Recent keeps.
const recentSize = 64

// Bounds of the texts a record keeps (Config.RecentText).
const (
	recentQuestionMax = 2 << 10
	recentAnswerMax   = 4 << 10
)

// RequestRecord is one finished request.
type RequestRecord struct {
	ID       string
	Source   Source
	Session  string
	Outcome  string // "answered", or the error code
	Finished time.Time
	Usage    Usage // without Drafters
	// Question and Answer (each cut to a few KiB) are kept only with
	// Config.RecentText.
	Question, Answer string
}

// JobState is a request queued or running, in Snapshot's Jobs.
type JobState struct {
	ID      string
	Source  Source
	Session string
	State   string // "queued" or "running"
	Queued  time.Time
	Started time.Time // running: when generation started
	// Tokens generated so far, and when the first came (zero before).
	Tokens     int64
	FirstToken time.Time
	// PromptDone of PromptTotal prompt tokens are read (running; 0 of 0
	// before the engine starts on the prompt).
	PromptDone, PromptTotal int
}

// progress counts a running job's tokens; the engine's OnToken feeds it,
// and with OnPrefill the time of the last progress (the watchdog's).
type progress struct {
	tokens   atomic.Int64
	firstTok atomic.Int64 // UnixNano of the first token
	last     atomic.Int64 // UnixNano of the last token or prefill pass
	thinking atomic.Bool  // the answer is inside its thinking block
	// The prompt's tokens in the state and its length, while and after
	// the engine reads it (engine.Request.OnPromptProgress).
	promptDone, promptTotal atomic.Int64
}

// prompt records the prefill's progress: done of total prompt tokens.
func (p *progress) prompt(done, total int) {
	p.promptDone.Store(int64(done))
	p.promptTotal.Store(int64(total))
	p.beat()
}

func (p *progress) token() {
	now := time.Now().UnixNano()
	p.last.Store(now)
	if p.tokens.Add(1) == 1 {
		p.firstTok.Store(now)
	}
}

// beat records progress other than a token: a prefill pass.
func (p *progress) beat() { p.last.Store(time.Now().UnixNano()) }

// since is the time since the job's last progress, or since start.
func (p *progress) since(start, now time.Time) time.Duration {
	t := start
	if l := p.last.Load(); l != 0 && l > start.UnixNano() {
		t = time.Unix(0, l)
	}
	return now.Sub(t)
}

// recentRing holds the last recentSize records; Core.mu guards it.
type recentRing struct {
	recs []RequestRecord
	next int
}

func (r *recentRing) add(rec RequestRecord) {
	if len(r.recs) < recentSize {
		r.recs = append(r.recs, rec)
		return
	}
	r.recs[r.next] = rec
	r.next = (r.next + 1) % recentSize
}

// newestFirst returns up to n records, the newest first.
func (r *recentRing) newestFirst(n int) []RequestRecord {
	out := make([]RequestRecord, 0, min(n, len(r.recs)))
	for i := range len(r.recs) {
		if len(out) == n {
			break
		}
		k := (r.next - 1 - i + 2*len(r.recs)) % len(r.recs)
		out = append(out, r.recs[k])
	}
	return out
}

// record makes j's record; with text, its question and answer.
func record(j *job, o *Outcome, now time.Time, text bool) RequestRecord {
	rec := RequestRecord{ID: j.req.ID, Source: j.req.Source, Session: j.req.Session, Outcome: "answered", Finished: now, Usage: o.Usage}
	rec.Usage.Drafters = nil
	if o.Err != nil {
		rec.Outcome = string(o.Err.Code)
	}
	if text {
		q := j.req.Text
		for _, m := range slices.Backward(j.req.Messages) {
			if m.Role == "user" {
				q = m.Content
				break
			}
		}
		rec.Question, rec.Answer = cut(q, recentQuestionMax), cut(o.Text, recentAnswerMax)
	}
	return rec
}

// cut shortens s to at most n bytes at a character boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// Recent returns up to n of the last finished requests, the newest
// first (at most 64 are kept).
func (c *Core) Recent(n int) []RequestRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recent.newestFirst(n)
}

// jobsLocked lists the running and the queued requests, in that order.
func (c *Core) jobsLocked() []JobState {
	var js []JobState
	add := func(j *job, state string) {
		s := JobState{ID: j.req.ID, Source: j.req.Source, Session: j.req.Session, State: state, Queued: j.queued}
		if state == "running" {
			s.Started = j.started
			s.Tokens = j.progress.tokens.Load()
			s.PromptDone, s.PromptTotal = int(j.progress.promptDone.Load()), int(j.progress.promptTotal.Load())
			if t := j.progress.firstTok.Load(); t != 0 {
				s.FirstToken = time.Unix(0, t)
			}
		}
		js = append(js, s)
	}
	for _, j := range c.running {
		add(j, "running")
	}
	for _, j := range c.queue {
		if j.do == nil {
			add(j, "queued")
		}
	}
	return js
}
