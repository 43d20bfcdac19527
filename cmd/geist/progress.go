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
	p.draw(int64(done), int64(total), func() string {
		return fmt.Sprintf("reading the prompt %d/%d (%d%%)", done, total, 100*done/max(total, 1))
	})
}

// loading is engine.Options.OnLoadProgress: "loading the model 1.2 of
// 4.0 GiB (30%)", for a load that takes a while (a big file's weights
// being repacked).
func (p *promptLine) loading(done, total int64) {
	p.draw(done, total, func() string {
		return fmt.Sprintf("loading the model %.1f of %.1f GiB (%d%%)", float64(done)/(1<<30), float64(total)/(1<<30), 100*done/max(total, 1))
	})
}

// draw shows text() for done of total, clears the line once done reaches
// total, and keeps quiet before p.after and between redraws.
func (p *promptLine) draw(done, total int64, text func() string) {
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
	fmt.Fprint(p.w, "\r\033[K"+text())
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
