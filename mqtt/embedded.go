package mqtt

import (
	"errors"
	"fmt"
	"log/slog"
	"net"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
)

// Embedded is an in-process MQTT broker for a device that is its own hub.
type Embedded struct {
	srv  *mochi.Server
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
	srv := mochi.New(&mochi.Options{Logger: log.With("component", "embedded-broker")})
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
	ln.Close() // mochi opens its own listener; we only resolved port 0
	if err := srv.AddListener(listeners.NewTCP(listeners.Config{ID: "geist", Address: real})); err != nil {
		return nil, fmt.Errorf("mqtt: embedded broker: %w", err)
	}
	if err := srv.Serve(); err != nil {
		return nil, fmt.Errorf("mqtt: embedded broker: %w", err)
	}
	return &Embedded{srv: srv, addr: real}, nil
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

// Close stops the broker.
func (e *Embedded) Close() error {
	if e == nil || e.srv == nil {
		return errors.New("mqtt: embedded broker not running")
	}
	return e.srv.Close()
}
