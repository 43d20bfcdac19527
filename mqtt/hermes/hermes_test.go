package hermes

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/geisten/geist/mqtt/mqtttest"
)

// slowGen streams a fixed answer in pieces with pauses, like a slow model.
type slowGen struct {
	pieces []string
	pause  time.Duration

	mu    sync.Mutex
	asked []string // "session: question"
	ended []time.Time
}

func (g *slowGen) Answer(ctx context.Context, session, question string, onText func([]byte) error) error {
	g.mu.Lock()
	g.asked = append(g.asked, session+": "+question)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.ended = append(g.ended, time.Now())
		g.mu.Unlock()
	}()
	for _, p := range g.pieces {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(g.pause):
		}
		if err := onText([]byte(p)); err != nil {
			return err
		}
	}
	return nil
}

func (g *slowGen) Asked() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.asked)
}

func (g *slowGen) Ended() []time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.ended)
}

var story = []string{"Once upon a ", "time there was a cat. It ", "liked fish", "! Dr. Mouse ", "said hi. The", " end"}
var storySentences = []string{"Once upon a time there was a cat.", "It liked fish!", "Dr. Mouse said hi.", "The end"}

type say struct {
	Text      string `json:"text"`
	ID        string `json:"id"`
	SiteID    string `json:"siteId"`
	SessionID string `json:"sessionId"`
	Lang      string `json:"lang"`
}

// rig is a broker, a bridge connected to it, and a fake Rhasspy that
// records tts/say and endSession and answers each say with sayFinished
// after speakFor (never when negative).
type rig struct {
	broker  *mqtttest.Mosquitto
	rhasspy *mqtttest.Client
	gen     *slowGen
	bridge  *Bridge
	stop    func()
}

func newRig(t *testing.T, cfg Config, speakFor time.Duration) *rig {
	broker := mqtttest.StartMosquitto(t)
	r := &rig{broker: broker, gen: &slowGen{pieces: story, pause: 150 * time.Millisecond}}
	r.rhasspy = mqtttest.NewClient(t, broker.URL)
	r.rhasspy.Subscribe(t, TopicSay, TopicEndSession)
	// The fake TTS: sayFinished for every say, after "speaking".
	tts := mqtttest.NewClient(t, broker.URL)
	tok := tts.Paho().Subscribe(TopicSay, 1, func(c paho.Client, m paho.Message) {
		var s say
		json.Unmarshal(m.Payload(), &s)
		if speakFor < 0 {
			return // a TTS that never reports
		}
		go func() {
			time.Sleep(speakFor)
			b, _ := json.Marshal(map[string]string{"id": s.ID, "siteId": s.SiteID})
			c.Publish(TopicSayFinished, 1, false, b)
		}()
	})
	if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	var err error
	r.bridge, err = New(cfg, r.gen, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := paho.NewClientOptions().AddBroker(broker.URL).
		SetClientID(fmt.Sprintf("geist-hermes-test-%d-%d", os.Getpid(), time.Now().UnixNano())).
		SetConnectRetryInterval(100 * time.Millisecond)
	connected := make(chan struct{})
	var once sync.Once
	opts.SetOnConnectHandler(func(paho.Client) { once.Do(func() { close(connected) }) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.bridge.Connect(ctx, opts) }()
	r.stop = func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(r.stop)
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		t.Fatal("bridge did not connect")
	}
	time.Sleep(200 * time.Millisecond) // let the subscription settle
	return r
}

func (r *rig) publish(t *testing.T, topic string, v any) {
	b, _ := json.Marshal(v)
	r.rhasspy.Publish(t, topic, b)
}

func sayings(t *testing.T, msgs []mqtttest.Msg) []say {
	var out []say
	for _, m := range mqtttest.On(msgs, TopicSay) {
		var s say
		if err := json.Unmarshal(m.Payload, &s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func texts(s []say) []string {
	var out []string
	for _, x := range s {
		out = append(out, x.Text)
	}
	return out
}

func TestTextCapturedSpeaksSentencesAsTheyStream(t *testing.T) {
	for _, pacing := range []bool{true, false} {
		t.Run(fmt.Sprintf("pacing=%v", pacing), func(t *testing.T) {
			r := newRig(t, Config{Sites: []string{"kitchen"}, Lang: "en", NoPacing: !pacing}, 50*time.Millisecond)
			r.publish(t, TopicTextCaptured, map[string]any{"text": "tell me a story", "likelihood": 1, "seconds": 1.5, "siteId": "kitchen", "sessionId": "s-1"})
			msgs, ok := r.rhasspy.Wait(10*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, TopicSay)) == len(storySentences) })
			if !ok {
				t.Fatalf("says: %q", texts(sayings(t, msgs)))
			}
			says := sayings(t, msgs)
			if got := texts(says); !slices.Equal(got, storySentences) {
				t.Errorf("said %q, want %q", got, storySentences)
			}
			ids := map[string]bool{}
			for _, s := range says {
				if s.SiteID != "kitchen" || s.SessionID != "s-1" || s.Lang != "en" || s.ID == "" || ids[s.ID] {
					t.Errorf("say %+v: want site kitchen, session s-1, lang en, a unique id", s)
				}
				ids[s.ID] = true
			}
			ended := r.gen.Ended()
			if len(ended) != 1 {
				t.Fatalf("generations ended: %d", len(ended))
			}
			first := mqtttest.On(msgs, TopicSay)[0].At
			if !first.Before(ended[0]) {
				t.Errorf("first sentence at %v, generation ended at %v: speech did not start before the end", first, ended[0])
			} else {
				t.Logf("first say %v before the generation ended", ended[0].Sub(first).Round(time.Millisecond))
			}
			if got := r.gen.Asked(); !slices.Equal(got, []string{"hermes-s-1: tell me a story"}) {
				t.Errorf("asked %q", got)
			}
			if e := mqtttest.On(msgs, TopicEndSession); len(e) != 0 {
				t.Errorf("ASR mode ended a session: %s", e[0].Payload)
			}
		})
	}
}

func TestOtherSitesIgnored(t *testing.T) {
	r := newRig(t, Config{Sites: []string{"kitchen", "office"}}, 10*time.Millisecond)
	r.gen.pieces = []string{"Yes."}
	r.publish(t, TopicTextCaptured, map[string]any{"text": "from the garage", "siteId": "garage", "sessionId": "g"})
	r.publish(t, TopicTextCaptured, map[string]any{"text": "no site at all"}) // "default"
	r.publish(t, TopicIntentNotRecognized, map[string]any{"input": "wrong mode", "siteId": "office", "sessionId": "x"})
	r.publish(t, TopicTextCaptured, map[string]any{"text": "from the office", "siteId": "office", "sessionId": "o"})
	_, ok := r.rhasspy.Wait(10*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, TopicSay)) == 1 })
	if !ok {
		t.Fatal("office not answered")
	}
	time.Sleep(500 * time.Millisecond)
	msgs := r.rhasspy.Messages()
	if s := sayings(t, msgs); len(s) != 1 || s[0].SiteID != "office" {
		t.Errorf("says %+v", s)
	}
	if got := r.gen.Asked(); !slices.Equal(got, []string{"hermes-o: from the office"}) {
		t.Errorf("asked %q", got)
	}
}

