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

// Close returns within its grace however the clients behave: a paho
// client that reconnects at once when it is disconnected (as every geist
// and Home Assistant client does) and a socket still owing its CONNECT
// (mochi waited for it until the CONNECT deadline, 5 s).
// mochi closed its listener only after disconnecting the clients it knew,
// so the reconnect got in and Close waited out its keepalive (issue 28's
// CI: `geist serve` did not stop within 30 s under qemu).
func TestEmbeddedCloseWithReconnectingClient(t *testing.T) {
	e, err := StartEmbedded("127.0.0.1:0", "", "", testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	opts := paho.NewClientOptions().AddBroker("tcp://" + e.Addr()).SetClientID("reconnecter").
		SetAutoReconnect(true).SetConnectRetry(true).SetKeepAlive(60 * time.Second).
		SetConnectRetryInterval(10 * time.Millisecond).SetMaxReconnectInterval(10 * time.Millisecond)
	c := paho.NewClient(opts)
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(0)
	silent, err := net.Dial("tcp", e.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		e.lim.mu.Lock()
		n := len(e.lim.open)
		e.lim.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the broker accepted %d of 2 sockets", n)
		}
	}
	start := time.Now()
	done := make(chan struct{})
	go func() { e.Close(); close(done) }()
	select {
	case <-done:
		t.Logf("closed in %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(embeddedCloseGrace + time.Second):
		t.Fatalf("Close still waiting after %v", time.Since(start).Round(time.Millisecond))
	}
}
