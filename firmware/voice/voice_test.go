package voice

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// script writes an executable shell script into dir and returns its path.
func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh for the stub programs")
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitFor polls cond for up to 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readFile(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

type asked struct{ session, prompt string }

type fakeAsker struct{ ch chan asked }

func (f *fakeAsker) Ask(_ context.Context, session, prompt string) {
	f.ch <- asked{session, prompt}
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type talkRig struct {
	dir, recDir, marks string
	ptt                *PushToTalk
	asker              *fakeAsker
	log                *logBuffer
}

// newTalk builds a PushToTalk with a capture stub that records until
// SIGINT and an STT stub that checks the recording and prints a
// whisper-style transcript after sttDelay.
func newTalk(t *testing.T, sttDelay string, cfg TalkConfig) *talkRig {
	dir := t.TempDir()
	r := &talkRig{dir: dir, recDir: filepath.Join(dir, "rec"), marks: filepath.Join(dir, "marks"), asker: &fakeAsker{ch: make(chan asked, 4)}, log: &logBuffer{}}
	if err := os.Mkdir(r.recDir, 0o755); err != nil {
		t.Fatal(err)
	}
	capture := script(t, dir, "capture", `
trap 'echo "RIFF fake audio" > "$1"; echo "capture stopped" >> `+r.marks+`; exit 1' INT
echo "capture $*" >> `+r.marks+`
while :; do sleep 0.02; done
`)
	stt := script(t, dir, "stt", `
echo "stt $*" >> `+r.marks+`
grep -q "fake audio" "$2" || { echo "no audio in $2" >&2; exit 3; }
sleep `+sttDelay+`
printf '[00:00:00.000 --> 00:00:02.500]   What is the capital\n[00:00:02.500 --> 00:00:04.000]  of France?\n[BLANK_AUDIO]\n'
`)
	if cfg.Capture == nil {
		cfg.Capture = []string{capture, "{file}"}
	}
	cfg.STT = []string{stt, "-f", "{file}"}
	cfg.Dir = r.recDir
	cfg.Session = "voice"
	var err error
	r.ptt, err = NewPushToTalk(cfg, r.asker, slog.New(slog.NewTextHandler(r.log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// recording waits until the capture stub runs (ready for SIGINT).
func (r *talkRig) recording(t *testing.T) {
	t.Helper()
	waitFor(t, "capture to start", func() bool { return strings.Contains(readFile(t, r.marks), "capture") })
}

func (r *talkRig) noRecordingsLeft(t *testing.T) {
	t.Helper()
	if e, _ := os.ReadDir(r.recDir); len(e) != 0 {
		t.Errorf("recordings left behind: %v", e)
	}
}

func TestPushToTalkAsksTranscript(t *testing.T) {
	r := newTalk(t, "0", TalkConfig{})
	r.ptt.StartTalk(context.Background())
	r.recording(t)
	time.Sleep(300 * time.Millisecond)
	r.ptt.StopTalk()
	select {
	case a := <-r.asker.ch:
		if a != (asked{"voice", "What is the capital of France?"}) {
			t.Errorf("asked %+v", a)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no ask; log:\n%s\nmarks:\n%s", r.log, readFile(t, r.marks))
	}
	r.ptt.Wait()
	marks := readFile(t, r.marks)
	if !strings.Contains(marks, "capture stopped") || !strings.Contains(marks, "stt -f "+r.recDir) {
		t.Errorf("capture not stopped by SIGINT or STT not run on the recording:\n%s", marks)
	}
	r.noRecordingsLeft(t)
}

func TestPushToTalkTooShort(t *testing.T) {
	r := newTalk(t, "0", TalkConfig{MinHold: time.Second})
	r.ptt.StartTalk(context.Background())
	time.Sleep(20 * time.Millisecond)
	r.ptt.StopTalk()
	r.ptt.Wait()
	select {
	case a := <-r.asker.ch:
		t.Errorf("a too-short hold asked %+v", a)
	default:
	}
	if strings.Contains(readFile(t, r.marks), "stt") {
		t.Error("a too-short hold was transcribed")
	}
	r.noRecordingsLeft(t)
}

func TestPushToTalkCancel(t *testing.T) {
	t.Run("while recording", func(t *testing.T) {
		r := newTalk(t, "0", TalkConfig{})
		r.ptt.StartTalk(context.Background())
		r.recording(t)
		start := time.Now()
		r.ptt.Cancel()
		r.ptt.Wait()
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("cancel took %v", d)
		}
		r.ptt.StopTalk() // a late release is harmless
		if strings.Contains(readFile(t, r.marks), "stt") {
			t.Error("transcribed after cancel")
		}
		if len(r.asker.ch) != 0 {
			t.Error("asked after cancel")
		}
		r.noRecordingsLeft(t)
	})
	t.Run("while transcribing", func(t *testing.T) {
		r := newTalk(t, "20", TalkConfig{})
		r.ptt.StartTalk(context.Background())
		r.recording(t)
		time.Sleep(300 * time.Millisecond)
		r.ptt.StopTalk()
		waitFor(t, "stt to start", func() bool { return strings.Contains(readFile(t, r.marks), "stt") })
		start := time.Now()
		r.ptt.Cancel()
		r.ptt.Wait()
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("cancel took %v: the STT program was not killed", d)
		}
		if len(r.asker.ch) != 0 {
			t.Error("asked after cancel")
		}
		r.noRecordingsLeft(t)
	})
}

func TestPushToTalkCaptureFails(t *testing.T) {
	dir := t.TempDir()
	failing := script(t, dir, "nocard", "echo 'arecord: main:850: audio open error: No such file or directory' >&2\nexit 1\n")
	r := newTalk(t, "0", TalkConfig{Capture: []string{failing}})
	r.ptt.StartTalk(context.Background())
	waitFor(t, "the capture failure in the log", func() bool { return strings.Contains(r.log.String(), "audio open error") })
	r.ptt.StopTalk() // after the failure: harmless
	r.ptt.Wait()
	if len(r.asker.ch) != 0 {
		t.Error("asked although capture failed")
	}
	if !strings.Contains(r.log.String(), "audio open error") {
		t.Errorf("capture's stderr not in the log:\n%s", r.log)
	}
}

func TestCleanTranscript(t *testing.T) {
	for in, want := range map[string]string{
		" Hello world.\n": "Hello world.",
		"[00:00:00.000 --> 00:00:01.000]  Hi\n[00:00:01,000 --> 00:00:02,000] there\n": "Hi there",
		"[BLANK_AUDIO]\n":                 "",
		" (silence) \n":                   "",
		"  Turn on the [MUSIC] light\r\n": "Turn on the light",
	} {
		if got := CleanTranscript(in); got != want {
			t.Errorf("CleanTranscript(%q) = %q, want %q", in, got, want)
		}
	}
}

// speakRig runs a Speaker whose stub appends what it is given to out.
func speakRig(t *testing.T, cfg SpeakerConfig) (*Speaker, func()) {
	s, err := NewSpeaker(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	return s, func() { cancel(); <-done }
}

func waitIdle(t *testing.T, s *Speaker) {
	t.Helper()
	select {
	case <-s.Idle():
	case <-time.After(10 * time.Second):
		t.Fatal("speaker never idle")
	}
}

const answer = "Once upon a time, there was a little girl named Lily. She loved to play outside! Dr. Bird sang at 7.30 a.m. every day. Was it fun? Yes"

var answerSentences = []string{
	"Once upon a time, there was a little girl named Lily.", "She loved to play outside!",
	"Dr. Bird sang at 7.30 a.m. every day.", "Was it fun?", "Yes",
}

func lines(s string) []string { return strings.FieldsFunc(s, func(r rune) bool { return r == '\n' }) }

func TestSpeakerSentencesInOrder(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "spoken")
	stdinStub := script(t, dir, "tts", "{ cat; echo; } | tr -s '\\n' >> "+out+"\n")
	argStub := script(t, dir, "tts-arg", "printf '%s\\n' \"$2\" >> "+out+"\n")
	synth := script(t, dir, "synth", "sed 's/^/audio:/'\n")
	player := script(t, dir, "player", "cat >> "+out+"\n")
	for _, tc := range []struct {
		name string
		cfg  SpeakerConfig
		want func(string) string
	}{
		{"stdin", SpeakerConfig{Command: []string{stdinStub}}, func(s string) string { return s }},
		{"argument", SpeakerConfig{Command: []string{argStub, "--text", "{text}"}}, func(s string) string { return s }},
		{"piped into a player", SpeakerConfig{Command: []string{synth}, Play: []string{player}}, func(s string) string { return "audio:" + s }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(out)
			s, stop := speakRig(t, tc.cfg)
			defer stop()
			st := s.Stream()
			for i := 0; i < len(answer); i += 3 { // streamed in small pieces
				st.OnText([]byte(answer[i:min(i+3, len(answer))]))
			}
			st.Close()
			waitIdle(t, s)
			var want []string
			for _, w := range answerSentences {
				want = append(want, tc.want(w))
			}
			if got := lines(readFile(t, out)); !slices.Equal(got, want) {
				t.Errorf("spoken:\n got %q\nwant %q", got, want)
			}
		})
	}
}

// TestSpeakerFirstSentenceBeforeEnd: speech starts while the answer is
// still being generated.
func TestSpeakerFirstSentenceBeforeEnd(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "spoken")
	s, stop := speakRig(t, SpeakerConfig{Command: []string{script(t, dir, "tts", "cat >> "+out+"\n")}})
	defer stop()
	st := s.Stream()
	st.Write([]byte("The first sentence is done. The second"))
	waitFor(t, "the first sentence to be spoken", func() bool { return strings.Contains(readFile(t, out), "The first sentence is done.") })
	st.Write([]byte(" one ends here."))
	st.Close()
	waitIdle(t, s)
	if got := readFile(t, out); !strings.HasSuffix(got, "The second one ends here.\n") {
		t.Errorf("spoken %q", got)
	}
}

func TestSpeakerCancel(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "spoken")
	stub := script(t, dir, "slow", "read -r line\necho \"start $line\" >> "+out+"\nsleep 20\necho \"end $line\" >> "+out+"\n")
	s, stop := speakRig(t, SpeakerConfig{Command: []string{stub}})
	defer stop()
	st := s.Stream()
	st.Write([]byte(answer))
	waitFor(t, "the first sentence", func() bool { return strings.Contains(readFile(t, out), "start") })
	start := time.Now()
	s.Cancel()
	waitIdle(t, s)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("cancel took %v: the speech program was not killed", d)
	}
	// The cancelled stream goes on (the generation has not stopped yet):
	// nothing more is spoken.
	st.Write([]byte(" More text. And more."))
	st.Close()
	time.Sleep(300 * time.Millisecond)
	if got := lines(readFile(t, out)); !slices.Equal(got, []string{"start " + answerSentences[0]}) {
		t.Errorf("after cancel: %q", got)
	}
	// The speaker still works for the next answer.
	os.Remove(out)
	s2 := script(t, dir, "fast", "cat >> "+out+"\n")
	s.cfg.Command = []string{s2}
	s.Say("Next answer. Done.")
	waitIdle(t, s)
	if got := lines(readFile(t, out)); !slices.Equal(got, []string{"Next answer.", "Done."}) {
		t.Errorf("after cancel, next answer: %q", got)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := NewSpeaker(SpeakerConfig{}, nil); err == nil {
		t.Error("NewSpeaker without a command")
	}
	if _, err := NewPushToTalk(TalkConfig{Capture: []string{"arecord"}}, &fakeAsker{}, nil); err == nil {
		t.Error("NewPushToTalk without STT")
	}
	if _, err := NewPushToTalk(TalkConfig{Capture: []string{"a"}, STT: []string{"b"}}, nil, nil); err == nil {
		t.Error("NewPushToTalk without an asker")
	}
}

// TestSpeechArgv: a sentence starting with "-" reaches the speech program
// as text, never as an option.
func TestSpeechArgv(t *testing.T) {
	const evil = "--output=/etc/passwd is what it said."
	for _, tc := range []struct {
		command []string
		want    []string
		asArg   bool
	}{
		{[]string{"espeak-ng", "-v", "en-us", "{text}"}, []string{"espeak-ng", "-v", "en-us", "--", evil}, true},
		{[]string{"espeak-ng", "{text}"}, []string{"espeak-ng", "--", evil}, true},
		{[]string{"espeak-ng", "--", "{text}"}, []string{"espeak-ng", "--", evil}, true},
		{[]string{"say", "--text", "{text}"}, []string{"say", "--text", " " + evil}, true},
		{[]string{"say", "--text={text}"}, []string{"say", "--text=" + evil}, true},
		{[]string{"piper", "-m", "voice.onnx"}, []string{"piper", "-m", "voice.onnx"}, false},
	} {
		got, asArg := speechArgv(tc.command, evil)
		if !slices.Equal(got, tc.want) || asArg != tc.asArg {
			t.Errorf("%q: %q %v, want %q %v", tc.command, got, asArg, tc.want, tc.asArg)
		}
	}
	if got, _ := speechArgv([]string{"say", "-t", "{text}"}, "Hello."); !slices.Equal(got, []string{"say", "-t", "Hello."}) {
		t.Errorf("an ordinary sentence changed: %q", got)
	}
}
