package mqtt

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// closedWithin reports whether the broker closes c within d (the read
// ends with EOF or a reset, not with our own deadline).
func closedWithin(c net.Conn, d time.Duration) (bool, time.Duration) {
	start := time.Now()
	c.SetReadDeadline(start.Add(d))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false, time.Since(start)
	}
	return true, time.Since(start)
}

// The embedded broker's limits (issue 22, item 4): a CONNECT announcing
// 256 MiB is refused on its fixed header, a silent socket is closed after
// the CONNECT deadline, sockets past the cap are closed at once, and a
// client still logs in and is served.
func TestEmbeddedBrokerLimits(t *testing.T) {
	e, err := StartEmbedded("127.0.0.1:0", "", "", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	addr := e.Addr()

	// CONNECT with a remaining length of 268,435,455 bytes (the most MQTT
	// can announce), then a trickle.
	big, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	big.Write([]byte{0x10, 0xff, 0xff, 0xff, 0x7f, 0, 4, 'M', 'Q', 'T', 'T'})
	if ok, took := closedWithin(big, 2*time.Second); !ok {
		t.Error("a CONNECT announcing 256 MiB kept its socket open")
	} else {
		t.Logf("256 MiB CONNECT: closed after %v", took.Round(time.Millisecond))
	}

	// Sockets that never send a CONNECT, up to the cap: one more is
	// closed at once, the silent ones after the CONNECT deadline.
	var silent []net.Conn
	for range EmbeddedMaxConns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		silent = append(silent, c)
	}
	time.Sleep(100 * time.Millisecond)
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if ok, _ := closedWithin(extra, time.Second); !ok {
		t.Errorf("socket %d past the cap of %d stayed open", EmbeddedMaxConns+1, EmbeddedMaxConns)
	}
	if ok, took := closedWithin(silent[0], EmbeddedConnectTimeout+3*time.Second); !ok {
		t.Errorf("a silent socket stayed open %v", took)
	} else {
		t.Logf("silent socket: closed after %v (deadline %v)", took.Round(time.Millisecond), EmbeddedConnectTimeout)
	}
	for _, c := range silent {
		c.Close()
	}
	// A real client still logs in once the sockets are gone.
	time.Sleep(100 * time.Millisecond)
	cl := paho.NewClient(paho.NewClientOptions().AddBroker(e.URL()).SetClientID("after").SetConnectTimeout(3 * time.Second))
	if tok := cl.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("a client after the attack: %v", tok.Error())
	}
	cl.Disconnect(0)
	// A publish larger than the packet limit ends that client's session,
	// not the broker.
	cl = paho.NewClient(paho.NewClientOptions().AddBroker(e.URL()).SetClientID("big").SetAutoReconnect(false))
	if tok := cl.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	cl.Publish("geist/x", 0, false, strings.Repeat("x", EmbeddedMaxPacket)).WaitTimeout(2 * time.Second)
	deadline := time.Now().Add(3 * time.Second)
	for cl.IsConnectionOpen() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if cl.IsConnectionOpen() {
		t.Error("a packet over the limit was accepted")
	}
	cl.Disconnect(0)
}
