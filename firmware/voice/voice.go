// Package voice is speech on the device itself: push-to-talk (record
// while a button is held, transcribe with a speech-to-text program, ask the
// transcript) and speech out (answers piped sentence by sentence to a
// text-to-speech program, with a queue that a cancel empties).
//
// Every program is external and named in the configuration as an argument
// list (no shell): arecord, whisper.cpp's whisper-cli, espeak-ng, piper,
// aplay. geist itself stays one static binary.
package voice

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
)

// Config is the voice section of the daemon's configuration; a nil part
// is off.
type Config struct {
	Talk   *TalkConfig    `json:"talk,omitempty" yaml:"talk,omitempty" toml:"talk,omitempty"`
	Speech *SpeakerConfig `json:"speech,omitempty" yaml:"speech,omitempty" toml:"speech,omitempty"`
}

// Placeholders replaced in command arguments.
const (
	FilePlaceholder = "{file}" // the recording (capture and speech-to-text)
	TextPlaceholder = "{text}" // the sentence (speech out; else it goes to stdin)
)

// expand replaces placeholder in every argument of argv with value and
// reports whether it occurred.
func expand(argv []string, placeholder, value string) ([]string, bool) {
	out := make([]string, len(argv))
	found := false
	for i, a := range argv {
		if strings.Contains(a, placeholder) {
			found = true
			a = strings.ReplaceAll(a, placeholder, value)
		}
		out[i] = a
	}
	return out, found
}

func checkArgv(what string, argv []string) error {
	if len(argv) == 0 || argv[0] == "" {
		return fmt.Errorf("voice: no %s command", what)
	}
	return nil
}

// tailBuffer keeps the last max bytes written (stderr for error messages).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(strings.Fields(string(bytes.ToValidUTF8(t.b, nil))), " ")
}

// limitBuffer keeps the first max bytes and reports overflow.
type limitBuffer struct {
	max  int
	b    bytes.Buffer
	over bool
}

func (l *limitBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); len(p) > room {
		l.b.Write(p[:max(room, 0)])
		l.over = true
		return len(p), nil
	}
	return l.b.Write(p)
}

// runErr describes a failed program with the tail of its stderr.
func runErr(what string, err error, stderr *tailBuffer) error {
	if s := stderr.String(); s != "" {
		return fmt.Errorf("voice: %s: %w: %s", what, err, s)
	}
	return fmt.Errorf("voice: %s: %w", what, err)
}
