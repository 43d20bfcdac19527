package mqtt

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// The embedded broker's limits (issue 22): mochi's defaults are no
// maximum packet size, no client limit and no CONNECT deadline, and it
// runs in the model's process, so that eight sockets announcing 256 MiB
// CONNECTs took RSS to 548 MB.
const (
	// EmbeddedMaxPacket bounds every packet a client sends, CONNECT
	// included (checked on the fixed header, before its body is read): a
	// request payload of the front end's largest (--max-payload, 64 KiB
	// by default) fits, with its topic and properties, several times over.
	EmbeddedMaxPacket = 256 << 10
	// EmbeddedMaxClients bounds the logged-in clients; EmbeddedMaxConns
	// the open sockets, logged in or not (more are closed at once).
	EmbeddedMaxClients = 64
	EmbeddedMaxConns   = 96
	// EmbeddedConnectTimeout is how long a socket may take to send its
	// CONNECT; after it the client's keepalive governs.
	EmbeddedConnectTimeout = 5 * time.Second
	// EmbeddedMaxInflight bounds a client's unacknowledged QoS 1/2
	// messages; EmbeddedMaxPending its queued writes.
	EmbeddedMaxInflight = 64
	EmbeddedMaxPending  = 1024
	// EmbeddedMaxRetained bounds the retained messages (geist's own
	// state, discovery and last answers need a few dozen).
	EmbeddedMaxRetained = 1024
)

// Embedded is an in-process MQTT broker for a device that is its own hub.
type Embedded struct {
	srv  *mochi.Server
	lim  *limitListener
	addr string
}

// StartEmbedded starts a broker (mochi-mqtt) listening on addr
// ("127.0.0.1:1883"). On a loopback address it admits anyone; on any other
// address it requires username and password and refuses to start without
// them, so it is never an open broker on the network.
func StartEmbedded(addr, username, password string, log *slog.Logger) (*Embedded, error) {
	if err := CheckEmbedded(addr, username, password); err != nil {
		return nil, err
	}
	var err error
	if log == nil {
		log = slog.Default()
	}
	caps := mochi.NewDefaultServerCapabilities()
	caps.MaximumPacketSize = EmbeddedMaxPacket
	caps.MaximumClients = EmbeddedMaxClients
	caps.MaximumInflight = EmbeddedMaxInflight
	caps.ReceiveMaximum = EmbeddedMaxInflight
	caps.MaximumClientWritesPending = EmbeddedMaxPending
	caps.MaximumSessionExpiryInterval = 3600
	caps.MaximumMessageExpiryInterval = 86400
	srv := mochi.New(&mochi.Options{Logger: log.With("component", "embedded-broker"), Capabilities: caps,
		ClientNetReadBufferSize: 4 << 10, ClientNetWriteBufferSize: 4 << 10})
	if err := srv.AddHook(&retainLimit{srv: srv}, nil); err != nil {
		return nil, fmt.Errorf("mqtt: embedded broker: %w", err)
	}
	if username != "" {
		ledger := &auth.Ledger{
			Users: auth.Users{username: {Username: auth.RString(username), Password: auth.RString(password)}},
			ACL:   auth.ACLRules{{Username: auth.RString(username)}},
		}
		err = srv.AddHook(new(auth.Hook), &auth.Options{Ledger: ledger})
	} else {
		err = srv.AddHook(new(auth.AllowHook), nil)
	}
	if err != nil {
		return nil, fmt.Errorf("mqtt: embedded broker: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mqtt: embedded broker: %w", err)
	}
	real := ln.Addr().String()
	lim := &limitListener{Listener: ln, sem: make(chan struct{}, EmbeddedMaxConns), log: log, open: map[*limitConn]struct{}{}}
	if err := srv.AddListener(listeners.NewNet("geist", lim)); err != nil {
		return nil, fmt.Errorf("mqtt: embedded broker: %w", err)
	}
	if err := srv.Serve(); err != nil {
		return nil, fmt.Errorf("mqtt: embedded broker: %w", err)
	}
	return &Embedded{srv: srv, lim: lim, addr: real}, nil
}

