// Package mqtttest starts a real Mosquitto broker on a free loopback port
// for tests, and offers a small recording MQTT client.
package mqtttest

import (
	"crypto/rand"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"
)

// Mosquitto is a broker process the test owns.
type Mosquitto struct {
	URL  string
	Port int
	bin  string
	conf string
	log  string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// MosquittoBin is where the tests look for the broker ($MOSQUITTO, else
// /usr/sbin/mosquitto, else the PATH).
func MosquittoBin() string {
	if p := os.Getenv("MOSQUITTO"); p != "" {
		return p
	}
	if _, err := os.Stat("/usr/sbin/mosquitto"); err == nil {
		return "/usr/sbin/mosquitto"
	}
	p, _ := exec.LookPath("mosquitto")
	return p
}

// FreePort returns a free TCP port on the loopback interface.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// StartMosquitto starts Mosquitto with a generated configuration on a free
// loopback port and stops it at the end of the test. It skips the test when
// the broker is not installed. extra is appended to the configuration
// (further listeners, TLS settings).
func StartMosquitto(t testing.TB, extra ...string) *Mosquitto {
	t.Helper()
	return startMosquitto(t, "allow_anonymous true\n", extra)
}

// StartMosquittoWithPassword starts Mosquitto as StartMosquitto does, but
// admitting only user with password (a password file, no anonymous
// clients), as a broker set up for Home Assistant is.
func StartMosquittoWithPassword(t testing.TB, user, password string, extra ...string) *Mosquitto {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(pw, []byte(PasswordLine(user, password)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return startMosquitto(t, fmt.Sprintf("allow_anonymous false\npassword_file %s\n", pw), extra)
}

// PasswordLine is a line of a Mosquitto password file for user: the
// "$6$" format (SHA-512 over the password and a random salt) that
// mosquitto_passwd wrote before 2.0 and every Mosquitto reads.
func PasswordLine(user, password string) string {
	salt := make([]byte, 12)
	rand.Read(salt)
	h := sha512.Sum512(append([]byte(password), salt...))
	return fmt.Sprintf("%s:$6$%s$%s", user, base64.StdEncoding.EncodeToString(salt), base64.StdEncoding.EncodeToString(h[:]))
}

func startMosquitto(t testing.TB, auth string, extra []string) *Mosquitto {
	t.Helper()
	bin := MosquittoBin()
	if bin == "" {
		t.Skip("mosquitto not found (install the mosquitto package or set MOSQUITTO)")
	}
	dir := t.TempDir()
	port := FreePort(t)
	m := &Mosquitto{URL: fmt.Sprintf("tcp://127.0.0.1:%d", port), Port: port, bin: bin,
		conf: filepath.Join(dir, "mosquitto.conf"), log: filepath.Join(dir, "mosquitto.log")}
	// Mosquitto started as root drops to the user "mosquitto", which cannot
	// read the test's temporary files: stay the user running the tests.
	conf := ""
	if u, err := user.Current(); err == nil {
		conf = "user " + u.Username + "\n"
	}
	conf += fmt.Sprintf("listener %d 127.0.0.1\n%spersistence false\n"+
		"max_queued_messages 10000\nlog_dest file %s\nlog_type error\nlog_type warning\nlog_type notice\n", port, auth, m.log)
	conf += strings.Join(extra, "\n") + "\n"
	if err := os.WriteFile(m.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.Stop()
		if t.Failed() {
			b, _ := os.ReadFile(m.log)
			e, _ := os.ReadFile(m.log + ".stderr")
			t.Logf("mosquitto log:\n%s%s", b, e)
		}
	})
	return m
}

// Start (re)starts the broker on its port and waits until it accepts
// connections.
func (m *Mosquitto) Start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return nil
	}
	cmd := exec.Command(m.bin, "-c", m.conf)
	if f, err := os.OpenFile(m.log+".stderr", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
		cmd.Stdout, cmd.Stderr = f, f
		defer f.Close()
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("mqtttest: starting mosquitto: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	addr := fmt.Sprintf("127.0.0.1:%d", m.Port)
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-done:
			b, _ := os.ReadFile(m.log)
			e, _ := os.ReadFile(m.log + ".stderr")
			return fmt.Errorf("mqtttest: mosquitto exited at start: %s %s", strings.TrimSpace(string(b)), strings.TrimSpace(string(e)))
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-done
			return fmt.Errorf("mqtttest: mosquitto did not listen on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	m.cmd, m.done = cmd, done
	return nil
}

// Stop kills the broker (as a crash would: no clean disconnects).
func (m *Mosquitto) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return
	}
	m.cmd.Process.Kill()
	<-m.done
	m.cmd = nil
}

// Msg is one received message.
type Msg struct {
	Topic    string
	Payload  []byte
	Retained bool
	At       time.Time
}

// Client is a recording test client: every message on its subscriptions
// is kept in order; subscriptions are renewed on reconnect.
type Client struct {
	c    paho.Client
	mu   sync.Mutex
	subs map[string]byte
	msgs []Msg
	cond chan struct{}
}

// NewClient connects a client with a unique id to url, disconnecting at the
// end of the test. opts adjust the client options (credentials, ...).
func NewClient(t testing.TB, url string, opts ...func(*paho.ClientOptions)) *Client {
	t.Helper()
	tc := &Client{subs: map[string]byte{}, cond: make(chan struct{})}
	o := paho.NewClientOptions().AddBroker(url).
		SetClientID(fmt.Sprintf("test-%d-%d", os.Getpid(), time.Now().UnixNano())).
		SetCleanSession(true).SetAutoReconnect(true).SetConnectRetry(true).
		SetConnectRetryInterval(200 * time.Millisecond).SetMaxReconnectInterval(500 * time.Millisecond).
		SetOrderMatters(true)
	o.SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
		tc.mu.Lock()
		tc.msgs = append(tc.msgs, Msg{m.Topic(), append([]byte(nil), m.Payload()...), m.Retained(), time.Now()})
		close(tc.cond)
		tc.cond = make(chan struct{})
		tc.mu.Unlock()
	})
	var connects atomic.Int32
	o.SetOnConnectHandler(func(c paho.Client) {
		// paho runs this on a goroutine of its own, possibly after the
		// test's first Subscribe: subscribing again then would have the
		// broker send the retained messages twice. Only reconnects need it.
		if connects.Add(1) == 1 {
			return
		}
		tc.mu.Lock()
		subs := make(map[string]byte, len(tc.subs))
		for k, v := range tc.subs {
			subs[k] = v
		}
		tc.mu.Unlock()
		if len(subs) > 0 {
			c.SubscribeMultiple(subs, nil).WaitTimeout(5 * time.Second)
		}
	})
	for _, f := range opts {
		f(o)
	}
	tc.c = paho.NewClient(o)
	if tok := tc.c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("mqtttest: connecting to %s: %v", url, tok.Error())
	}
	t.Cleanup(func() { tc.c.Disconnect(100) })
	return tc
}