func TestIntentNotRecognizedEndsSession(t *testing.T) {
	for _, whole := range []bool{false, true} {
		t.Run(fmt.Sprintf("answer_in_end_session=%v", whole), func(t *testing.T) {
			r := newRig(t, Config{Mode: ModeDialogue, AnswerInEndSession: whole, PerSite: true}, 20*time.Millisecond)
			r.publish(t, TopicTextCaptured, map[string]any{"text": "what is 2+2", "siteId": "default", "sessionId": "d-7"}) // not our topic in dialogue mode
			r.publish(t, TopicIntentNotRecognized, map[string]any{"input": "tell me a story", "siteId": "default", "sessionId": "d-7"})
			msgs, ok := r.rhasspy.Wait(10*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, TopicEndSession)) == 1 })
			if !ok {
				t.Fatalf("no endSession; got %d messages", len(msgs))
			}
			var end struct {
				SessionID string  `json:"sessionId"`
				Text      *string `json:"text"`
			}
			json.Unmarshal(mqtttest.On(msgs, TopicEndSession)[0].Payload, &end)
			if end.SessionID != "d-7" {
				t.Errorf("endSession for %q, want d-7", end.SessionID)
			}
			says := sayings(t, msgs)
			if whole {
				if len(says) != 0 || end.Text == nil || *end.Text != "Once upon a time there was a cat. It liked fish! Dr. Mouse said hi. The end" {
					t.Errorf("says %q, endSession text %v", texts(says), end.Text)
				}
			} else {
				if !slices.Equal(texts(says), storySentences) || end.Text != nil {
					t.Errorf("says %q, endSession text %v", texts(says), end.Text)
				}
				// endSession comes after the last sentence.
				last := mqtttest.On(msgs, TopicSay)[len(says)-1].At
				if e := mqtttest.On(msgs, TopicEndSession)[0].At; e.Before(last) {
					t.Error("session ended before the last sentence")
				}
			}
			if got := r.gen.Asked(); !slices.Equal(got, []string{"hermes-default: tell me a story"}) {
				t.Errorf("asked %q (per-site session)", got)
			}
		})
	}
}