// CheckEmbedded checks the embedded broker's settings without starting
// it: addr is host:port, and an address other than loopback needs a
// username and a password.
func CheckEmbedded(addr, username, password string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("mqtt: embedded broker address %q: %w", addr, err)
	}
	loopback := host == "localhost"
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		loopback = true
	}
	if !loopback && (username == "" || password == "") {
		return fmt.Errorf("mqtt: the embedded broker on %s (not loopback) needs a username and a password", addr)
	}
	return nil
}

// Addr is the address the broker listens on.
func (e *Embedded) Addr() string { return e.addr }

// URL is a tcp:// URL to reach the broker from this machine.
func (e *Embedded) URL() string {
	host, port, _ := net.SplitHostPort(e.addr)
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "tcp://" + net.JoinHostPort(host, port)
}

// embeddedCloseGrace is how long Close lets mochi say goodbye to its
// clients before it closes their sockets itself.
const embeddedCloseGrace = 2 * time.Second

// Close stops the broker. It stops accepting first: mochi disconnects the
// clients it knows and only then closes its listener, so a client that
// reconnected in between (paho does at once) or was still sending its
// CONNECT was never disconnected, and mochi's Close waited for it until its
// keepalive ran out (a serve that did not stop within 30 s under qemu).
// Whatever socket is still open after embeddedCloseGrace is closed here,
// and Close gives up waiting after a second grace: it never hangs a stop.
func (e *Embedded) Close() error {
	if e == nil || e.srv == nil {
		return errors.New("mqtt: embedded broker not running")
	}
	e.lim.Listener.Close()
	done := make(chan error, 1)
	go func() { done <- e.srv.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(embeddedCloseGrace):
	}
	e.lim.closeAll()
	select {
	case err := <-done:
		return err
	case <-time.After(embeddedCloseGrace):
		return errors.New("mqtt: embedded broker: clients still attached after their sockets were closed; stopped without them")
	}
}

// limitListener bounds the open sockets and gives each a deadline for its
// CONNECT (mochi refreshes it to the keepalive after the CONNECT).
type limitListener struct {
	net.Listener
	sem     chan struct{}
	log     *slog.Logger
	refused atomic.Int64

	mu   sync.Mutex
	open map[*limitConn]struct{} // the accepted sockets not yet closed
}

// closeAll closes every socket still open.
func (l *limitListener) closeAll() {
	l.mu.Lock()
	conns := make([]*limitConn, 0, len(l.open))
	for c := range l.open {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.sem <- struct{}{}:
			c.SetDeadline(time.Now().Add(EmbeddedConnectTimeout))
			lc := &limitConn{Conn: c}
			lc.release = func() {
				l.mu.Lock()
				delete(l.open, lc)
				l.mu.Unlock()
				<-l.sem
			}
			l.mu.Lock()
			l.open[lc] = struct{}{}
			l.mu.Unlock()
			return lc, nil
		default:
			if n := l.refused.Add(1); n&(n-1) == 0 {
				l.log.Warn("embedded broker: too many connections; closing new ones", "max", cap(l.sem), "refused", n)
			}
			c.Close()
		}
	}
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}

// retainLimit keeps at most EmbeddedMaxRetained retained messages: a
// publish that would retain one more is delivered but not retained.
type retainLimit struct {
	mochi.HookBase
	srv *mochi.Server
}

func (h *retainLimit) ID() string { return "geist-retain-limit" }

func (h *retainLimit) Provides(b byte) bool { return b == mochi.OnPublish }

func (h *retainLimit) OnPublish(cl *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	if pk.FixedHeader.Retain && len(pk.Payload) > 0 && h.srv.Topics.Retained.Len() >= EmbeddedMaxRetained {
		if _, ok := h.srv.Topics.Retained.Get(pk.TopicName); !ok {
			pk.FixedHeader.Retain = false
		}
	}
	return pk, nil
}