// Paho returns the underlying client.
func (tc *Client) Paho() paho.Client { return tc.c }

// Subscribe subscribes to filter at QoS 1 and waits for the broker.
func (tc *Client) Subscribe(t testing.TB, filters ...string) {
	t.Helper()
	subs := map[string]byte{}
	tc.mu.Lock()
	for _, f := range filters {
		tc.subs[f] = 1
		subs[f] = 1
	}
	tc.mu.Unlock()
	if tok := tc.c.SubscribeMultiple(subs, nil); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("mqtttest: subscribe %v: %v", filters, tok.Error())
	}
}

// Publish publishes at QoS 1 and waits for the broker's acknowledgement.
func (tc *Client) Publish(t testing.TB, topic string, payload []byte) {
	t.Helper()
	if tok := tc.c.Publish(topic, 1, false, payload); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("mqtttest: publish to %s: %v", topic, tok.Error())
	}
}

// Flood publishes payload on topic n times at QoS 1 without waiting,
// but for the broker to take the last one.
func (tc *Client) Flood(t testing.TB, topic string, payload []byte, n int) {
	t.Helper()
	var tok paho.Token
	for range n {
		tok = tc.c.Publish(topic, 1, false, payload)
	}
	if tok != nil && (!tok.WaitTimeout(10*time.Second) || tok.Error() != nil) {
		t.Fatalf("mqtttest: flood of %s: %v", topic, tok.Error())
	}
}