func TestCancelDropsTheRestAndEndsSession(t *testing.T) {
	r := newRig(t, Config{Mode: ModeDialogue}, 10*time.Millisecond)
	r.gen.pause = 300 * time.Millisecond
	r.publish(t, TopicIntentNotRecognized, map[string]any{"input": "story", "siteId": "default", "sessionId": "c"})
	if _, ok := r.rhasspy.Wait(10*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, TopicSay)) == 1 }); !ok {
		t.Fatal("no first sentence")
	}
	r.bridge.Cancel()
	msgs, ok := r.rhasspy.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, TopicEndSession)) == 1 })
	if !ok {
		t.Fatal("cancelled dialogue session not ended")
	}
	time.Sleep(500 * time.Millisecond)
	if n := len(mqtttest.On(r.rhasspy.Messages(), TopicSay)); n != 1 {
		t.Errorf("%d sentences after cancel, want only the first", n)
	}
	_ = msgs
}

// TestSessionEndedCancels: when the dialogue manager ends the session
// (timeout, abort), generation for it stops.
func TestSessionEndedCancels(t *testing.T) {
	r := newRig(t, Config{Mode: ModeDialogue}, 10*time.Millisecond)
	r.gen.pause = 700 * time.Millisecond // the whole answer would take 4.2s
	r.publish(t, TopicIntentNotRecognized, map[string]any{"input": "story", "siteId": "default", "sessionId": "e"})
	if _, ok := r.rhasspy.Wait(10*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, TopicSay)) == 1 }); !ok {
		t.Fatal("no first sentence")
	}
	r.publish(t, TopicSessionEnded, map[string]any{"sessionId": "other", "siteId": "default", "termination": map[string]string{"reason": "abortedByUser"}})
	aborted := time.Now()
	r.publish(t, TopicSessionEnded, map[string]any{"sessionId": "e", "siteId": "default", "termination": map[string]string{"reason": "abortedByUser"}})
	waitEnded := time.Now().Add(5 * time.Second)
	for len(r.gen.Ended()) == 0 && time.Now().Before(waitEnded) {
		time.Sleep(10 * time.Millisecond)
	}
	if e := r.gen.Ended(); len(e) == 0 || e[0].Sub(aborted) > time.Second {
		t.Fatalf("generation not cancelled by sessionEnded: ended %v", e)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(mqtttest.On(r.rhasspy.Messages(), TopicSay)); n > 2 {
		t.Errorf("%d sentences said after the session ended", n)
	}
}

func TestSayFinishedTimeoutFallsBack(t *testing.T) {
	r := newRig(t, Config{SayTimeout: 200 * time.Millisecond}, -1) // the TTS never finishes
	r.gen.pause = 10 * time.Millisecond
	start := time.Now()
	r.publish(t, TopicTextCaptured, map[string]any{"text": "x", "siteId": "default"})
	msgs, ok := r.rhasspy.Wait(10*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, TopicSay)) == len(storySentences) })
	if !ok || time.Since(start) > 3*time.Second {
		t.Errorf("without sayFinished: %d says after %v", len(mqtttest.On(msgs, TopicSay)), time.Since(start))
	}
	if got := r.gen.Asked(); !slices.Equal(got, []string{"hermes-default: x"}) {
		t.Errorf("asked %q", got)
	}
}

// TestPacingWaitsForSayFinished: with a fast generator and a slow speaker,
// each sentence is sent only after the previous one was spoken.
func TestPacingWaitsForSayFinished(t *testing.T) {
	const speak = 250 * time.Millisecond
	r := newRig(t, Config{}, speak)
	r.gen.pause = time.Millisecond
	r.publish(t, TopicTextCaptured, map[string]any{"text": "x", "siteId": "default"})
	msgs, ok := r.rhasspy.Wait(10*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, TopicSay)) == len(storySentences) })
	if !ok {
		t.Fatal("not all sentences said")
	}
	says := mqtttest.On(msgs, TopicSay)
	for i := 1; i < len(says); i++ {
		if gap := says[i].At.Sub(says[i-1].At); gap < speak-20*time.Millisecond {
			t.Errorf("sentence %d sent %v after the previous one, before it was spoken (%v)", i, gap, speak)
		}
	}
}

func TestNewErrors(t *testing.T) {
	g := &slowGen{}
	if _, err := New(Config{Mode: "telepathy"}, g, nil); err == nil {
		t.Error("bad mode accepted")
	}
	if _, err := New(Config{}, nil, nil); err == nil {
		t.Error("nil answerer accepted")
	}
	q := byte(3)
	if _, err := New(Config{QoS: &q}, g, nil); err == nil {
		t.Error("qos 3 accepted")
	}
}

