package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

// promptLine shows, on a terminal's stderr, how much of a long prompt the
// model has read ("reading the prompt 512/2519 (20%)"), one line redrawn
// in place, erased before the answer's first text: a prompt of thousands
// of tokens takes seconds on a PC and minutes on a Pi, which a blank
// terminal does not say. A nil *promptLine does nothing.
type promptLine struct {
	mu    sync.Mutex
	w     io.Writer
	after time.Duration // nothing for prompts read sooner than this
	start time.Time
	shown bool
	last  time.Time
}

// newPromptLine returns a promptLine writing to w when w is a terminal,
// else nil.
func newPromptLine(w io.Writer) *promptLine {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return &promptLine{w: w, after: promptLineAfter, start: time.Now()}
}

// A prompt read sooner than promptLineAfter shows no line, and the line
// is redrawn at most every promptLineEvery (the tests set both to 0).
var promptLineAfter, promptLineEvery = 300 * time.Millisecond, 100 * time.Millisecond

// update is engine.Request's and appliance.Request's OnPromptProgress.
func (p *promptLine) update(done, total int) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if done >= total {
		p.clearLocked()
		return
	}
	if now.Sub(p.start) < p.after || p.shown && now.Sub(p.last) < promptLineEvery {
		return
	}
	fmt.Fprintf(p.w, "\r\033[Kreading the prompt %d/%d (%d%%)", done, total, 100*done/max(total, 1))
	p.shown, p.last = true, now
}

// clear erases the line (before the answer's text, or at its end).
func (p *promptLine) clear() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
}

func (p *promptLine) clearLocked() {
	if p.shown {
		io.WriteString(p.w, "\r\033[K")
		p.shown = false
	}
}
