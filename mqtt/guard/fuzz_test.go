package guard_test

import (
	"bytes"
	"io"
	"math"
	"testing"

	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/geisten/geist/mqtt/guard"
)

// FuzzWrap: any bytes from a broker. Through Wrap without limits the
// stream reaches paho unchanged; with limits paho never reads a PUBLISH
// payload over its topic's limit except as a stand-in of at most
// HeadBytes bytes of payload; nothing panics.
func FuzzWrap(f *testing.F) {
	f.Add(append(append(control(packets.Connack), publish("geist/d/ask", 1, false, 7, []byte(`{"text":"hi"}`))...), control(packets.Pingresp)...))
	f.Add(publish("geist/d/cancel", 0, true, 0, bytes.Repeat([]byte("c"), 40)))
	f.Add(publish("geist/d/ask", 2, false, 9, bytes.Repeat([]byte("a"), 2000)))
	f.Add([]byte{0x30, 0xff, 0xff, 0xff, 0x7f, 0, 1, 'a'})
	f.Add([]byte{0x32, 0x03, 0x00, 0x05, 'a'})
	f.Fuzz(fuzzOne)
}

func fuzzOne(t *testing.T, stream []byte) {
	{
		same, _ := io.ReadAll(guard.Wrap(&streamConn{r: bytes.NewReader(stream)}, func(string) int { return math.MaxInt }))
		if !bytes.HasPrefix(stream, same) {
			t.Fatalf("without limits the stream changed:\n in %q\nout %q", stream, same)
		}
		c := guard.Wrap(&streamConn{r: bytes.NewReader(stream)}, limits)
		for {
			cp, err := packets.ReadPacket(c)
			if err != nil {
				return
			}
			p, ok := cp.(*packets.PublishPacket)
			if !ok {
				continue
			}
			size, head, over := guard.Oversized(p.Payload)
			switch {
			case over && (size <= int64(limits(p.TopicName)) || len(head) > guard.HeadBytes || int64(len(head)) > size):
				t.Fatalf("stand-in on %q: size %d, head %d", p.TopicName, size, len(head))
			case !over && len(p.Payload) > limits(p.TopicName):
				t.Fatalf("payload of %d bytes on %q reached paho", len(p.Payload), p.TopicName)
			}
		}
	}
}