var update = flag.Bool("update", false, "rewrite the golden file testdata/mqtt/hermes.golden")

// TestHermesGolden pins the payloads the bridge publishes (tts/say in ASR
// mode, endSession with and without the answer in dialogue mode) in
// testdata/mqtt/hermes.golden; say ids read <id>.
func TestHermesGolden(t *testing.T) {
	var out bytes.Buffer
	ids := regexp.MustCompile(`"id":"geist-[0-9a-z]+-[0-9]+"`)
	for _, c := range []struct {
		name  string
		cfg   Config
		topic string
		in    map[string]any
		until string
		n     int
	}{
		{"asr", Config{Lang: "en"}, TopicTextCaptured, map[string]any{"text": "tell me a story", "siteId": "kitchen", "sessionId": "s-1"}, TopicSay, len(storySentences)},
		{"dialogue", Config{Mode: ModeDialogue}, TopicIntentNotRecognized, map[string]any{"input": "tell me a story", "siteId": "default", "sessionId": "d-7"}, TopicEndSession, 1},
		{"dialogue, answer in endSession", Config{Mode: ModeDialogue, AnswerInEndSession: true}, TopicIntentNotRecognized, map[string]any{"input": "tell me a story", "siteId": "default", "sessionId": "d-8"}, TopicEndSession, 1},
	} {
		r := newRig(t, c.cfg, 10*time.Millisecond)
		r.gen.pause = time.Millisecond
		r.publish(t, c.topic, c.in)
		msgs, ok := r.rhasspy.Wait(10*time.Second, func(m []mqtttest.Msg) bool { return len(mqtttest.On(m, c.until)) == c.n })
		if !ok {
			t.Fatalf("%s: %d messages", c.name, len(msgs))
		}
		fmt.Fprintf(&out, "## %s\n", c.name)
		for _, m := range msgs {
			fmt.Fprintf(&out, "< %s %s\n", m.Topic, ids.ReplaceAll(m.Payload, []byte(`"id":"<id>"`)))
		}
	}
	path := filepath.Join("..", "..", "testdata", "mqtt", "hermes.golden")
	if *update {
		if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(out.Bytes(), want) {
		t.Errorf("Hermes payloads differ from %s (%v; rerun with -update if intended):\n%s", path, err, out.Bytes())
	}
}

// TestHugeTranscriptDropped: a 10 MB textCaptured is dropped before paho
// reads it (a few KiB allocated, not 20 MB), and the next transcript is
// answered.
func TestHugeTranscriptDropped(t *testing.T) {
	r := newRig(t, Config{NoPacing: true}, 0)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	mqtttest.PublishLarge(t, r.broker.URL, TopicTextCaptured, false, []byte(`{"siteId":"default","text":"`), 10_000_000)
	r.publish(t, TopicTextCaptured, map[string]any{"text": "hello", "siteId": "default"})
	if _, ok := r.rhasspy.Wait(10*time.Second, func(m []mqtttest.Msg) bool { return len(sayings(t, m)) == len(storySentences) }); !ok {
		t.Fatal("the transcript after the huge one was not answered")
	}
	runtime.ReadMemStats(&after)
	alloc := int64(after.TotalAlloc - before.TotalAlloc)
	t.Logf("10 MB transcript dropped; allocated meanwhile: %d KiB", alloc>>10)
	if asked := r.gen.Asked(); len(asked) != 1 || asked[0] != "hermes-default: hello" {
		t.Errorf("asked %q", asked)
	}
	if alloc > 4<<20 {
		t.Errorf("allocated %d KiB", alloc>>10)
	}
}

// TestRetainedTranscriptIgnored: a transcript retained on the broker
// before the bridge connected is not answered.
func TestRetainedTranscriptIgnored(t *testing.T) {
	broker := mqtttest.StartMosquitto(t)
	c := mqtttest.NewClient(t, broker.URL)
	if tok := c.Paho().Publish(TopicTextCaptured, 1, true, `{"text":"old question","siteId":"default"}`); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	gen := &slowGen{pieces: story}
	b, err := New(Config{NoPacing: true}, gen, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- b.Connect(ctx, paho.NewClientOptions().AddBroker(broker.URL).SetClientID("hermes-retained"))
	}()
	time.Sleep(500 * time.Millisecond)
	cancel()
	<-done
	if asked := gen.Asked(); len(asked) != 0 {
		t.Errorf("retained transcript answered: %q", asked)
	}
}
