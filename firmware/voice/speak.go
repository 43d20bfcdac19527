package voice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/geisten/geist/engine/appliance/sentence"
)

// SpeakerConfig names the text-to-speech program.
type SpeakerConfig struct {
	// Command speaks one sentence, e.g. ["espeak-ng", "-v", "en"] (text on
	// stdin) or ["espeak-ng", "{text}"] (text as an argument).
	Command []string `json:"command" yaml:"command" toml:"command"`
	// Play, when set, receives Command's stdout on its stdin, e.g. piper
	// ["piper", "-m", "voice.onnx", "--output-raw"] into
	// ["aplay", "-q", "-r", "22050", "-f", "S16_LE", "-t", "raw"].
	Play []string `json:"play,omitempty" yaml:"play,omitempty" toml:"play,omitempty"`
	// Timeout bounds one sentence (default 60s).
	Timeout time.Duration `json:"timeout,omitempty" yaml:"timeout,omitempty" toml:"timeout,omitempty"`
	// Queue bounds the sentences waiting to be spoken (default 64); more
	// are dropped, with a log line.
	Queue int `json:"queue,omitempty" yaml:"queue,omitempty" toml:"queue,omitempty"`
}

// Speaker speaks queued sentences one at a time, in order. Cancel kills the
// sentence being spoken and drops the queue and every open Stream. Methods
// are safe for concurrent use; Run does the speaking.
type Speaker struct {
	cfg SpeakerConfig
	log *slog.Logger

	mu      sync.Mutex
	queue   []string
	epoch   int                // bumped by Cancel; older streams are dead
	stopCur context.CancelFunc // cancels the sentence being spoken
	busy    bool
	idle    chan struct{} // closed and replaced when the queue drains
	wake    chan struct{}
}

// NewSpeaker checks cfg and returns a Speaker; call Run to speak.
func NewSpeaker(cfg SpeakerConfig, log *slog.Logger) (*Speaker, error) {
	if err := checkArgv("speech", cfg.Command); err != nil {
		return nil, err
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Minute
	}
	if cfg.Queue <= 0 {
		cfg.Queue = 64
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Speaker{cfg: cfg, log: log, idle: make(chan struct{}), wake: make(chan struct{}, 1)}, nil
}

// Say queues text (split into sentences).
func (s *Speaker) Say(text string) {
	s.mu.Lock()
	e := s.epoch
	s.mu.Unlock()
	s.enqueue(e, sentence.Split(text)...)
}

func (s *Speaker) enqueue(epoch int, sentences ...string) {
	if len(sentences) == 0 {
		return
	}
	s.mu.Lock()
	if epoch != s.epoch {
		s.mu.Unlock()
		return
	}
	for _, t := range sentences {
		if len(s.queue) >= s.cfg.Queue {
			s.log.Warn("speech: queue full, sentence dropped", "sentence", t)
			continue
		}
		s.queue = append(s.queue, t)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Cancel stops speaking now: the current sentence's program is killed,
// the queue is dropped, and open Streams are ignored from now on.
func (s *Speaker) Cancel() {
	s.mu.Lock()
	s.epoch++
	s.queue = nil
	stop := s.stopCur
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// Idle returns a channel that is closed once nothing is queued or being
// spoken (already closed when idle now).
func (s *Speaker) Idle() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.busy && len(s.queue) == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	return s.idle
}

// Stream returns a writer for one streamed answer: text written to it is
// spoken sentence by sentence as soon as each sentence is complete; Close
// speaks the rest. A Cancel makes the Stream discard everything.
func (s *Speaker) Stream() *Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &Stream{s: s, epoch: s.epoch}
}

// Stream is one answer being spoken as it is generated.
type Stream struct {
	s     *Speaker
	epoch int
	mu    sync.Mutex
	sp    sentence.Splitter
}

// Write adds generated text (engine.Request.OnText fits: func([]byte) error
// is s.OnText).
func (st *Stream) Write(p []byte) (int, error) {
	st.mu.Lock()
	done := st.sp.Write(string(p))
	st.mu.Unlock()
	st.s.enqueue(st.epoch, done...)
	return len(p), nil
}

// OnText is Write in the shape of engine.Request.OnText.
func (st *Stream) OnText(p []byte) error { _, err := st.Write(p); return err }

// Close speaks what remains of the answer.
func (st *Stream) Close() error {
	st.mu.Lock()
	rest := st.sp.Flush()
	st.mu.Unlock()
	if rest != "" {
		st.s.enqueue(st.epoch, rest)
	}
	return nil
}

// Run speaks queued sentences until ctx is done; then it kills the current
// sentence and returns.
func (s *Speaker) Run(ctx context.Context) {
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			if s.busy {
				s.busy = false
				close(s.idle)
				s.idle = make(chan struct{})
			}
			s.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
				continue
			}
		}
		text := s.queue[0]
		s.queue = s.queue[1:]
		s.busy = true
		sctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		s.stopCur = cancel
		s.mu.Unlock()

		err := s.speak(sctx, text)

		s.mu.Lock()
		s.stopCur = nil
		s.mu.Unlock()
		cancel()
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return
		case errors.Is(sctx.Err(), context.DeadlineExceeded):
			s.log.Warn("speech: sentence timed out", "timeout", s.cfg.Timeout, "sentence", text)
		case sctx.Err() != nil: // cancelled
		default:
			s.log.Warn("speech: failed", "err", err, "sentence", text)
		}
	}
}

