package guard_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/geisten/geist/mqtt/guard"
	"github.com/geisten/geist/mqtt/mqtttest"
)

// streamConn is a broker's byte stream as a net.Conn.
type streamConn struct {
	net.Conn
	r io.Reader
}

func (s *streamConn) Read(p []byte) (int, error)  { return s.r.Read(p) }
func (s *streamConn) Write(p []byte) (int, error) { return len(p), nil }
func (s *streamConn) Close() error                { return nil }

func publish(topic string, qos byte, retain bool, id uint16, payload []byte) []byte {
	p := packets.NewControlPacket(packets.Publish).(*packets.PublishPacket)
	p.TopicName, p.Qos, p.Retain, p.MessageID, p.Payload = topic, qos, retain, id, payload
	var b bytes.Buffer
	p.Write(&b)
	return b.Bytes()
}

func control(t byte) []byte {
	var b bytes.Buffer
	packets.NewControlPacket(t).Write(&b)
	return b.Bytes()
}

func limits(topic string) int {
	if strings.HasSuffix(topic, "/cancel") {
		return 16
	}
	return 1000
}

// describe reads packets from c as paho does until the stream ends.
func describe(t *testing.T, c net.Conn) []string {
	var got []string
	for {
		cp, err := packets.ReadPacket(c)
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		p, ok := cp.(*packets.PublishPacket)
		if !ok {
			got = append(got, strings.Fields(cp.String())[0])
			continue
		}
		s := fmt.Sprintf("%s %d %v #%d", p.TopicName, p.Qos, p.Retain, p.MessageID)
		if size, head, ok := guard.Oversized(p.Payload); ok {
			s += fmt.Sprintf(" oversized %d head %.11s", size, head)
		} else {
			s += " " + string(p.Payload)
		}
		got = append(got, s)
	}
}

// TestWrapRewrites: packets within their topic's limit reach paho
// unchanged; an oversized PUBLISH arrives as its stand-in with the same
// topic, QoS, retain flag and packet id; the stream stays in step.
func TestWrapRewrites(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 3*guard.HeadBytes)
	copy(big, `{"id":"a1",`)
	var in bytes.Buffer
	in.Write(control(packets.Connack))
	in.Write(publish("geist/d/ask", 1, false, 7, []byte(`{"text":"hi"}`)))
	in.Write(publish("geist/d/ask", 1, true, 8, big))
	in.Write(publish("geist/d/cancel", 0, false, 0, []byte(`{"id":"0123456789abcdef"}`)))
	in.Write(publish("geist/d/cancel", 2, false, 9, []byte(`short`)))
	in.Write(publish("geist/d/ask", 0, false, 0, nil))
	in.Write(control(packets.Pingresp))
	got := describe(t, guard.Wrap(&streamConn{r: &in}, limits))
	want := []string{
		"CONNACK:",
		`geist/d/ask 1 false #7 {"text":"hi"}`,
		`geist/d/ask 1 true #8 oversized 12288 head {"id":"a1",`,
		`geist/d/cancel 0 false #0 oversized 25 head {"id":"0123`,
		"geist/d/cancel 2 false #9 short",
		"geist/d/ask 0 false #0 ",
		"PINGRESP:",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("paho read\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWrapRefusesHugeControl: a broker's SUBACK of 1 MiB ends the
// connection instead of being read.
func TestWrapRefusesHugeControl(t *testing.T) {
	in := []byte{packets.Suback << 4, 0x80, 0x80, 0x40} // 1 MiB follows
	_, err := packets.ReadPacket(guard.Wrap(&streamConn{r: io.MultiReader(bytes.NewReader(in), zeros{})}, limits))
	if !errors.Is(err, guard.ErrControlTooLarge) {
		t.Errorf("err %v", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestOversizedNotForged: a payload that looks like a stand-in but lacks
// this process's random marker is not one.
func TestOversizedNotForged(t *testing.T) {
	fake := append([]byte{0xff, 0xfe}, make([]byte, 20)...)
	if _, _, ok := guard.Oversized(fake); ok {
		t.Error("a forged stand-in was taken")
	}
}

// TestOpenMosquitto: through a real broker, a 32 MiB publication on a
// topic limited to 64 KiB reaches the handler as a stand-in, the next
// message arrives too, and the receiving process allocates a few KiB for
// it; paho alone allocates twice the payload.
func TestOpenMosquitto(t *testing.T) {
	b := mqtttest.StartMosquitto(t)
	guarded := receive(t, b.URL, true)
	t.Logf("allocated while 32 MiB were published and received: %d KiB with guard.Open", guarded>>10)
	if guarded > 4<<20 {
		t.Errorf("allocated %d KiB: the receiver read the whole payload", guarded>>10)
	}
	if testing.Short() {
		return
	}
	plain := receive(t, b.URL, false)
	t.Logf("and %d KiB with paho's own connection", plain>>10)
	if plain < 64<<20 {
		t.Errorf("paho's own connection allocated only %d KiB: is the comparison still needed?", plain>>10)
	}
}

// receive subscribes a client (bounded by guard.Open or not), has 32 MiB
// and then 5 bytes published, checks what arrives and returns the bytes
// allocated meanwhile.
func receive(t *testing.T, url string, guarded bool) int64 {
	got := make(chan paho.Message, 4)
	sub := mqtttest.NewClient(t, url, func(o *paho.ClientOptions) {
		if guarded {
			o.SetCustomOpenConnectionFn(guard.Open(func(string) int { return 64 << 10 }))
		}
	})
	defer sub.Paho().Disconnect(50)
	tok := sub.Paho().Subscribe("big/#", 1, func(_ paho.Client, m paho.Message) { got <- m })
	if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatal("subscribe", tok.Error())
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	mqtttest.PublishLarge(t, url, "big/one", false, nil, 32<<20)
	mqtttest.PublishLarge(t, url, "big/two", false, []byte("small"), 5)
	for i, want := range []string{"big/one", "big/two"} {
		select {
		case m := <-got:
			if m.Topic() != want {
				t.Fatalf("message %d on %s", i, m.Topic())
			}
			size, _, over := guard.Oversized(m.Payload())
			switch {
			case i == 1 && (over || string(m.Payload()) != "small"),
				i == 0 && guarded && (!over || size != 32<<20),
				i == 0 && !guarded && len(m.Payload()) != 32<<20:
				t.Errorf("%s: oversized %v size %d, payload %d bytes", m.Topic(), over, size, len(m.Payload()))
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("message %d not received", i)
		}
	}
	runtime.ReadMemStats(&after)
	return int64(after.TotalAlloc - before.TotalAlloc)
}