// Messages returns a copy of what was received so far.
func (tc *Client) Messages() []Msg {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return append([]Msg(nil), tc.msgs...)
}

// Reset forgets what was received.
func (tc *Client) Reset() {
	tc.mu.Lock()
	tc.msgs = nil
	tc.mu.Unlock()
}

// Wait waits until pred holds for the received messages or timeout passes;
// it returns the messages and whether pred held.
func (tc *Client) Wait(timeout time.Duration, pred func([]Msg) bool) ([]Msg, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		tc.mu.Lock()
		msgs := append([]Msg(nil), tc.msgs...)
		cond := tc.cond
		tc.mu.Unlock()
		if pred(msgs) {
			return msgs, true
		}
		select {
		case <-cond:
		case <-deadline.C:
			return msgs, pred(msgs)
		}
	}
}

// On returns the messages on topic.
func On(msgs []Msg, topic string) []Msg {
	var out []Msg
	for _, m := range msgs {
		if m.Topic == topic {
			out = append(out, m)
		}
	}
	return out
}

// Log is a buffer that a logger writes and a test reads at the same time.
type Log struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Silent listens on a free loopback port, accepts connections and never
// answers them (a broker that hangs), until the end of the test. It
// returns the address.
func Silent(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// PublishLarge publishes a payload of size bytes on topic at QoS 0 (head,
// then spaces) over a raw MQTT connection of its own, streaming it, so
// that the test process never holds the payload. It returns once the
// broker has processed the publication (a PINGREQ sent after it was
// answered).
func PublishLarge(t testing.TB, url, topic string, retain bool, head []byte, size int) {
	t.Helper()
	addr := strings.TrimPrefix(url, "tcp://")
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Minute))
	cp := packets.NewControlPacket(packets.Connect).(*packets.ConnectPacket)
	cp.ProtocolName, cp.ProtocolVersion, cp.CleanSession, cp.Keepalive = "MQTT", 4, true, 60
	cp.ClientIdentifier = fmt.Sprintf("large-%d-%d", os.Getpid(), time.Now().UnixNano())
	if err := cp.Write(c); err != nil {
		t.Fatal(err)
	}
	if p, err := packets.ReadPacket(c); err != nil || p.(*packets.ConnackPacket).ReturnCode != 0 {
		t.Fatalf("mqtttest: connect for a large publication: %v %v", p, err)
	}
	// The fixed header and topic, then the payload in pieces.
	rem := 2 + len(topic) + size
	hdr := []byte{packets.Publish << 4}
	if retain {
		hdr[0] |= 1
	}
	for n := rem; ; {
		d := byte(n & 0x7f)
		n >>= 7
		if n > 0 {
			d |= 0x80
		}
		hdr = append(hdr, d)
		if n == 0 {
			break
		}
	}
	hdr = append(hdr, byte(len(topic)>>8), byte(len(topic)))
	hdr = append(hdr, topic...)
	hdr = append(hdr, head[:min(len(head), size)]...)
	if _, err := c.Write(hdr); err != nil {
		t.Fatal(err)
	}
	chunk := []byte(strings.Repeat(" ", 64<<10))
	for left := size - min(len(head), size); left > 0; left -= min(left, len(chunk)) {
		if _, err := c.Write(chunk[:min(left, len(chunk))]); err != nil {
			t.Fatalf("mqtttest: large publication: %v", err)
		}
	}
	if err := packets.NewControlPacket(packets.Pingreq).Write(c); err != nil {
		t.Fatal(err)
	}
	if _, err := packets.ReadPacket(c); err != nil {
		t.Fatalf("mqtttest: no PINGRESP after a large publication: %v", err)
	}
	packets.NewControlPacket(packets.Disconnect).Write(c)
}
