package voice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Asker asks a transcript in a session. It must return promptly (start
// the generation, do not wait for the answer). firmware.Triggers.Voice
// returns the one that asks the appliance core.
type Asker interface {
	Ask(ctx context.Context, session, prompt string)
}

// TalkConfig names the capture and speech-to-text programs.
type TalkConfig struct {
	// Capture records audio into {file} until it is interrupted (SIGINT),
	// e.g. ["arecord", "-q", "-f", "S16_LE", "-r", "16000", "-c", "1", "{file}"].
	Capture []string `json:"capture" yaml:"capture" toml:"capture"`
	// STT prints the transcript of {file} on stdout, e.g.
	// ["whisper-cli", "-m", "ggml-base.en.bin", "-nt", "-np", "-f", "{file}"].
	// Timestamps ("[00:00:00.000 --> …]") and tags such as [BLANK_AUDIO]
	// are removed.
	STT []string `json:"stt" yaml:"stt" toml:"stt"`
	// Session is where transcripts are asked (empty: the default session).
	Session string `json:"session,omitempty" yaml:"session,omitempty" toml:"session,omitempty"`
	// Dir holds the recordings while they are transcribed (default: the
	// system's temporary directory); they are removed afterwards.
	Dir string `json:"dir,omitempty" yaml:"dir,omitempty" toml:"dir,omitempty"`
	// Ext is the recording's file name extension (default ".wav").
	Ext string `json:"ext,omitempty" yaml:"ext,omitempty" toml:"ext,omitempty"`
	// MinHold ignores shorter holds (default 250ms); MaxHold stops the
	// recording anyway (default 30s).
	MinHold time.Duration `json:"min_hold,omitempty" yaml:"min_hold,omitempty" toml:"min_hold,omitempty"`
	MaxHold time.Duration `json:"max_hold,omitempty" yaml:"max_hold,omitempty" toml:"max_hold,omitempty"`
	// StopGrace is how long the capture program may take to finish its
	// file after SIGINT before it is killed (default 2s).
	StopGrace time.Duration `json:"stop_grace,omitempty" yaml:"stop_grace,omitempty" toml:"stop_grace,omitempty"`
	// STTTimeout bounds the transcription (default 60s).
	STTTimeout time.Duration `json:"stt_timeout,omitempty" yaml:"stt_timeout,omitempty" toml:"stt_timeout,omitempty"`
}

// PushToTalk records while a button is held and asks what was said. It
// implements firmware.Talker (StartTalk, StopTalk). One recording runs at
// a time; a press while a recording is transcribed is ignored.
type PushToTalk struct {
	cfg   TalkConfig
	asker Asker
	log   *slog.Logger

	mu      sync.Mutex
	active  bool
	release chan struct{} // closed by StopTalk
	pressAt time.Time     // when the button went down
	upAt    time.Time     // when it was released
	abort   context.CancelFunc
	wg      sync.WaitGroup
}

// NewPushToTalk checks cfg and returns a PushToTalk that hands transcripts
// to asker.
func NewPushToTalk(cfg TalkConfig, asker Asker, log *slog.Logger) (*PushToTalk, error) {
	if err := checkArgv("capture", cfg.Capture); err != nil {
		return nil, err
	}
	if err := checkArgv("speech-to-text", cfg.STT); err != nil {
		return nil, err
	}
	if asker == nil {
		return nil, errors.New("voice: nil asker")
	}
	if cfg.Ext == "" {
		cfg.Ext = ".wav"
	}
	if cfg.MinHold <= 0 {
		cfg.MinHold = 250 * time.Millisecond
	}
	if cfg.MaxHold <= 0 {
		cfg.MaxHold = 30 * time.Second
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = 2 * time.Second
	}
	if cfg.STTTimeout <= 0 {
		cfg.STTTimeout = time.Minute
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &PushToTalk{cfg: cfg, asker: asker, log: log}, nil
}

// StartTalk starts recording (the button went down). ctx bounds the whole
// turn: recording, transcription and the Ask.
func (p *PushToTalk) StartTalk(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.active {
		p.log.Info("push-to-talk: still busy with the last recording; press ignored")
		return
	}
	p.active = true
	p.release = make(chan struct{})
	p.pressAt, p.upAt = time.Now(), time.Time{}
	tctx, cancel := context.WithCancel(ctx)
	p.abort = cancel
	release := p.release
	p.wg.Go(func() {
		defer func() {
			cancel()
			p.mu.Lock()
			p.active, p.abort = false, nil
			p.mu.Unlock()
		}()
		text, err := p.turn(tctx, release)
		switch {
		case err != nil && tctx.Err() != nil:
			p.log.Info("push-to-talk: cancelled")
		case err != nil:
			p.log.Warn("push-to-talk failed", "err", err)
		case text == "":
			p.log.Info("push-to-talk: nothing heard")
		default:
			p.log.Info("push-to-talk", "transcript", text)
			p.asker.Ask(ctx, p.cfg.Session, text)
		}
	})
}

// StopTalk stops recording (the button was released); the recording is
// then transcribed and asked.
func (p *PushToTalk) StopTalk() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.release != nil {
		p.upAt = time.Now()
		close(p.release)
		p.release = nil
	}
}

// Cancel abandons the current recording or transcription.
func (p *PushToTalk) Cancel() {
	p.mu.Lock()
	abort := p.abort
	p.mu.Unlock()
	if abort != nil {
		abort()
	}
}

// Wait waits until the current turn (if any) is over.
func (p *PushToTalk) Wait() { p.wg.Wait() }

// turn records until release, then transcribes.
func (p *PushToTalk) turn(ctx context.Context, release <-chan struct{}) (string, error) {
	dir := p.cfg.Dir
	if dir == "" {
		dir = os.TempDir()
	}
	f, err := os.CreateTemp(dir, "geist-talk-*"+p.cfg.Ext)
	if err != nil {
		return "", fmt.Errorf("voice: recording file: %w", err)
	}
	file := f.Name()
	f.Close()
	defer os.Remove(file)

	held, err := p.record(ctx, file, release)
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	if !p.upAt.IsZero() {
		held = p.upAt.Sub(p.pressAt) // the hold, not the program's run time
	}
	p.mu.Unlock()
	if held < p.cfg.MinHold {
		p.log.Info("push-to-talk: too short, ignored", "held", held)
		return "", nil
	}
	return p.transcribe(ctx, file)
}

// record runs the capture program until release, ctx or MaxHold, and
// returns how long it recorded.
func (p *PushToTalk) record(ctx context.Context, file string, release <-chan struct{}) (time.Duration, error) {
	argv, found := expand(p.cfg.Capture, FilePlaceholder, file)
	if !found {
		argv = append(argv, file)
	}
	stderr := &tailBuffer{max: 512}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	ownGroup(cmd)
	cmd.Stderr = stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, runErr("capture", err, stderr)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	maxHold := time.NewTimer(p.cfg.MaxHold)
	defer maxHold.Stop()
	var stopped error // why we stopped the program, nil when it exited by itself
	select {
	case err := <-exited:
		if err != nil {
			return 0, runErr("capture exited early", err, stderr)
		}
		return time.Since(start), nil
	case <-release:
	case <-maxHold.C:
		p.log.Info("push-to-talk: maximum hold reached", "max", p.cfg.MaxHold)
	case <-ctx.Done():
		stopped = ctx.Err()
	}
	held := time.Since(start)
	if stopped != nil {
		_ = cmd.Cancel()
		<-exited
		return held, stopped
	}
	_ = interrupt(cmd)
	grace := time.NewTimer(p.cfg.StopGrace)
	defer grace.Stop()
	select {
	case <-exited: // a capture program ends with an error status on SIGINT
	case <-grace.C:
		p.log.Warn("push-to-talk: capture ignored SIGINT; killed", "grace", p.cfg.StopGrace)
		_ = cmd.Cancel()
		<-exited
	case <-ctx.Done():
		_ = cmd.Cancel()
		<-exited
		return held, ctx.Err()
	}
	return held, nil
}

// transcribe runs the speech-to-text program on file.
func (p *PushToTalk) transcribe(ctx context.Context, file string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.STTTimeout)
	defer cancel()
	argv, found := expand(p.cfg.STT, FilePlaceholder, file)
	if !found {
		argv = append(argv, file)
	}
	stderr := &tailBuffer{max: 512}
	out := &limitBuffer{max: 64 << 10}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	ownGroup(cmd)
	cmd.WaitDelay = time.Second
	cmd.Stdout, cmd.Stderr = out, stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("voice: speech-to-text: %w", ctx.Err())
		}
		return "", runErr("speech-to-text", err, stderr)
	}
	return CleanTranscript(out.b.String()), nil
}

var (
	timestamp = regexp.MustCompile(`^\s*\[[0-9:.,]+\s*-->\s*[0-9:.,]+\]`)
	tag       = regexp.MustCompile(`\[[A-Z_ ]+\]|\((?i:silence|music|blank_audio|inaudible|noise)\)|\*[a-z ]+\*`)
)

// CleanTranscript turns a speech-to-text program's output into one line:
// whisper.cpp timestamps and tags such as [BLANK_AUDIO] or (silence) are
// removed, lines joined and spaces collapsed.
func CleanTranscript(s string) string {
	var parts []string
	for line := range strings.Lines(s) {
		line = timestamp.ReplaceAllString(line, "")
		line = tag.ReplaceAllString(line, "")
		if f := strings.Fields(line); len(f) > 0 {
			parts = append(parts, strings.Join(f, " "))
		}
	}
	return strings.Join(parts, " ")
}
