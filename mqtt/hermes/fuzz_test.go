package hermes

import (
	"testing"
	"unicode/utf8"
)

// message is a paho.Message for tests.
type message struct {
	topic    string
	payload  []byte
	retained bool
}

func (m message) Duplicate() bool   { return false }
func (m message) Qos() byte         { return 1 }
func (m message) Retained() bool    { return m.retained }
func (m message) Topic() string     { return m.topic }
func (m message) MessageID() uint16 { return 1 }
func (m message) Payload() []byte   { return m.payload }
func (m message) Ack()              {}

// FuzzHandle: any Hermes payload on any of the bridge's topics, retained
// or not, is decoded, filtered and queued without a panic; what is queued
// is bounded by MaxPayload, comes from a transcript topic and never from
// a retained message.
func FuzzHandle(f *testing.F) {
	for _, s := range []string{
		`{"text":"what time is it","siteId":"kitchen","sessionId":"s1"}`,
		`{"input":"turn it up","siteId":"default","sessionId":"s2"}`,
		`{"id":"geist-1"}`, `{"sessionId":"s1","termination":{"reason":"timeout"}}`,
		`{"text":5}`, `{"siteId":null,"text":"` + "\xff" + `"}`, ``, `[]`,
	} {
		for topic := range 4 {
			f.Add(uint8(topic), false, []byte(s))
		}
	}
	topics := []string{TopicTextCaptured, TopicIntentNotRecognized, TopicSayFinished, TopicSessionEnded}
	f.Fuzz(func(t *testing.T, topic uint8, retained bool, payload []byte) {
		for _, mode := range []string{ModeASR, ModeDialogue} {
			b, err := New(Config{Mode: mode, MaxPayload: 1 << 10, Queue: 2, Sites: []string{"default", "kitchen"}}, &slowGen{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			b.finished["geist-1"] = make(chan struct{})
			m := message{topic: topics[int(topic)%len(topics)], payload: payload, retained: retained}
			b.handle(nil, m)
			b.handle(nil, m) // twice: a closed sayFinished channel must not be closed again
			for len(b.jobs) > 0 {
				j := <-b.jobs
				if retained || len(payload) > 1<<10 || m.topic == TopicSayFinished || m.topic == TopicSessionEnded {
					t.Fatalf("queued %+v from %s (retained %v, %d bytes)", j, m.topic, retained, len(payload))
				}
				if len(j.text) > 1<<10 || !utf8.ValidString(j.text+j.siteID+j.sessionID) {
					t.Fatalf("queued %+v", j)
				}
			}
		}
	})
}