// speechArgv is command with the sentence in place of {text}, such that
// a sentence starting with "-" is never read as an option (a model's
// answer is untrusted text: "--output=/etc/..." must be spoken, not
// obeyed). A {text} argument of its own after a non-option gets "--"
// before it, unless the command has one already: getopt-style programs
// (espeak-ng, espeak, spd-say) take what follows as operands. One right
// after an option ("--text", "{text}") is that option's value, which
// getopt takes whatever it starts with; in case the option takes none,
// a sentence starting with "-" gets a leading space there (speech
// engines skip it). Inside a longer argument ("--text={text}") nothing is
// needed. Programs that know no "--" should read the text on stdin
// (leave {text} out).
func speechArgv(command []string, text string) (argv []string, asArg bool) {
	argv = make([]string, 0, len(command)+1)
	dashed := false
	for i, a := range command {
		if a == "--" {
			dashed = true
		}
		if i == 0 || a != TextPlaceholder {
			if strings.Contains(a, TextPlaceholder) {
				asArg = true
				a = strings.ReplaceAll(a, TextPlaceholder, text)
			}
			argv = append(argv, a)
			continue
		}
		asArg = true
		switch prev := command[i-1]; {
		case dashed:
		case strings.HasPrefix(prev, "-") && i > 1:
			if strings.HasPrefix(text, "-") {
				text = " " + text
			}
		default:
			argv = append(argv, "--")
			dashed = true
		}
		argv = append(argv, text)
	}
	return argv, asArg
}

// speak runs the speech program (and the player) for one sentence.
func (s *Speaker) speak(ctx context.Context, text string) error {
	argv, asArg := speechArgv(s.cfg.Command, text)
	stderr := &tailBuffer{max: 512}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	ownGroup(cmd)
	cmd.WaitDelay = time.Second
	cmd.Stderr = stderr
	if !asArg {
		cmd.Stdin = strings.NewReader(text + "\n")
	}
	if len(s.cfg.Play) == 0 {
		if err := cmd.Run(); err != nil {
			return runErr(argv[0], err, stderr)
		}
		return nil
	}
	play := exec.CommandContext(ctx, s.cfg.Play[0], s.cfg.Play[1:]...)
	ownGroup(play)
	play.WaitDelay = time.Second
	playErr := &tailBuffer{max: 512}
	play.Stderr = playErr
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("voice: pipe: %w", err)
	}
	cmd.Stdout, play.Stdin = w, r
	if err := play.Start(); err != nil {
		r.Close()
		w.Close()
		return runErr(s.cfg.Play[0], err, playErr)
	}
	r.Close()
	if err := cmd.Start(); err != nil {
		w.Close()
		play.Wait()
		return runErr(argv[0], err, stderr)
	}
	w.Close()
	err1 := cmd.Wait()
	err2 := play.Wait()
	if err1 != nil {
		return runErr(argv[0], err1, stderr)
	}
	if err2 != nil {
		return runErr(s.cfg.Play[0], err2, playErr)
	}
	return nil
}
